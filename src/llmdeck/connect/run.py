"""`llmdeck connect`: read the live server, then write or print a client's configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from llmdeck import __version__
from llmdeck.connect.configs import (
    ServeInfo,
    cline_settings,
    continue_model,
    default_path,
    openai_env,
    openclaw_config,
    opencode_config,
)
from llmdeck.connect.write import (
    deep_merge,
    env_line,
    merge_env,
    read_env,
    read_json,
    read_yaml,
    write_if_changed,
)
from llmdeck.errors import OperationError, UsageError

if TYPE_CHECKING:
    from llmdeck.settings import Settings

CONNECT_RESULT_SCHEMA_VERSION = 1
CONNECT_CLIENTS: tuple[str, ...] = ("opencode", "openclaw", "continue", "cline", "openai")
THINKING_CHOICES: tuple[str, ...] = ("server", "on", "off")


class ConnectResult(BaseModel):
    """What `llmdeck connect` did, and the configuration itself."""

    schema_version: int = CONNECT_RESULT_SCHEMA_VERSION
    kind: Literal["llmdeck.connect"] = "llmdeck.connect"
    llmdeck_version: str = __version__
    client: str
    server: ServeInfo
    action: Literal["created", "updated", "unchanged", "printed"]
    path: str | None = None
    backup: str | None = None
    config: Any = None
    text: str = ""
    notes: list[str] = Field(default_factory=list)


def gather_info(
    base_url: str,
    *,
    model: str | None,
    api_key: str | None,
    settings: Settings,
    timeout: float = 60.0,
    client: str | None = None,
) -> ServeInfo:
    """Ask the live server for its model, context length, tool and thinking behaviour.

    With ``client``: also the limits for that client's recorded base prompt (connect/limits.py);
    raises OperationError when the server cannot hold it.
    """
    from llmdeck.checks.run import run_checks

    report = run_checks(
        base_url,
        client=None,
        model=model,
        api_key=api_key,
        settings=settings,
        probes=["reasoning_split", "thinking_default", "tool_auto"],
        timeout=timeout,
        deadline_s=max(300.0, 5 * timeout),
    )
    failed = [p for p in report.probes if p.id in {"health", "api_key", "models"} and p.status == "fail"]
    if failed:
        why = "; ".join(f"{p.id}: {p.summary}" for p in failed)
        raise OperationError(
            f"Cannot read what {report.server.base_url} serves ({why}).",
            hint=next((p.fix for p in sorted(failed, key=lambda p: p.id != "api_key") if p.fix), None)
            or "Run `llmdeck check` for details.",
        )
    facts = report.server
    if not facts.model:
        raise OperationError(f"{facts.base_url} lists no model.", hint="Run `llmdeck check` for details.")
    key = api_key if api_key is not None else getattr(settings, "api_key", None)
    info = ServeInfo(
        base_url=facts.base_url,
        model=facts.model,
        max_model_len=facts.max_model_len,
        api_key=key,
        api_key_required=facts.api_key_required,
        tool_calls=facts.auto_tool_choice,
        reasoning=facts.reasoning_parser,
        reasoning_field=facts.reasoning_field,
        thinking_template=facts.thinking_template,
        thinking_default=facts.thinking_default,
        server_version=facts.server_version,
    )
    if client is None:
        return info
    from llmdeck.connect.limits import apply_client_limits

    return apply_client_limits(client, info)


def _notes(client: str, info: ServeInfo, thinking: str) -> list[str]:
    notes: list[str] = []
    if info.tool_calls is False and client in {"opencode", "openclaw", "cline"}:
        notes.append(
            f"The server rejects tool_choice auto: {client} will not be able to use tools. Restart it with "
            "--enable-auto-tool-choice --tool-call-parser <parser> (see `llmdeck check`)."
        )
    if info.thinking_template and thinking == "server":
        state = {True: "on", False: "off", None: "unknown"}[info.thinking_default]
        notes.append(
            f"Thinking is {state} by default on the server; nothing about it was written. Use "
            "--thinking off (or on) to make the client send chat_template_kwargs on every request."
        )
    if thinking != "server" and client in {"openclaw", "cline", "openai"} and info.thinking_template:
        notes.append(
            f"{client} has no place for extra request fields here; to change thinking, restart the server "
            "with --default-chat-template-kwargs '{\"enable_thinking\": false}'."
        )
    if client == "openclaw":
        notes.append("Select the model in openclaw as <provider>/<model>, e.g. in agents.defaults.model.")
    if client == "cline":
        notes.append(
            "Cline keeps these in its settings panel: choose API Provider 'OpenAI Compatible' and enter the "
            "values (base URL, API key, model ID, context window)."
        )
    return notes


def render_text(client: str, block: Any) -> str:
    if client == "continue":
        import yaml

        return str(yaml.safe_dump(block, sort_keys=False, allow_unicode=True))
    if client == "openai":
        return "".join(env_line(k, v, export=True) + "\n" for k, v in block.items())
    return json.dumps(block, indent=2, ensure_ascii=False) + "\n"


def _block(client: str, info: ServeInfo, provider_id: str, thinking: str) -> Any:
    """The client's own configuration block for ``info``."""
    if client == "opencode":
        return opencode_config(info, provider_id, thinking)
    elif client == "openclaw":
        return openclaw_config(info, provider_id, thinking)
    elif client == "continue":
        return {"models": [continue_model(info, provider_id, thinking)]}
    elif client == "cline":
        return cline_settings(info, provider_id, thinking)
    else:
        return openai_env(info)


def _merged_text(client: str, path: Path, block: Any, info: ServeInfo, provider_id: str) -> tuple[Any, str]:
    """The file's new text: ``block`` merged into what ``path`` holds; and the block as merged."""
    merged: Any
    if client == "continue":
        existing = read_yaml(path)
        merged = dict(existing) if existing else {"name": "llmdeck", "version": "0.0.1", "schema": "v1"}
        entry = block["models"][0]
        models = [
            m
            for m in (merged.get("models") or [])
            if not (isinstance(m, dict) and m.get("name") == entry["name"])
        ]
        merged["models"] = [*models, entry]
        text = render_text(client, merged)
    elif client == "openai":
        merged = block
        text = "\n".join(merge_env(read_env(path), block)) + "\n"
    else:
        existing = read_json(path)
        if client == "opencode":
            block = dict(block)
            if "$schema" in existing:
                block.pop("$schema")
            if "model" not in existing:
                block["model"] = f"{provider_id}/{info.model}"
        if client == "openclaw":
            # models[] is a list: replace our model's entry, keep the user's others.
            old = existing.get("models", {}).get("providers", {}).get(provider_id, {}).get("models")
            if isinstance(old, list):
                mine = block["models"]["providers"][provider_id]["models"]
                keep = [m for m in old if not (isinstance(m, dict) and m.get("id") == info.model)]
                block["models"]["providers"][provider_id]["models"] = [*keep, *mine]
        merged = deep_merge(existing, block)
        text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    return block, text


def connect_client(
    client: str,
    info: ServeInfo,
    *,
    file: Path | None = None,
    print_only: bool = False,
    provider_id: str = "vllm",
    thinking: str = "server",
) -> ConnectResult:
    """Build ``client``'s configuration from ``info``; merge it into its file unless ``print_only``.

    Writing keeps every unrelated key of an existing file and backs the old file up first
    (``<file>.bak-<timestamp>``). Cline and plain OpenAI have no config file of their own: they are
    printed unless ``file`` is given (Cline: a JSON file, OpenAI: a dotenv file).
    """
    if client not in CONNECT_CLIENTS:
        raise UsageError(f"Unknown client {client!r}.", hint=f"Use one of: {', '.join(CONNECT_CLIENTS)}.")
    if thinking not in THINKING_CHOICES:
        raise UsageError(f"--thinking {thinking!r} is not valid.", hint="Use server, on or off.")
    notes = _notes(client, info, thinking)
    if info.client_budget:
        notes.append(info.client_budget)
    block = _block(client, info, provider_id, thinking)
    path = file if file is not None else default_path(client)
    if print_only or path is None:
        return ConnectResult(
            client=client,
            server=info,
            action="printed",
            config=block,
            text=render_text(client, block),
            notes=notes,
        )
    path = Path(path).expanduser()
    if path.exists() and path.is_dir():
        raise UsageError(f"{path} is a directory.", hint="Give a file path with --file.")
    block, text = _merged_text(client, path, block, info, provider_id)
    action, saved = write_if_changed(path, text, secret=bool(info.api_key))
    return ConnectResult(
        client=client,
        server=info,
        action=action,
        path=str(path.resolve()),
        backup=str(saved) if saved else None,
        config=block,
        text=text,
        notes=notes,
    )
