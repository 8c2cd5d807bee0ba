"""The terminal agents' blocks, printed forms, and merges into the user's files (see agents.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmdeck.connect import agents
from llmdeck.connect.configs import ServeInfo
from llmdeck.connect.write import deep_merge, read_json, read_yaml

AGENT_CLIENTS: tuple[str, ...] = ("claude-code", "codex", "qwen-code", "aider")


def agent_block(
    client: str, info: ServeInfo, provider_id: str, thinking: str, small_model: str | None = None
) -> Any:
    if client == "claude-code":
        return {"env": agents.claude_env(info, thinking, small_model)}
    if client == "codex":
        return agents.codex_config(info, provider_id)
    if client == "qwen-code":
        return agents.qwen_settings(info, agents.key_env_name(provider_id))
    return agents.aider_conf(info, None)


def agent_text(client: str, block: Any) -> str:
    """What ``--print`` shows: Claude Code as export lines, Codex as TOML, aider as YAML."""
    if client == "claude-code":
        return agents.export_lines(block["env"])
    if client == "codex":
        from llmdeck.connect.tomlfile import render_toml

        return render_toml(block)
    if client == "aider":
        import yaml

        return str(yaml.safe_dump(block, sort_keys=False, allow_unicode=True))
    return agents.render_json(block)


def agent_merged(
    client: str, path: Path, block: Any, info: ServeInfo
) -> tuple[Any, str, list[tuple[Path, str]]]:
    """(block as merged, the file's new text, other files to write alongside: path and text)."""
    if client == "codex":
        from llmdeck.connect.tomlfile import merged_toml

        stale = (
            () if info.api_key else ("model_providers", block["model_provider"], "experimental_bearer_token")
        )
        return block, merged_toml(path, block, stale), []
    if client == "qwen-code":
        merged = agents.merge_qwen(read_json(path), block, info.model)
        return block, agents.render_json(merged), []
    if client == "aider":
        from llmdeck.connect.yamlfile import merged_yaml

        meta_path = agents.aider_metadata_path(path.expanduser().absolute())
        block = agents.aider_conf(info, meta_path)
        meta = deep_merge(read_json(meta_path), agents.aider_metadata(info))
        text = merged_yaml(path, lambda conf: conf.update(block))  # the user's comments kept
        return block, text, [(meta_path, agents.render_json(meta))]
    existing = read_json(path)
    return block, agents.render_json(deep_merge(existing, block)), []


def check_existing(client: str, path: Path) -> None:
    """Parse the user's file(s) now, before asking the server: a malformed one is exit 2 up front."""
    if client == "codex":
        from llmdeck.connect.tomlfile import read_toml

        read_toml(path)
    elif client == "aider":
        read_yaml(path)
        read_json(agents.aider_metadata_path(path.expanduser().absolute()))
    else:
        read_json(path)


def agent_notes(client: str, info: ServeInfo, provider_id: str) -> list[str]:
    notes: list[str] = []
    if client == "claude-code" and info.model.startswith("claude-"):
        notes.append(
            f"The served name {info.model!r} starts with 'claude-': Claude Code takes a name it knows as "
            "Anthropic's model and uses that model's window, ignoring CLAUDE_CODE_MAX_CONTEXT_TOKENS "
            "(2.1.332: claude-sonnet-4-5 reads as 200K; 2.1.197 did so for any claude- name); serve the "
            "model under another name (--served-model-name, or a gateway alias)."
        )
    if client in {"claude-code", "codex"}:
        api = "/v1/messages" if client == "claude-code" else "/v1/responses"
        notes.append(f"{client} speaks only {api}: `llmdeck check --client {client}` tests that surface.")
    if client == "codex":
        notes.append(
            "Codex sends no max_output_tokens: the server's own limit applies; it compacts at "
            f"{agents.codex_auto_compact(info)} tokens (model_auto_compact_token_limit)."
        )
    if client == "qwen-code":
        notes.append(
            f"The key is kept in the settings' env block under {agents.key_env_name(provider_id)} (its "
            "envKey); Qwen Code clamps max_tokens to contextWindowSize less the prompt and a 10K margin "
            "(never under 4000)."
        )
    return notes
