"""The probes of `llmdeck check`: each asks the server one question and keeps the evidence.

A random-weight model cannot be trusted to write a tool call or a thought, so every probe keeps
what the *server* supports (it accepted the request, its parsers split the output, its template
honours a switch) apart from what the *model* did ("inconclusive: the model's output is not a
tool call").
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from llmdeck.checks.clients import required_probes
from llmdeck.checks.http import DeadlinePassed
from llmdeck.checks.probe_base import (
    AUTO_TOOL_ERROR,
    NAMED_TOOL_ERROR,
    PROBE_ORDER,
    REASONING_FIELDS,
    TITLES,
    TOOL_NAMES,
    TOOLS,
    Outcome,
    ProbeContext,
    timed_out,
)
from llmdeck.checks.probes_basic import (
    probe_api_key,
    probe_chat,
    probe_completions,
    probe_health,
    probe_models,
    probe_streaming_usage,
)
from llmdeck.checks.probes_thinking import (
    learn_thinking,
    probe_content_null_trap,
    probe_reasoning_split,
    probe_thinking_control,
    probe_thinking_default,
)
from llmdeck.checks.probes_tools import (
    probe_long_context,
    probe_tool_auto,
    probe_tool_named,
    probe_tool_parallel,
    probe_tool_result,
)
from llmdeck.checks.results import ProbeResult
from llmdeck.client.httpmap import http_failure_words
from llmdeck.errors import EndpointError

__all__ = [
    "AUTO_TOOL_ERROR",
    "NAMED_TOOL_ERROR",
    "PROBES",
    "PROBE_ORDER",
    "REASONING_FIELDS",
    "TITLES",
    "TOOLS",
    "TOOL_NAMES",
    "Outcome",
    "ProbeContext",
    "learn_thinking",
    "run_probe",
]


PROBES: dict[str, Callable[[ProbeContext], Outcome]] = {
    "health": probe_health,
    "api_key": probe_api_key,
    "models": probe_models,
    "chat": probe_chat,
    "completions": probe_completions,
    "streaming_usage": probe_streaming_usage,
    "reasoning_split": probe_reasoning_split,
    "thinking_control": probe_thinking_control,
    "thinking_default": probe_thinking_default,
    "content_null_trap": probe_content_null_trap,
    "tool_auto": probe_tool_auto,
    "tool_named": probe_tool_named,
    "tool_parallel": probe_tool_parallel,
    "tool_result": probe_tool_result,
    "long_context": probe_long_context,
}


def _ensure_answering(ctx: ProbeContext, probe_id: str, limit: float = 10.0) -> None:
    """After a timeout: is the server silent? Then stop the check now (exit 1), not probe by probe."""
    if probe_id != "health":
        try:
            ctx.http.request("GET", "/health", api_key=False, timeout=limit)
            return
        except httpx.TimeoutException:
            pass
        except (httpx.HTTPError, DeadlinePassed):
            return
    raise EndpointError(
        f"The server at {ctx.http.base_url} accepted the connection but is not answering (no reply "
        f"to GET /health within {min(limit, ctx.http.timeout):g} s).",
        hint="Check that it finished loading and is not stuck (`llmdeck logs`); a vLLM server answers "
        "/health as soon as it is up.",
    )


def run_probe(ctx: ProbeContext, probe_id: str) -> ProbeResult:
    required = probe_id in required_probes(ctx.client)
    ctx.evidence = []
    if ctx.blocked and probe_id not in {"health", "api_key"}:
        outcome = Outcome("skipped", f"Not run: {ctx.blocked}.")
    elif ctx.stuck and not required:
        outcome = Outcome("skipped", f"Not run: {ctx.stuck}.")
    else:
        try:
            outcome = PROBES[probe_id](ctx)
        except httpx.TimeoutException as exc:
            _ensure_answering(ctx, probe_id)
            outcome = timed_out(ctx, exc, required, probe_id)
        except DeadlinePassed as exc:
            ctx.blocked = ctx.incomplete = exc.message.rstrip(".")
            outcome = Outcome("inconclusive", exc.message)
        except httpx.HTTPError as exc:
            why = http_failure_words(exc, "the connection broke")  # `exc or ...` had printed ""
            outcome = Outcome("fail", f"The request failed: {why}.")
    return ProbeResult(
        id=probe_id,
        title=TITLES[probe_id],
        status=outcome.status,
        required=required,
        summary=outcome.summary,
        fix=outcome.fix if outcome.status in {"fail", "warn"} else None,
        evidence=list(ctx.evidence),
        data=outcome.data,
    )
