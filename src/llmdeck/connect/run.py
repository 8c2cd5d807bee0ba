"""`llmdeck connect`: read the live server, then write or print a client's configuration."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from llmdeck import __version__
from llmdeck.connect.agent_merge import (
    AGENT_CLIENTS,
    agent_block,
    agent_merged,
    agent_notes,
    agent_text,
    check_existing,
)
from llmdeck.connect.agents import (
    agent_default_path,
    aider_metadata_path,
    cline_auth_argv,
    cline_auth_command,
)
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
    drop_key,
    env_line,
    merged_env_text,
    merging,
    read_env,
    read_json,
    read_yaml,
    write_if_changed,
)
from llmdeck.errors import OperationError, UsageError
from llmdeck.util.atomic import check_writable, resolve_target, shared_with_others

if TYPE_CHECKING:
    from llmdeck.settings import Settings

CONNECT_RESULT_SCHEMA_VERSION = 1
CONNECT_CLIENTS: tuple[str, ...] = (
    "opencode",
    "openclaw",
    "continue",
    "cline",
    "openai",
    "claude-code",
    "codex",
    "qwen-code",
    "aider",
)
PROVIDER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
THINKING_CHOICES: tuple[str, ...] = ("server", "on", "off")


class WrittenFile(BaseModel):
    path: str
    action: Literal["created", "updated", "unchanged"]
    backup: str | None = None


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
    files: list[WrittenFile] = Field(default_factory=list, description="Files written alongside path.")
    commands: list[list[str]] = Field(
        default_factory=list, description="Commands the client's CLI takes (argv), e.g. `cline auth`."
    )


def _raise_unless_readable(report: Any, timeout: float) -> None:
    """What the server serves could not be read: a --model it does not serve (exit 2), no answer to
    health, key or models, or a request with no reply (a configuration would leave the client hanging)."""
    from llmdeck.checks.probe_base import STUCK_HINT
    from llmdeck.checks.run import ALWAYS

    failed = [p for p in report.probes if p.id in ALWAYS and p.status == "fail"]
    if failed and failed[0].data.get("model_not_served"):
        raise UsageError(failed[0].summary, hint=failed[0].fix)
    if failed:
        why = "; ".join(f"{p.id}: {p.summary}" for p in failed)
        raise OperationError(
            f"Cannot read what {report.server.base_url} serves ({why}).",
            hint=next((p.fix for p in sorted(failed, key=lambda p: p.id != "api_key") if p.fix), None)
            or "Run `llmdeck check` for details.",
        )
    silent = next((p for p in report.probes if p.data.get("timed_out")), None)
    if silent is not None:
        raise OperationError(
            f"{report.server.base_url} answers /health but gave a {silent.id} request no reply within "
            f"{timeout:g} s; no configuration was written.",
            hint=STUCK_HINT,
        )


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
    _raise_unless_readable(report, timeout)
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
    from llmdeck.connect.surfaces import check_client_surface

    info = apply_client_limits(client, info)
    check_client_surface(client, info, timeout)
    return info


def _notes(client: str, info: ServeInfo, thinking: str, provider_id: str) -> list[str]:
    notes: list[str] = []
    if info.tool_calls is False and client in {
        "opencode",
        "openclaw",
        "cline",
        "claude-code",
        "codex",
        "qwen-code",
    }:
        notes.append(
            f"The server rejects tool_choice auto: {client} will not be able to use tools. Restart it with "
            "--enable-auto-tool-choice --tool-call-parser <parser> (see `llmdeck check`)."
        )
    if info.thinking_template and thinking == "server" and client not in AGENT_CLIENTS:
        state = {True: "on", False: "off", None: "unknown"}[info.thinking_default]
        notes.append(
            f"Thinking is {state} by default on the server; nothing about it was written. Use "
            "--thinking off (or on) to make the client send chat_template_kwargs on every request."
        )
    no_place = {"openclaw", "cline", "openai", "codex", "qwen-code", "aider"}
    if thinking != "server" and client in no_place and info.thinking_template:
        notes.append(
            f"{client} has no place for extra request fields here; to change thinking, restart the server "
            "with --default-chat-template-kwargs '{\"enable_thinking\": false}'."
        )
    if client == "openclaw":
        notes.append("Select the model in openclaw as <provider>/<model>, e.g. in agents.defaults.model.")
    if client == "cline":
        notes.append(
            "Cline keeps these in its settings panel: choose API Provider 'OpenAI Compatible' and enter the "
            "values (base URL, API key, model ID, context window). The cline CLI does not read them; "
            f"configure it with: {cline_auth_command(info)}"
        )
    return notes + agent_notes(client, info, provider_id)


def render_text(client: str, block: Any) -> str:
    if client in AGENT_CLIENTS:
        return agent_text(client, block)
    if client == "continue":
        import yaml

        return str(yaml.safe_dump(block, sort_keys=False, allow_unicode=True))
    if client == "openai":
        return "".join(env_line(k, v, export=True) + "\n" for k, v in block.items())
    return json.dumps(block, indent=2, ensure_ascii=False) + "\n"


def _block(client: str, info: ServeInfo, provider_id: str, thinking: str, small_model: str | None) -> Any:
    """The client's own configuration block for ``info``."""
    if client in AGENT_CLIENTS:
        return agent_block(client, info, provider_id, thinking, small_model)
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


def _merged_text(
    client: str, path: Path, block: Any, info: ServeInfo, provider_id: str
) -> tuple[Any, str, list[tuple[Path, str]]]:
    """The file's new text: ``block`` merged into what ``path`` holds; the block as merged; other files."""
    if client in AGENT_CLIENTS:
        return agent_merged(client, path, block, info)
    merged: Any
    if client == "continue":
        from llmdeck.connect.yamlfile import continue_update, merged_yaml

        empty = {"name": "llmdeck", "version": "0.0.1", "schema": "v1"}
        text = merged_yaml(path, continue_update(block["models"][0], path), empty)
    elif client == "openai":
        merged = block
        text = merged_env_text(path, block)
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
            old = _dig(existing, "models", "providers", provider_id, "models")
            if isinstance(old, list):
                mine = block["models"]["providers"][provider_id]["models"]
                keep = [m for m in old if not (isinstance(m, dict) and m.get("id") == info.model)]
                block["models"]["providers"][provider_id]["models"] = [*keep, *mine]
        merged = deep_merge(existing, block)
        if client == "opencode" and not info.api_key:  # an earlier server's key: not for this one
            drop_key(merged, "provider", provider_id, "options", "apiKey")
        text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    return block, text, []


def _dig(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...``, None where a level is missing or is not an object (the user's file may hold
    a list or a string there: the merge then replaces it, after the backup)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def validate_request(client: str, thinking: str, provider_id: str) -> str:
    """The client's canonical name; UsageError (exit 2) for an unknown client or a bad flag."""
    name = client.strip().lower()
    if name not in CONNECT_CLIENTS:
        raise UsageError(f"Unknown client {client!r}.", hint=f"Use one of: {', '.join(CONNECT_CLIENTS)}.")
    if thinking not in THINKING_CHOICES:
        raise UsageError(f"--thinking {thinking!r} is not valid.", hint="Use server, on or off.")
    if not PROVIDER_ID.match(provider_id):
        raise UsageError(
            f"--provider-id {provider_id!r} is not a provider id.",
            hint="Use 1-64 letters, digits, '-' or '_' (it becomes a key in the client's config).",
        )
    return name


def target_path(client: str, file: Path | None) -> Path | None:
    if file is not None:
        path: Path | None = file
    elif client in AGENT_CLIENTS:
        path = agent_default_path(client)
    else:
        path = default_path(client)
    return Path(path).expanduser() if path is not None else None


def check_target(client: str, file: Path | None, print_only: bool) -> None:
    """Everything about the user's own file that can fail, checked before the server is asked:
    a folder, a read-only file or parent, a symlink to something unwritable, a malformed file. With
    ``print_only`` a ``file`` is refused: nothing would read or write it (it had been ignored silently)."""
    if print_only and file is not None:
        raise UsageError(
            f"--print writes nothing, so --file {file} would be neither read nor written.",
            hint="Drop --file to print the block, or drop --print to merge it into that file.",
        )
    path = None if print_only else target_path(client, file)
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{path} is a directory.", hint="Give a file path with --file.")
    check_writable(resolve_target(path))
    if client in AGENT_CLIENTS:
        check_existing(client, path)
        if client == "aider":
            check_writable(resolve_target(aider_metadata_path(path.absolute())))
    elif client == "continue":
        read_yaml(path)
    elif client == "openai":
        read_env(path)
    else:
        read_json(path)


def _write_extra(path: Path, text: str) -> WrittenFile:
    """A file written beside the client's own (aider's model metadata)."""
    action, saved = write_if_changed(path, text)
    return WrittenFile(path=str(path.resolve()), action=action, backup=str(saved) if saved else None)


def connect_client(
    client: str,
    info: ServeInfo,
    *,
    file: Path | None = None,
    print_only: bool = False,
    provider_id: str = "vllm",
    thinking: str = "server",
    small_model: str | None = None,
) -> ConnectResult:
    """Build ``client``'s configuration from ``info``; merge it into its file unless ``print_only``.

    Writing keeps every unrelated key of an existing file and backs the old file up first
    (``<file>.bak-<timestamp>``). Cline and plain OpenAI have no config file of their own: they are
    printed unless ``file`` is given (Cline: a JSON file, OpenAI: a dotenv file).
    """
    client = validate_request(client, thinking, provider_id)
    notes = _notes(client, info, thinking, provider_id)
    if info.client_budget:
        notes.append(info.client_budget)
    block = _block(client, info, provider_id, thinking, small_model)
    commands = [cline_auth_argv(info)] if client == "cline" else []
    path = None if print_only else target_path(client, file)
    if path is None:
        text = render_text(client, block)
        return ConnectResult(
            client=client,
            server=info,
            action="printed",
            config=block,
            text=text,
            notes=notes,
            commands=commands,
        )
    check_target(client, path, print_only)
    with merging(path):  # one connect at a time from the read to the write
        block, text, extras = _merged_text(client, path, block, info, provider_id)
        secret = bool(info.api_key) or bool(urlsplit(info.base_url).password)  # a key, a URL's password
        if secret and shared_with_others(path):
            notes.append(
                f"{path} was readable by other users; it holds a secret now, so it is owner-only (0600)."
            )
        action, saved = write_if_changed(path, text, secret=secret)
        files = [_write_extra(extra_path, extra_text) for extra_path, extra_text in extras]
    return ConnectResult(
        client=client,
        server=info,
        action=action,
        path=str(path.resolve()),
        backup=str(saved) if saved else None,
        config=block,
        text=text,
        notes=notes,
        files=files,
        commands=commands,
    )
