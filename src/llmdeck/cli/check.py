"""CLI group: check — is this endpoint ready for my agent?"""

from __future__ import annotations

from typing import Any, NamedTuple

import typer

from llmdeck.cli.options import request_timeout
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import api_key_option, nonempty, positive_seconds

DEADLINE_HINT = "The server answers slowly; check its log, or give the check more time with --deadline."
REJECTED_KEY_HINT = (
    "Use the key the server was started with (its --api-key / VLLM_API_KEY): pass it with --api-key "
    "or LLMDECK_API_KEY."
)

CHECK_HELP = """Probe an OpenAI-compatible server for what a client needs, with evidence and fixes.

TARGET is a URL (http://127.0.0.1:8000, with or without /v1) or a server name from `llmdeck \
status`; without it: the only server llmdeck runs, else the default host and port.

For a client llmdeck has a recording of (opencode, continue, cline, aider, claude-code, codex), \
its own first request is replayed too: does its base prompt fit max_model_len with room for a tool \
loop, are its tools accepted, does a streamed tool call parse its way, is thinking where it reads \
it, does the server cap replies below the max_tokens it asks for. Claude Code is probed on the \
Anthropic Messages API (/v1/messages: stream, tool_use/tool_result, thinking blocks, count_tokens, \
a second system message), Codex on the Responses API (/v1/responses: stream, function_call items \
over several turns with store: false). Others get the generic probes, and the report says so.

Each probe reports pass / warn / fail / inconclusive / n/a. Exit 1 when a probe the chosen \
client needs fails, 2 for a bad URL or name.

Examples:

  llmdeck check http://127.0.0.1:8000 --client opencode

  llmdeck check default --client continue --json > check.json

  llmdeck check http://127.0.0.1:8000 --client claude-code   # or --client codex

  llmdeck check http://gpu-box:8000 --deadline 300   # give up after 5 minutes in all

  llmdeck check coder --client opencode --probe tool_auto --probe client_request   # these alone
"""


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.command("check", help=CHECK_HELP)(check)


def check(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, callback=nonempty, help="Server URL or llmdeck server name."),
    client: str | None = typer.Option(
        None,
        "--client",
        "-c",
        help="opencode, openclaw, continue, cline, aider, claude-code, codex or openai: whose needs decide.",
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", callback=nonempty, help="Served model name (default: the first)."
    ),
    api_key: str | None = api_key_option("API key to send (default: LLMDECK_API_KEY)."),
    long_context_tokens: int | None = typer.Option(
        None,
        "--long-context-tokens",
        min=16,
        help="Cap the long-context prompt (default max_model_len-8).",
    ),
    timeout: float = request_timeout(120.0, detail=", as a whole (the long-context probe: up to 600)"),
    deadline: float = typer.Option(
        900.0, "--deadline", callback=positive_seconds, help="Limit (s) for the whole check."
    ),
    probe: list[str] | None = typer.Option(
        None,
        "--probe",
        metavar="ID",
        help="Run only this probe, by the id the report shows (repeat it for more): to check again what "
        "failed, after a fix. health, api_key and models always run; the verdict speaks for these alone.",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print every request and reply."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Probe an OpenAI-compatible server for what a client needs (see CHECK_HELP)."""
    limits = _Limits(long_context_tokens, timeout, deadline)
    _check(ctx, target, client, model, api_key, limits, probe or None, verbose, json_out)


class _Limits(NamedTuple):
    long_context_tokens: int | None
    timeout: float
    deadline: float


def _check(
    ctx: typer.Context,
    target: str | None,
    client: str | None,
    model: str | None,
    api_key: str | None,
    limits: _Limits,
    probes: list[str] | None,
    verbose: bool,
    json_out: bool,
) -> None:
    from llmdeck.checks import print_report, run_checks
    from llmdeck.checks.clients import validate_client
    from llmdeck.checks.run import CheckAborted, select_probes
    from llmdeck.runtime.target import resolve_target
    from llmdeck.util.redact import redact_url

    settings = get_settings(ctx)
    client = validate_client(client)
    select_probes(probes, client)  # a probe id that is not one: before the server is looked for
    tgt = resolve_target(target, settings)
    shown_url = redact_url(tgt.base_url)
    err = err_console()
    err.print(f"checking {shown_url} for {client or 'any OpenAI client'} …", highlight=False, markup=False)

    def progress(result: Any) -> None:
        err.print(f"  {result.id}: {result.status}", highlight=False, markup=False)

    try:
        report = run_checks(
            tgt.base_url,
            client=client,
            model=model or tgt.model,
            api_key=api_key,
            settings=settings,
            probes=probes,
            long_context_tokens=limits.long_context_tokens,
            timeout=limits.timeout,
            deadline_s=limits.deadline,
            on_probe=progress,
        )
    except CheckAborted as exc:
        if json_out:  # stdout still carries a report: ready false, and why
            print_json(exc.report)
        raise
    if json_out:
        print_json(report)
    else:
        print_report(report, out_console(), verbose=verbose)
    again = ["llmdeck", "check", redact_url(target) if target and "://" in target else target or shown_url]
    again += [*(["--client", client] if client else []), *(["--model", model] if model else [])]
    key_sent = bool(api_key if api_key is not None else settings.api_key)
    _raise_unless_ready(report, shown_url, client, key_sent=key_sent, again=again)


def _raise_unless_ready(
    report: Any, shown_url: str, client: str | None, *, key_sent: bool, again: list[str]
) -> None:
    """Exit 1 when a probe the client needs failed (an API key the server refused is called rejected,
    a missing one missing; otherwise the hint ends with the command that checks again only what
    failed), or when the deadline cut the check short."""
    from llmdeck.client.errors import API_KEY_HINT
    from llmdeck.errors import CheckFailedError, UsageError

    if report.failed_required:
        names = ", ".join(p.id for p in report.failed_required)
        first = report.failed_required[0]
        if first.data.get("model_not_served"):  # --model names what the server has not: bad input
            raise UsageError(first.summary, hint=first.fix)
        key_failed = report.server.api_key_required is True and first.id in {"health", "api_key"}
        summary = first.summary.rstrip(".")
        if key_failed and key_sent and "reject" not in summary:
            summary += "; the server rejected the API key"
        hint = first.fix or "Apply the fixes shown in the report, restart the server, and check again."
        if key_failed:
            hint = REJECTED_KEY_HINT if key_sent else API_KEY_HINT
        else:
            hint = f"{hint.rstrip()} {_check_again(report.failed_required, again)}"
        raise CheckFailedError(
            f"{shown_url} is not ready for {client or 'a plain OpenAI client'}: {names} failed "
            f"(first, {first.id}: {summary}).",
            hint=hint,
        )
    if report.incomplete:
        raise CheckFailedError(f"{report.incomplete}; the probes left were skipped.", hint=DEADLINE_HINT)


def _check_again(failed: list[Any], again: list[str]) -> str:
    """The command that checks again what failed: those probes alone, or the whole check when health,
    api_key or models failed (the probes after them were skipped, not passed)."""
    from llmdeck.checks.run import ALWAYS
    from llmdeck.util.shellquote import join

    if any(p.id in ALWAYS for p in failed):
        return f"Then check again: `{join(again)}`."
    probes = [word for p in failed for word in ("--probe", p.id)]
    return f"Then check only what failed again: `{join([*again, *probes])}`."
