"""Client configurations built from what a live server really serves.

Formats (checked against the clients' own definitions):
- opencode: ``provider.<id>`` with ``npm: @ai-sdk/openai-compatible``, ``options.baseURL``, and
  ``models.<id>.limit.{context,output}`` (opencode's ConfigProvider schema, https://opencode.ai/config.json).
- openclaw: ``models.providers.<id>`` with ``baseUrl``, ``apiKey``, ``api: openai-completions`` and
  ``models[]`` entries with ``contextWindow`` / ``maxTokens`` (docs.openclaw.ai, model providers;
  seed 000 shows the provider block).
- Continue: a ``models`` entry of config.yaml: ``provider: openai``, ``apiBase``, ``roles``,
  ``defaultCompletionOptions.contextLength`` (docs.continue.dev/reference).
- Cline: the "OpenAI Compatible" provider settings (``openAiBaseUrl``, ``openAiModelId``,
  ``openAiModelInfo.contextWindow``/``maxTokens``).
- OpenAI SDKs: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

ClientName = Literal["opencode", "openclaw", "continue", "cline", "openai"]
OPENCODE_SCHEMA_URL = "https://opencode.ai/config.json"


class ServeInfo(BaseModel):
    """What a client needs to know about the server, read from the live server."""

    base_url: str
    model: str
    max_model_len: int | None = None
    api_key: str | None = None
    api_key_required: bool | None = None
    tool_calls: bool | None = Field(None, description="Server accepts tools with tool_choice auto.")
    reasoning: bool | None = Field(None, description="A reasoning parser splits thoughts off.")
    reasoning_field: str | None = None
    thinking_template: bool | None = None
    thinking_default: bool | None = None
    server_version: str | None = None
    # from the client's recorded base prompt (connect/limits.py); None: the generic limits below
    client_context: int | None = None
    client_output: int | None = None
    client_budget: str | None = None

    @property
    def api_base(self) -> str:
        return self.base_url.rstrip("/") + "/v1"

    @property
    def output_limit(self) -> int:
        """A max output that leaves room for the prompt: a quarter of the context, 1K..32K."""
        if self.client_output:
            return self.client_output
        if not self.max_model_len:
            return 4096
        return max(1024, min(32768, self.max_model_len // 4))

    @property
    def context(self) -> int:
        return self.client_context or self.max_model_len or 8192


def thinking_kwargs(thinking: str, info: ServeInfo) -> dict[str, Any] | None:
    """The chat_template_kwargs a client should send: only when asked to force thinking on/off."""
    if thinking == "server" or not info.thinking_template:
        return None
    return {"enable_thinking": thinking == "on"}


def opencode_config(info: ServeInfo, provider_id: str, thinking: str) -> dict[str, Any]:
    model: dict[str, Any] = {
        "name": info.model,
        "limit": {"context": info.context, "output": info.output_limit},
    }
    if info.tool_calls is not None:
        model["tool_call"] = info.tool_calls
    if info.reasoning is not None:
        model["reasoning"] = bool(info.reasoning)
    kwargs = thinking_kwargs(thinking, info)
    if kwargs is not None:
        # @ai-sdk/openai-compatible passes provider options through into the request body.
        model["options"] = {"chat_template_kwargs": kwargs}
    options: dict[str, Any] = {"baseURL": info.api_base}
    if info.api_key:
        options["apiKey"] = info.api_key
    return {
        "$schema": OPENCODE_SCHEMA_URL,
        "provider": {
            provider_id: {
                "npm": "@ai-sdk/openai-compatible",
                "name": f"vLLM ({info.model})",
                "options": options,
                "models": {info.model: model},
            }
        },
    }


def openclaw_config(info: ServeInfo, provider_id: str, thinking: str) -> dict[str, Any]:
    model: dict[str, Any] = {
        "id": info.model,
        "name": info.model,
        "reasoning": bool(info.reasoning),
        "contextWindow": info.context,
        "maxTokens": info.output_limit,
    }
    return {
        "models": {
            "providers": {
                provider_id: {
                    "baseUrl": info.api_base,
                    "apiKey": info.api_key or "none",
                    "api": "openai-completions",
                    "models": [model],
                }
            }
        }
    }


def continue_model(info: ServeInfo, provider_id: str, thinking: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": f"{info.model} ({provider_id})",
        "provider": "openai",
        "model": info.model,
        "apiBase": info.api_base,
        "roles": ["chat", "edit", "apply", "autocomplete"],
        "defaultCompletionOptions": {"contextLength": info.context, "maxTokens": info.output_limit},
    }
    if info.api_key:
        entry["apiKey"] = info.api_key
    if info.tool_calls:
        entry["capabilities"] = ["tool_use"]
    kwargs = thinking_kwargs(thinking, info)
    if kwargs is not None:
        entry["requestOptions"] = {"extraBodyProperties": {"chat_template_kwargs": kwargs}}
    return entry


def cline_settings(info: ServeInfo, provider_id: str, thinking: str) -> dict[str, Any]:
    return {
        "apiProvider": "openai",
        "openAiBaseUrl": info.api_base,
        "openAiApiKey": info.api_key or "EMPTY",
        "openAiModelId": info.model,
        "openAiModelInfo": {
            "contextWindow": info.context,
            "maxTokens": info.output_limit,
            "supportsImages": False,
            "supportsPromptCache": False,
        },
    }


def openai_env(info: ServeInfo) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": info.api_base,
        "OPENAI_API_KEY": info.api_key or "EMPTY",
        "OPENAI_MODEL": info.model,
    }


def default_path(client: str) -> Path | None:
    """Where each client reads its configuration (None: settings live in the editor; print them)."""
    home = Path.home()
    return {
        "opencode": Path("opencode.json"),
        "openclaw": home / ".openclaw" / "openclaw.json",
        "continue": home / ".continue" / "config.yaml",
        "cline": None,
        "openai": None,
    }[client]
