"""run_checks: every probe against one server, in order, into a CheckReport."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from llmdeck.checks.clients import validate_client
from llmdeck.checks.http import Http
from llmdeck.checks.probes import PROBE_ORDER, ProbeContext, learn_thinking, run_probe
from llmdeck.checks.results import CheckReport, ProbeResult, ServerFacts
from llmdeck.errors import EndpointError, UsageError
from llmdeck.util.net import normalize_base_url

if TYPE_CHECKING:
    from llmdeck.settings import Settings


class CheckAborted(EndpointError):
    """The check stopped: the server cannot be reached, or accepts connections but does not answer.

    Its message is the cause's; ``report`` is what ran until then, with ``error`` saying why, so that
    `check --json` still prints a report (``ready: false``)."""

    def __init__(self, cause: EndpointError, report: CheckReport) -> None:
        super().__init__(cause.message, hint=cause.hint)
        self.report = report


def run_checks(
    base_url: str,
    *,
    client: str | None,
    model: str | None,
    api_key: str | None,
    settings: Settings,
    probes: Iterable[str] | None = None,
    long_context_tokens: int | None = None,
    timeout: float = 120.0,
    deadline_s: float | None = 900.0,
    on_probe: Callable[[ProbeResult], None] | None = None,
) -> CheckReport:
    """Probe the OpenAI-compatible server at ``base_url`` for ``client`` and return the report.

    ``api_key`` falls back to ``settings.api_key``. ``probes`` limits the run to some probe ids, the
    generic ones or the client's own (the order stays fixed; health, api_key and models always run
    because the others need their facts; an id neither is: :class:`llmdeck.errors.UsageError`).
    ``long_context_tokens`` caps the long-context prompt (default: max_model_len - 8).
    ``timeout`` bounds each request as a whole, ``deadline_s`` the whole check (the probes left when it
    passes are skipped and the report is ``incomplete``).
    Raises :class:`CheckAborted` (an :class:`llmdeck.errors.EndpointError`) when the server cannot be
    reached at all, or accepts connections but does not answer.
    """
    client = validate_client(client)
    base_url = normalize_base_url(base_url)
    key = api_key if api_key is not None else getattr(settings, "api_key", None)
    asked = None if probes is None else list(dict.fromkeys(probes))
    wanted, own = select_probes(asked, client)
    http = Http(base_url, key, timeout=timeout, deadline_s=deadline_s)
    facts = ServerFacts(base_url=base_url, model=model)
    ctx = ProbeContext(http=http, facts=facts, client=client, requested_model=model)
    ctx.long_context_tokens, ctx.stop_on_timeout = long_context_tokens, probes is not None
    report = CheckReport(client=client, server=facts, only=asked)
    try:
        for probe_id in PROBE_ORDER:
            if probe_id not in wanted:
                continue
            result = run_probe(ctx, probe_id)
            report.probes.append(result)
            if on_probe is not None:
                on_probe(result)
            if probe_id == "models" and not ctx.blocked and result.status == "pass":
                learn_thinking(ctx)
        if own is None or own:  # the full check, or some of them asked for: what the real client sends
            from llmdeck.checks.client_probes import run_client_probes

            for result in run_client_probes(ctx, only=own):
                report.probes.append(result)
                if on_probe is not None:
                    on_probe(result)
    except EndpointError as exc:
        report.server, report.incomplete, report.error = ctx.facts, ctx.incomplete, exc.render()
        raise CheckAborted(exc, report) from exc
    finally:
        http.close()
    report.server = ctx.facts
    report.incomplete = ctx.incomplete
    return report


ALWAYS = ("health", "api_key", "models")


def select_probes(asked: list[str] | None, client: str | None) -> tuple[set[str], set[str] | None]:
    """The generic probes to run and the client's own (None: all of them) for the ids ``asked``."""
    if asked is None:
        return set(PROBE_ORDER), None
    from llmdeck.checks.client_probes import client_probe_ids

    own = client_probe_ids(client)
    unknown = [p for p in asked if p not in PROBE_ORDER and p not in own]
    if unknown:
        names = ", ".join(repr(p) for p in unknown)
        known = [p for p in PROBE_ORDER if p not in ALWAYS] + own
        raise UsageError(
            f"check has no probe {names} for {client or 'a plain OpenAI client'}.",
            hint=f"Pick from: {', '.join(known)} (the ids `llmdeck check --json` reports; "
            f"{', '.join(ALWAYS)} always run).",
        )
    return {p for p in asked if p in PROBE_ORDER} | set(ALWAYS), {p for p in asked if p in own}
