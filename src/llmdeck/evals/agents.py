"""The agents `llmdeck eval` drives headless: how to start each, and how to read what it prints.

opencode: ``opencode run --format json`` prints one JSON event per line (``step_finish`` carries the
step's tokens and why it ended, ``tool_use`` a tool call, ``text`` the reply); follow-up prompts go to the
same session (``-s SESSION``). Its configuration is the one `llmdeck connect opencode` writes, in the
agent's own scratch home (``$XDG_CONFIG_HOME/opencode/opencode.json``), never in the workspace.

aider: ``aider --message PROMPT`` prints plain text; every model request ends with a
``Tokens: 2.1k sent, 150 received.`` line. Follow-ups restore the chat history. It exits 0 even when
its only request got a 401: its ``litellm.AuthenticationError`` line (and the like) marks the run as
one that never reached the model.

Claude Code and codex: see evals/claude.py and evals/codex.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from llmdeck.errors import MissingDependencyError, UsageError
from llmdeck.evals import claude, codex
from llmdeck.evals.agentbase import (
    TEXT_CAP,
    AgentSetup,
    StreamState,
    clip,
    end_turn,
    obj,
    unreached,
    unreached_by_status,
)
from llmdeck.evals.results import TokenCounts, TranscriptEntry, TurnRecord
from llmdeck.util.jsonsafe import loads as json_loads

__all__ = ["AgentSetup", "StreamState", "clip"]

EVAL_CLIENTS: tuple[str, ...] = ("opencode", "aider", "claude-code", "codex")
OPENCODE_PROVIDER = "vllm"
# the executable each client installs, and the version llmdeck's parsers were written against
BINARIES = {"opencode": "opencode", "aider": "aider", "claude-code": "claude", "codex": "codex"}
PINNED = {"opencode": "1.18.33", "aider": "0.86.2", "claude-code": claude.VERSION, "codex": codex.VERSION}
NPM_PACKAGES = {
    "opencode": "opencode-ai",
    "claude-code": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
}


def eval_client(name: str | None) -> str:
    """The agent's name, lower-cased; exit 2 when none is given or llmdeck has no harness for it (the
    first thing `eval` checks: the tasks and the agent's install come after)."""
    client = (name or "").strip().lower()
    if not client:
        raise UsageError("Which agent? Give --client.", hint=f"Use one of: {', '.join(EVAL_CLIENTS)}.")
    if client not in EVAL_CLIENTS:
        raise UsageError(f"Unknown eval client {client!r}.", hint=f"Use one of: {', '.join(EVAL_CLIENTS)}.")
    return client


def find_binary(client: str, explicit: Path | None) -> Path:
    """The agent's executable: --agent-bin, else PATH, else the copy the tests install (.cache/clients)."""
    client = eval_client(client)
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UsageError(f"--agent-bin {path} is not an executable file.", hint=install_hint(client))
        return path.absolute()  # the agent starts in its workspace: a relative path would not resolve
    name = BINARIES[client]
    found = shutil.which(name)
    if found:
        return Path(found).absolute()
    cached = Path.cwd() / ".cache" / "clients" / client / "node_modules" / ".bin" / name
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    raise MissingDependencyError(
        f"{client} is not installed here ({name} is not on PATH).", hint=install_hint(client)
    )


def install_hint(client: str) -> str:
    if client == "aider":
        how = "`pipx install aider-chat==0.86.2` (or into a venv of its own)"
    else:
        how = f"`npm install -g {NPM_PACKAGES[client]}@{PINNED[client]}`"
    return f"Install it with {how} (the version llmdeck reads the output of), or pass --agent-bin PATH."


_VERSION = re.compile(r"\b\d+\.\d+(?:\.\d+)?[\w.+-]*")


def client_version(binary: Path) -> str | None:
    """The client's version from ``--version`` (``2.1.197 (Claude Code)``, ``codex-cli 0.171.0``, …)."""
    try:
        res = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (res.stdout or res.stderr).strip()
    m = _VERSION.search(text)
    if m:
        return m.group(0)
    words = text.split()
    return words[-1] if words else None


# the user's own settings for these clients would send them elsewhere (another provider, a proxy,
# a key): none of them reaches the agent
_FOREIGN = ("PYTHON", "VIRTUAL_ENV", "ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_", "AIDER_")


def agent_env(setup: AgentSetup, client: str = "opencode") -> dict[str, str]:
    """A throwaway home (the agent's config, data and logs stay there), the workspace as $PWD, and the
    client's own variables pointing at the server."""
    home = setup.home
    env = {k: v for k, v in os.environ.items() if not k.startswith(_FOREIGN)}
    env.update(
        PWD=str(setup.workspace),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        PATH=setup.python_dir + os.pathsep + env.get("PATH", ""),
        PYTHONDONTWRITEBYTECODE="1",
    )
    shared = os.environ.get("LLMDECK_EVAL_CACHE_HOME")
    if shared:  # an offline host: the agent's packages (opencode's provider) from a cache filled beforehand
        env["XDG_CACHE_HOME"] = shared
    if client == "claude-code":
        env.update(claude.env(setup))
    elif client == "codex":
        env.update(codex.env(setup))
    elif client == "aider":
        # litellm's bundled price list, not GitHub's; wide lines, so that one error is one line
        env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", COLUMNS="1000")
    return env


def prepare_home(client: str, setup: AgentSetup) -> None:
    """What a client reads from its home before the first task (opencode's: the runner, via connect)."""
    if client == "codex":
        codex.write_config(setup)
    elif client == "aider":  # a fresh (empty) model-info cache: aider does not fetch GitHub's copy
        cache = setup.home / ".aider" / "caches" / "model_prices_and_context_window.json"
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("{}", encoding="utf-8")


def opencode_config_path(setup: AgentSetup) -> Path:
    return setup.home / ".config" / "opencode" / "opencode.json"


def opencode_argv(setup: AgentSetup, prompt: str, session: str | None) -> list[str]:
    # --thinking: the reasoning parts come out as events too (the transcript keeps them)
    argv = [str(setup.binary), "run", "--format", "json", "--title", "llmdeck eval", "--auto", "--thinking"]
    argv += ["-m", f"{OPENCODE_PROVIDER}/{setup.model}"]
    if session:
        argv += ["-s", session]
    return [*argv, prompt]


def aider_argv(setup: AgentSetup, prompt: str, followup: bool) -> list[str]:
    files = sorted(
        str(p.relative_to(setup.workspace))
        for p in setup.workspace.rglob("*")
        if p.is_file() and ".git" not in p.parts and "__pycache__" not in p.parts
    )
    argv = [
        str(setup.binary), "--model", f"openai/{setup.model}", "--openai-api-base", setup.base_url + "/v1",
        "--openai-api-key", setup.api_key or "sk-none", "--yes-always", "--no-auto-commits",
        "--no-check-update", "--analytics-disable", "--no-show-model-warnings", "--no-pretty",
        "--no-fancy-input", "--no-stream",
    ]  # fmt: skip
    meta = aider_metadata(setup)
    if meta is not None:
        argv += ["--model-metadata-file", str(meta)]
    if followup:
        argv.append("--restore-chat-history")
    return [*argv, "--message", prompt, *files]


def aider_metadata(setup: AgentSetup) -> Path | None:
    """The served model's limits for aider (litellm's model-metadata format): without them aider takes
    the context as 0 and stops at once with "has hit a token limit"."""
    if not setup.max_model_len:
        return None
    path = setup.home / "aider-model-metadata.json"
    entry = {
        "max_input_tokens": setup.max_model_len,
        "max_output_tokens": setup.reply_limit,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "litellm_provider": "openai",
        "mode": "chat",
    }
    path.write_text(json.dumps({f"openai/{setup.model}": entry}, indent=2), encoding="utf-8")
    return path


def _tokens(raw: Any) -> TokenCounts:
    if not isinstance(raw, dict):
        return TokenCounts()
    cache = obj(raw.get("cache"))

    def num(v: Any) -> int:
        return int(v) if isinstance(v, int | float) else 0

    return TokenCounts(
        input=num(raw.get("input")),
        output=num(raw.get("output")),
        reasoning=num(raw.get("reasoning")),
        cache_read=num(cache.get("read")),
        cache_write=num(cache.get("write")),
    )


def _tool_entry(part: dict[str, Any], t: float, prompt: int) -> TranscriptEntry:
    state = obj(part.get("state"))
    args = json.dumps(state.get("input"), ensure_ascii=False) if state.get("input") is not None else ""
    out = state.get("output") if state.get("output") is not None else state.get("error", "")
    text = f"{args}\n→ {out}" if out else args
    return TranscriptEntry(
        t_s=t,
        prompt=prompt,
        kind="tool",
        tool=str(part.get("tool")),
        status=state.get("status"),
        text=clip(text),
    )


def feed_opencode(state: StreamState, line: str, t: float) -> TurnRecord | None:
    """One line of ``opencode run --format json``; returns the turn a ``step_finish`` ended."""
    try:
        ev = json_loads(line)
    except ValueError:
        if line.strip():
            state.run.transcript.append(
                TranscriptEntry(t_s=t, prompt=state.prompt, kind="text", text=clip(line))
            )
        return None
    if not isinstance(ev, dict):
        return None
    run, kind = state.run, ev.get("type")
    part = obj(ev.get("part"))
    if isinstance(ev.get("sessionID"), str):
        run.session_id = ev["sessionID"]
    if kind in ("text", "reasoning") and part.get("text"):
        run.transcript.append(
            TranscriptEntry(t_s=t, prompt=state.prompt, kind=kind, text=clip(str(part["text"])))
        )
    elif kind == "tool_use":
        entry = _tool_entry(part, t, state.prompt)
        run.transcript.append(entry)
        state.pending_tools.append(entry.tool or "?")
    elif kind == "error":
        err = obj(ev.get("error"))
        data = obj(err.get("data"))
        msg = f"{err.get('name', 'error')}: {data.get('message') or err.get('message') or ''}"
        run.transcript.append(TranscriptEntry(t_s=t, prompt=state.prompt, kind="error", text=clip(msg)))
        status = data.get("statusCode")
        unreached_by_status(state, status if isinstance(status, int) else None, msg)
    elif kind == "step_finish":
        return end_turn(state, t, part.get("reason"), _tokens(part.get("tokens")))
    return None


_AIDER_TOKENS = re.compile(r"Tokens: ([\d.]+)(k?) sent.*?([\d.]+)(k?) received")
# after a reply cut by the context or output limit aider prints estimates instead of a Tokens: line
_AIDER_LIMIT_IN = re.compile(r"^Input tokens: ~([\d,]+)")
_AIDER_LIMIT_OUT = re.compile(r"^Output tokens: ~([\d,]+)")


def _k(num: str, k: str) -> int:
    return round(float(num) * (1000 if k else 1))


# litellm's exception line: the ones that mean no answer came from the model at all
_AIDER_ERROR = re.compile(r"^litellm\.(\w+): (.*)")
_AIDER_UNREACHED = {
    "AuthenticationError": ("auth", 401),
    "PermissionDeniedError": ("auth", 403),
    "NotFoundError": ("not_found", 404),
    "APIConnectionError": ("connection", None),
}


def _aider_error(state: StreamState, line: str) -> None:
    m = _AIDER_ERROR.match(line)
    if m is None:
        return
    name, text = m.group(1), line.strip()
    if name in _AIDER_UNREACHED:
        kind, status = _AIDER_UNREACHED[name]
        unreached(state, kind, status, text)  # type: ignore[arg-type]
    elif name == "InternalServerError" and "Connection error" in text:  # how it says "refused"
        unreached(state, "connection", None, text)


def feed_aider(state: StreamState, line: str, t: float) -> TurnRecord | None:
    """One line of aider's plain output; a ``Tokens:`` line ends a turn."""
    _aider_error(state, line)
    m = _AIDER_TOKENS.search(line)
    if m:
        tokens = TokenCounts(input=_k(m.group(1), m.group(2)), output=_k(m.group(3), m.group(4)))
        return end_turn(state, t, None, tokens)
    m = _AIDER_LIMIT_IN.match(line)
    if m:
        state.pending_input = int(m.group(1).replace(",", ""))
    m = _AIDER_LIMIT_OUT.match(line)
    if m:
        tokens = TokenCounts(input=state.pending_input, output=int(m.group(1).replace(",", "")))
        state.pending_input = 0
        return end_turn(state, t, "length", tokens)
    text = line.rstrip("\n")
    if text.strip():
        tr = state.run.transcript
        if tr and tr[-1].kind == "text" and tr[-1].prompt == state.prompt and len(tr[-1].text) < TEXT_CAP:
            tr[-1].text = clip(tr[-1].text + "\n" + text)
        else:
            tr.append(TranscriptEntry(t_s=t, prompt=state.prompt, kind="text", text=clip(text)))
    return None


def argv_for(client: str, setup: AgentSetup, prompt: str, index: int, session: str | None) -> list[str]:
    if client == "opencode":
        return opencode_argv(setup, prompt, session)
    if client == "claude-code":
        return claude.argv(setup, prompt, session)
    if client == "codex":
        return codex.argv(setup, prompt, session)
    return aider_argv(setup, prompt, followup=index > 0)


def needs_session(client: str) -> bool:
    """Follow-ups continue a session the client named in its output (aider restores its history file)."""
    return client != "aider"


def feed(client: str, state: StreamState, line: str, t: float) -> TurnRecord | None:
    parse = {
        "opencode": feed_opencode,
        "claude-code": claude.feed,
        "codex": codex.feed,
    }.get(client, feed_aider)
    return parse(state, line, t)


def shown_argv(argv: list[str], prompt: str) -> list[str]:
    """The command as recorded: the prompt (the task's text, in the result already) elided, keys hidden."""
    from llmdeck.util.redact import redact_argv

    return redact_argv(["<prompt>" if a == prompt else a for a in argv])
