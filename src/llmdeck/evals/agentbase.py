"""What every driven agent shares: where it runs (AgentSetup), what a parser has read so far of its
output (StreamState), and how a parser records a turn or an answer that never came (reach)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmdeck.evals.results import (
    AgentRun,
    ModelUnreached,
    TokenCounts,
    TranscriptEntry,
    TurnRecord,
    UnreachedKind,
)
from llmdeck.util.jsonsafe import loads as json_loads

TEXT_CAP = 4000  # characters kept of one transcript entry


@dataclass
class AgentSetup:
    """Where and against what one agent run happens."""

    workspace: Path
    home: Path
    base_url: str
    model: str
    api_key: str | None
    binary: Path
    python_dir: str  # put first on the agent's PATH: `python` / `pytest` are llmdeck's interpreter's
    log_dir: Path | None = None  # the agent's raw stdout and stderr per prompt (default: home)
    max_model_len: int | None = None

    @property
    def reply_limit(self) -> int | None:
        """The longest reply an agent is told to ask for: what ``llmdeck connect`` writes (a quarter of
        the context, 1K..32K), so a prompt near the window still leaves the reply room."""
        from llmdeck.checks.traffic import output_limit

        return output_limit(self.max_model_len) if self.max_model_len else None

    @property
    def logs(self) -> Path:
        path = self.log_dir or self.home
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class StreamState:
    """What a parser has read so far of one task's agent output."""

    run: AgentRun
    prompt: int = 0
    pending_tools: list[str] = field(default_factory=list)
    pending_input: int = 0
    scratch: dict[str, Any] = field(default_factory=dict)  # a parser's own state between lines


def clip(text: str, cap: int = TEXT_CAP) -> str:
    return text if len(text) <= cap else text[:cap] + f" … [{len(text) - cap} more characters]"


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def num(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def note(state: StreamState, t: float, kind: Any, text: str, **extra: Any) -> TranscriptEntry:
    entry = TranscriptEntry(t_s=t, prompt=state.prompt, kind=kind, text=clip(text), **extra)
    state.run.transcript.append(entry)
    return entry


def end_turn(state: StreamState, t: float, reason: Any, tokens: TokenCounts) -> TurnRecord:
    """One model request ended: record it with the tools it called."""
    run = state.run
    turn = TurnRecord(
        prompt=state.prompt,
        index=len(run.turns) + 1,
        t_s=round(t, 3),
        reason=str(reason) if reason is not None else None,
        tokens=tokens,
        tools=list(state.pending_tools),
    )
    state.pending_tools.clear()
    run.turns.append(turn)
    run.tokens.add(tokens)
    return turn


def unreached(state: StreamState, kind: UnreachedKind, status: int | None, message: str) -> None:
    """The client said it could not get an answer from the model: the first such word is kept (the
    session stops the agent on it)."""
    if state.run.unreached is None:
        state.run.unreached = ModelUnreached(kind=kind, status=status, message=clip(message.strip(), 500))


def unreached_by_status(state: StreamState, status: int | None, message: str) -> bool:
    """401/403: the key was refused; 404: no such model (or route). Other statuses are the model's
    or the server's trouble, scored as they are."""
    if status in (401, 403):
        unreached(state, "auth", status, message)
    elif status == 404:
        unreached(state, "not_found", status, message)
    else:
        return False
    return True


_STATUS = re.compile(r"\b(401|403|404)\b")


def status_in(text: str) -> int | None:
    m = _STATUS.search(text)
    return int(m.group(1)) if m else None


def event_of(state: StreamState, line: str, t: float) -> dict[str, Any] | None:
    """One line of an agent's JSON event stream as an object; a line that is not JSON is kept as text."""
    try:
        ev = json_loads(line)
    except ValueError:
        if line.strip():
            note(state, t, "text", line.rstrip("\n"))
        return None
    return ev if isinstance(ev, dict) else None


SHORTEST_KEY = 6  # a shorter "key" (a test's "x") would blank the same letters all through a transcript


def scrub_secrets(run: AgentRun, api_key: str | None) -> None:
    """What the agent printed, with the server's key (which the agent had in its environment: a tool
    call's ``printenv`` shows it) and other secrets in text (``HF_TOKEN=…``, bearer tokens) hidden: the
    transcript, the stderr tail and the client's words on an unreached model (the run's error) are kept
    in the result file and its page."""
    from llmdeck.util.redact import REDACTED, redact_text

    def scrub(text: str) -> str:
        if api_key and len(api_key) >= SHORTEST_KEY:
            text = text.replace(api_key, REDACTED)
        return redact_text(text)

    for entry in run.transcript:
        entry.text = scrub(entry.text)
    run.stderr_tail = scrub(run.stderr_tail)
    if run.unreached is not None:
        run.unreached.message = scrub(run.unreached.message)
