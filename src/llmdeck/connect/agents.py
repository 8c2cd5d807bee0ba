"""The configuration blocks of the terminal agents: Claude Code, Codex, Qwen Code, aider, the cline CLI.

Every key below was read from the real client (the pinned version in :data:`PACKAGES`) and then
checked by running it against a local capture server (a FAKE that logs each request), with
``strace -e trace=connect`` to see every host it tried:

- Claude Code 2.1.197, rechecked on 2.1.332 (``strings`` on its binary, ``claude -p`` runs): the
  ``env`` block of ``settings.json`` is applied over the process environment (an ``ANTHROPIC_API_KEY``
  from the shell is overridden by ``"ANTHROPIC_API_KEY": ""``; without that it is sent as
  ``x-api-key`` next to our bearer token). ``ANTHROPIC_BASE_URL`` is the root (it POSTs
  ``/v1/messages?beta=true``, ``/v1/messages/count_tokens?beta=true``; 2.1.197 also sent ``HEAD /``);
  ``ANTHROPIC_AUTH_TOKEN`` goes as ``Authorization: Bearer``; ``ANTHROPIC_MODEL`` is the model sent;
  ``ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL``, ``ANTHROPIC_SMALL_FAST_MODEL`` (the older name)
  and ``CLAUDE_CODE_SUBAGENT_MODEL`` pick the model for its aliases, side requests and subagents;
  ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` is the ``max_tokens`` it sends (32000 otherwise: measured);
  ``CLAUDE_CODE_MAX_CONTEXT_TOKENS`` is its context window for a model it does not know as Anthropic's
  (``claude -p /context`` shows ``… / 30k`` for 30000; without it 200K in 2.1.197, and 1M in 2.1.332,
  which also prints "doesn't recognize the model … assumes a context window of 1m"; 2.1.197 ignored it
  for any name starting ``claude-``, 2.1.332 for the names it knows: ``claude-sonnet-4-5`` shows 200k,
  ``claude-local`` 30k);
  ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` stops its DNS lookups of other hosts (measured:
  with it, its only connections are to the server).
- Codex 0.171.0 (``strings``, ``codex features list``, and its config errors: a wrong type names the
  key, e.g. ``invalid type: string "x", expected i64 in `model_context_window```): a
  ``[model_providers.<id>]`` table with ``name``, ``base_url`` (with ``/v1``; it POSTs
  ``/responses``), ``wire_api = "responses"`` (``"chat"`` is refused: "no longer supported"),
  ``experimental_bearer_token`` (sent as ``Authorization: Bearer``; ``env_key`` names an environment
  variable instead and wins over it); top-level ``model``, ``model_provider``,
  ``model_context_window`` (the session shows 95% of it as usable), ``model_auto_compact_token_limit``,
  ``check_for_update_on_startup``; ``[analytics] enabled``, ``[feedback] enabled``;
  ``[features] plugins = false`` stops its ``git clone https://github.com/openai/plugins.git`` at start
  (measured). Codex has no max-output key and sends no ``max_output_tokens``.
- Qwen Code 0.24.4 (its bundled settings schema and provider code, then ``qwen -p`` runs):
  ``security.auth.selectedType = "openai"``, ``model.name``, ``modelProviders.openai[]`` entries
  ``{id, name, baseUrl, envKey, generationConfig: {contextWindowSize, samplingParams: {max_tokens}}}``
  with the key in the settings' ``env`` block under ``envKey`` (its own setup stores it so);
  ``privacy.usageStatisticsEnabled``, ``general.enableAutoUpdate``, ``telemetry.enabled`` off (with
  them no DNS lookup of other hosts). It clamps each request's ``max_tokens`` to
  ``contextWindowSize - prompt - max(10000, 5%)`` (at least 4000): measured 4000 at 30000, 5000 at 100000.
- aider 0.86.2 (its ``args.py``/``main.py``/``models.py``, and its own configargparse parser reading
  the written file): ``.aider.conf.yml`` keys are the long options (``model``, ``openai-api-base``,
  ``openai-api-key``, ``model-metadata-file``, ``check-update``, ``analytics``);
  ``.aider.model.metadata.json`` is litellm's model table (``max_input_tokens`` is what aider warns
  and stops at; it sends no ``max_tokens``).
- cline 3.0.65 CLI: ``cline auth -p openai -k KEY -m MODEL -b BASE`` writes its own
  ``~/.cline/data/settings/providers.json`` (``openai-compatible``); it does not read the VS Code
  settings.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from llmdeck.connect.configs import ServeInfo
from llmdeck.util.shellquote import quote  # ESC in a model id as $'\x1b': the same word back

PACKAGES: dict[str, str] = {
    "claude-code": "npm install -g @anthropic-ai/claude-code@2.1.332",
    "codex": "npm install -g @openai/codex@0.171.0",
    "qwen-code": "npm install -g @qwen-code/qwen-code@0.24.4",
    "opencode": "npm install -g opencode-ai@1.18.33",
    "aider": "python -m pip install aider-chat==0.86.2",
    "cline": "npm install -g cline@3.0.65",
}
NO_KEY = "EMPTY"  # the placeholder a client that insists on a key sends to a server that needs none
CLAUDE_QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def claude_env(info: ServeInfo, thinking: str = "server", small_model: str | None = None) -> dict[str, str]:
    """The ``env`` block Claude Code reads (settings.json, or the process environment)."""
    small = small_model or info.model
    env = {
        "ANTHROPIC_BASE_URL": info.base_url.rstrip("/"),
        "ANTHROPIC_AUTH_TOKEN": info.api_key or "llmdeck",
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_MODEL": info.model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": info.model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": info.model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": small,
        "ANTHROPIC_SMALL_FAST_MODEL": small,
        "CLAUDE_CODE_SUBAGENT_MODEL": info.model,
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(info.output_limit),
        "CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(info.context),
        **CLAUDE_QUIET,
    }
    if thinking == "off":
        env["CLAUDE_CODE_DISABLE_THINKING"] = "1"
    return env


def export_lines(env: dict[str, str]) -> str:
    """``export K='v'`` lines (shell-quoted: a server's model id is data); an empty value is ``unset``."""
    lines = [f"unset {k}" if v == "" else f"export {k}={quote(v)}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


def codex_auto_compact(info: ServeInfo) -> int:
    """Codex compacts at this many tokens: the context less the reply's room (it sends no limit)."""
    return max(1024, info.context - info.output_limit)


def codex_config(info: ServeInfo, provider_id: str) -> dict[str, Any]:
    """``~/.codex/config.toml``'s keys for this server (merged into the user's file by tomlfile.py)."""
    provider: dict[str, Any] = {
        "name": f"llmdeck ({info.model})",
        "base_url": info.api_base,
        "wire_api": "responses",
    }
    if info.api_key:
        provider["experimental_bearer_token"] = info.api_key
    return {
        "model": info.model,
        "model_provider": provider_id,
        "model_context_window": info.context,
        "model_auto_compact_token_limit": codex_auto_compact(info),
        "check_for_update_on_startup": False,
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
        "features": {"plugins": False},
        "model_providers": {provider_id: provider},
    }


def key_env_name(provider_id: str) -> str:
    """The variable Qwen Code's ``envKey`` names: LLMDECK_<ID>_API_KEY."""
    return "LLMDECK_" + re.sub(r"[^A-Z0-9]+", "_", provider_id.upper()).strip("_") + "_API_KEY"


def qwen_provider_entry(info: ServeInfo, env_key: str) -> dict[str, Any]:
    return {
        "id": info.model,
        "name": f"{info.model} (llmdeck)",
        "baseUrl": info.api_base,
        "envKey": env_key,
        "generationConfig": {
            "contextWindowSize": info.context,
            "samplingParams": {"max_tokens": info.output_limit},
        },
    }


def qwen_settings(info: ServeInfo, env_key: str) -> dict[str, Any]:
    """Qwen Code's settings.json keys (``modelProviders.openai`` is a list: merged by model id)."""
    return {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": info.model},
        "modelProviders": {"openai": [qwen_provider_entry(info, env_key)]},
        "env": {env_key: info.api_key or NO_KEY},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False},
        "telemetry": {"enabled": False},
    }


def merge_qwen(existing: dict[str, Any], block: dict[str, Any], model: str) -> dict[str, Any]:
    """``block`` over the user's settings: other providers' and models' entries kept, ours replaced."""
    from llmdeck.connect.write import deep_merge

    mine = block["modelProviders"]["openai"]
    providers = existing.get("modelProviders")
    old = providers.get("openai") if isinstance(providers, dict) else None
    keep = (
        [m for m in old if not (isinstance(m, dict) and m.get("id") == model)]
        if isinstance(old, list)
        else []
    )
    merged = deep_merge(existing, {k: v for k, v in block.items() if k != "modelProviders"})
    others = dict(providers) if isinstance(providers, dict) else {}
    merged["modelProviders"] = {**others, "openai": [*keep, *mine]}
    return merged


def aider_model(info: ServeInfo) -> str:
    return f"openai/{info.model}"


def aider_metadata(info: ServeInfo) -> dict[str, Any]:
    """``.aider.model.metadata.json``: litellm's entry for the served model (no cost: a local server)."""
    return {
        aider_model(info): {
            "max_tokens": info.output_limit,
            "max_input_tokens": info.context,
            "max_output_tokens": info.output_limit,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
            "litellm_provider": "openai",
            "mode": "chat",
        }
    }


def aider_conf(info: ServeInfo, metadata_path: Path | None) -> dict[str, Any]:
    """``.aider.conf.yml`` keys (aider's long option names)."""
    conf: dict[str, Any] = {
        "model": aider_model(info),
        "openai-api-base": info.api_base,
        "openai-api-key": info.api_key or NO_KEY,
        "check-update": False,
        "analytics": False,
    }
    if metadata_path is not None:
        conf["model-metadata-file"] = str(metadata_path)
    return conf


def aider_metadata_path(conf_path: Path) -> Path:
    return conf_path.with_name(".aider.model.metadata.json")


def cline_auth_argv(info: ServeInfo, key: str | None = None) -> list[str]:
    """What the cline CLI takes: ``cline auth -p openai -k KEY -m MODEL -b BASE``."""
    return [
        "cline",
        "auth",
        "-p",
        "openai",
        "-k",
        key or info.api_key or NO_KEY,
        "-m",
        info.model,
        "-b",
        info.api_base,
    ]


def cline_auth_command(info: ServeInfo) -> str:
    """The command for a note (stderr): the key as ``"$LLMDECK_API_KEY"``, never the secret itself."""
    argv = cline_auth_argv(info)
    words = [quote(a) for a in argv]
    if info.api_key:
        words[5] = '"$LLMDECK_API_KEY"'
    return " ".join(words)


def home_file(env_var: str, default_dir: str, name: str) -> Path:
    """``$ENV_VAR/name`` when the client's home variable is set, else ``~/default_dir/name``."""
    base = os.environ.get(env_var)
    return (Path(base).expanduser() if base else Path.home() / default_dir) / name


def agent_default_path(client: str) -> Path | None:
    """Where each terminal agent reads its configuration."""
    if client == "claude-code":
        return home_file("CLAUDE_CONFIG_DIR", ".claude", "settings.json")
    if client == "codex":
        return home_file("CODEX_HOME", ".codex", "config.toml")
    if client == "qwen-code":
        return home_file("QWEN_HOME", ".qwen", "settings.json")
    if client == "aider":
        return Path(".aider.conf.yml")
    return None


def render_json(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
