"""The versioned result of `llmdeck eval` (``kind`` llmdeck.eval.result), written atomically as it goes."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.bench.result_schema import HostSummary, ResultHeader, ServerMetricsSummary
from llmdeck.evals.spec import AgentLimits
from llmdeck.evals.verifier import VerifierRun

EVAL_SCHEMA_VERSION = 1
EVAL_RESULT_KIND = "llmdeck.eval.result"


class TokenCounts(BaseModel):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output + self.reasoning

    def add(self, other: TokenCounts) -> None:
        for key in ("input", "output", "reasoning", "cache_read", "cache_write"):
            setattr(self, key, getattr(self, key) + getattr(other, key))


class TurnRecord(BaseModel):
    """One model request of the agent (opencode: a step; aider: one "Tokens:" line; Claude Code: one
    streamed message; codex: each tool call it ran, then the prompt's end, which carries the prompt's
    tokens: codex reports them once per prompt)."""

    prompt: int = Field(description="Which prompt of the task (0: instruction.md, 1..: followups).")
    index: int = Field(description="Turn number over the whole task (1-based).")
    t_s: float = Field(description="When it ended, seconds from the task's start.")
    reason: str | None = Field(None, description="Why the step ended: tool-calls, stop, length ...")
    tokens: TokenCounts = Field(default_factory=TokenCounts)
    tools: list[str] = Field(default_factory=list, description="Tools the step called.")
    server_ttft_ms: float | None = Field(
        None, description="The server's own mean TTFT of the requests since the previous turn (/metrics)."
    )
    server_requests: int | None = Field(None, description="Requests the server's TTFT histogram counted.")


TranscriptKind = Literal["prompt", "text", "reasoning", "tool", "error", "limit", "exit", "unreachable"]


class TranscriptEntry(BaseModel):
    t_s: float
    prompt: int
    kind: TranscriptKind
    text: str = ""
    tool: str | None = None
    status: str | None = None


LimitHit = Literal["turns", "tokens", "time"]
UnreachedKind = Literal["auth", "connection", "not_found", "no_request"]
UNREACHED_WHAT: dict[str, str] = {
    "auth": "the server refused the client's API key",
    "connection": "the client could not connect to the server",
    "not_found": "the server does not serve the model (or the API) the client asked for",
    "no_request": "the client ended without a model turn (no request, no token)",
}


class ModelUnreached(BaseModel):
    """The client never got the model's answer: what it said, and what that means. Such a run says
    nothing about the model, so it is not scored."""

    kind: UnreachedKind
    status: int | None = Field(None, description="The HTTP status the client reported, if any.")
    message: str = Field("", description="The client's own words.")

    def reason(self) -> str:
        code = f" ({self.status})" if self.status else ""
        said = f": {self.message.rstrip('.')}" if self.message else ""
        return f"{UNREACHED_WHAT[self.kind]}{code}{said}"

    def sentence(self) -> str:
        return f"failed to reach the model: {self.reason()}"


class AgentRun(BaseModel):
    """What the agent did on one task: every prompt, turn, tool call and token, and how it ended."""

    client: str
    client_version: str | None = None
    argv: list[str] = Field(default_factory=list, description="The first prompt's command (prompt elided).")
    session_id: str | None = None
    exit_codes: list[int | None] = Field(default_factory=list, description="One per prompt sent.")
    limit_hit: LimitHit | None = None
    unreached: ModelUnreached | None = Field(
        None, description="Set when the client could not get an answer from the model (then it is stopped)."
    )
    wall_s: float = 0.0
    tokens: TokenCounts = Field(default_factory=TokenCounts)
    turns: list[TurnRecord] = Field(default_factory=list)
    transcript: list[TranscriptEntry] = Field(default_factory=list)
    stderr_tail: str = ""
    diff_stat: str = Field("", description="`git diff --stat` of the workspace after the agent.")


RunStatus = Literal["pending", "running", "done", "unreachable", "error", "interrupted"]


class TaskRun(BaseModel):
    task: str
    repeat: int = 1
    status: RunStatus = "pending"
    error: str | None = None
    started_at: datetime | None = None
    agent: AgentRun | None = None
    tests: VerifierRun | None = None
    passed: bool = False
    score: float | None = Field(
        None, description="1 when every hidden test passed, else 0 (harbor's reward): a task is done or not."
    )
    tests_fraction: float | None = Field(None, description="Hidden tests passed / hidden tests.")
    server_metrics: ServerMetricsSummary | None = None
    host: HostSummary | None = None


class TaskInfo(BaseModel):
    name: str
    description: str = ""
    category: str = ""
    source: str = ""
    prompts: int = 1
    limits: AgentLimits
    hidden_tests: list[str] = Field(default_factory=list, description="Test ids the reference passes.")
    reference_ok: bool | None = None
    reference_note: str | None = None


class EvalSummary(BaseModel):
    runs: int = 0
    runs_passed: int = 0
    runs_unreachable: int = Field(
        0,
        description="Runs whose client never reached the model (key refused, no connection, no such "
        "model): not scored.",
    )
    tests_passed: int = 0
    tests_total: int = 0
    score: float | None = Field(None, description="Mean of the runs' scores: the share of runs that passed.")
    verdict: str = ""
    random_weights: bool | None = Field(
        None,
        description="The served model has random weights (llmdeck's tiny model, or --load-format dummy): "
        "the score is 0 by nature.",
    )


class EvalResult(ResultHeader):
    """The eval's result file: bench's header (target, host, options: the same models, so `report`
    and the HTML pages read one environment), then the client, the tasks and their runs. The file's
    shape did not change when the header became shared, so its schema stays version 1."""

    schema_version: int = EVAL_SCHEMA_VERSION
    kind: str = EVAL_RESULT_KIND
    client: str
    client_version: str | None = None
    thinking: str = "server"
    server_cache_config: dict[str, str] | None = Field(
        None,
        description="vLLM's CacheConfig as its /metrics publishes it (vllm:cache_config_info): the KV "
        "dtype, block size, prefix caching, memory share — known even when --server is a URL.",
    )
    tasks: list[TaskInfo] = Field(default_factory=list)
    runs: list[TaskRun] = Field(default_factory=list)
    summary: EvalSummary = Field(default_factory=EvalSummary)


def summarize(result: EvalResult) -> EvalSummary:
    """The score over the finished runs, and a sentence that says what it means."""
    done = [r for r in result.runs if r.status == "done" and r.tests is not None]
    passed = sum(r.passed for r in done)
    t_pass = sum(r.tests.passed for r in done if r.tests)
    t_all = sum(r.tests.total for r in done if r.tests)
    scores = [r.score for r in done if r.score is not None]
    score = round(sum(scores) / len(scores), 4) if scores else None
    verdict = (
        f"score {score or 0:.2f}: {passed} of {len(done)} task runs passed every hidden test "
        f"({t_pass} of {t_all} hidden tests passed)"
        if done
        else "no task run finished"
    )
    unreachable = [r for r in result.runs if r.status == "unreachable"]
    if unreachable:
        first = unreachable[0].agent.unreached if unreachable[0].agent else None
        why = f" ({first.reason()})" if first else ""
        verdict += (
            f"; {len(unreachable)} task run(s) failed to reach the model{why}: "
            "not scored, they say nothing about the model"
        )
    random = result.summary.random_weights
    if random:
        verdict += (
            "; the served model has random weights (llmdeck's tiny random-weight model or --load-format "
            "dummy), so a score of 0 is expected: "
            "this run proves the harness (agent, server, hidden tests), not the model"
        )
    return EvalSummary(
        runs=len(done),
        runs_passed=passed,
        runs_unreachable=len(unreachable),
        tests_passed=t_pass,
        tests_total=t_all,
        score=score,
        verdict=verdict,
        random_weights=random,
    )


def is_eval_file(path: Path) -> bool:
    """True when ``path`` is a JSON file whose ``kind`` is an eval result (cheap: the first 4 KB)."""
    from llmdeck.util.kindsniff import has_kind

    return has_kind(path, EVAL_RESULT_KIND)


def load_eval_result(path: Path) -> EvalResult:
    """Read and validate an eval result; ResultFileError (exit 2) saying what is wrong."""
    from llmdeck.formats.result_file import load_versioned

    return load_versioned(path, EvalResult, EVAL_RESULT_KIND, EVAL_SCHEMA_VERSION, "eval", "eval")
