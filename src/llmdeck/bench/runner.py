"""Running a list of scenarios against one server and writing the result file as it goes.

The result file is rewritten atomically at most once a second while requests finish, and once
more at the end; when the run is interrupted (Ctrl-C) or the server dies, the last write holds
every finished request and marks the rest failed (``error_kind`` ``interrupted``/``aborted``/
``not_run``), with ``status`` saying what happened."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from llmdeck.bench.load import ScenarioRun, ServerGone
from llmdeck.bench.metrics import compute_metrics
from llmdeck.bench.monitor import Monitor, host_facts
from llmdeck.bench.repeats import summarize_repeats
from llmdeck.bench.result_schema import (
    BENCH_RESULT_KIND,
    BenchResult,
    RequestRecord,
    ScenarioResult,
    ScenarioSpec,
    TargetInfo,
)
from llmdeck.bench.verdict import DEFAULT_SLO, judge
from llmdeck.bench.workloads import build_workload, load_tokenizer
from llmdeck.client.errors import ClientEndpointError, reported_max_model_len
from llmdeck.client.openai import OpenAIClient
from llmdeck.client.types import Timeouts
from llmdeck.errors import OperationError, UsageError
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.net import normalize_base_url
from llmdeck.util.owned import json_kind_is, refuse_foreign_file
from llmdeck.util.patient import PatientRunner
from llmdeck.util.redact import redact_argv, redact_url

if TYPE_CHECKING:
    from llmdeck.settings import Settings


class Progress(Protocol):
    """Receives live progress (the CLI draws it on stderr)."""

    def scenario_start(self, index: int, total: int, spec: ScenarioSpec) -> None: ...
    def request_done(self, done: int, failed: int, total: int) -> None: ...
    def scenario_end(self, result: ScenarioResult) -> None: ...
    def message(self, text: str) -> None: ...


@dataclass
class BenchOptions:
    """How to run: verdict limits, goodput SLOs, timeouts, sampling, where to write."""

    slo: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SLO))
    goodput_slos_ms: dict[str, float] = field(default_factory=dict)
    timeouts: Timeouts = field(default_factory=Timeouts)
    monitor_interval_s: float = 2.0
    scrape_metrics: bool = True
    out_path: Path | None = None
    api_key: str | None = None
    request: dict[str, Any] | None = None  # the BenchRequest, embedded in the result file
    lock_dir: Path | None = None  # one bench at a time on out_path (util/filelock.sole_writer)


class ResultWriter:
    """Atomic, throttled writes of the result file."""

    def __init__(self, path: Path | None, result: BenchResult, min_interval_s: float = 1.0) -> None:
        self.path = path
        self.result = result
        self.min_interval_s = min_interval_s
        self._last = 0.0

    def write(self) -> None:
        if self.path is None:
            return
        self.result.repeats = summarize_repeats(self.result)
        atomic_write_json(self.path, self.result)
        self._last = time.monotonic()

    def maybe_write(self) -> None:
        if self.path is not None and time.monotonic() - self._last >= self.min_interval_s:
            self.write()


def resolve_target(
    target: str, settings: Settings, *, model: str | None = None, tokenizer: str | None = None
) -> TargetInfo:
    """A URL or a server name (from ``llmdeck up``) -> what to bench (through the one resolver,
    :func:`llmdeck.runtime.target.resolve_target`)."""
    from llmdeck.runtime.target import resolve_target as resolve

    found = resolve(target, settings)
    rec = found.record
    if rec is None:
        return TargetInfo(base_url=found.base_url, model=model or "", tokenizer=tokenizer)
    tok = tokenizer
    if tok is None and Path(rec.spec.model).expanduser().is_dir():
        tok = str(Path(rec.spec.model).expanduser())
    return TargetInfo(
        base_url=rec.base_url,
        server_name=rec.name,
        model=model or rec.served_model_name,
        tokenizer=tok,
        server_args=redact_argv(rec.argv),
    )


async def probe_target(client: OpenAIClient, target: TargetInfo) -> None:
    """Fill the model name, ``max_model_len`` and server version from the server itself."""
    try:
        models = await client.models()
    except ClientEndpointError as exc:
        raise exc.reworded(
            f"Cannot bench {target.base_url}: {exc.message}",
            hint=exc.hint or "Check that the server is running.",
        ) from exc
    if not models:
        raise OperationError(
            f"{target.base_url}/v1/models lists no model.", hint="Check that the server finished loading."
        )
    ids = [str(m["id"]) for m in models]
    if not target.model:
        target.model = ids[0]
    elif target.model not in ids:
        raise UsageError(
            f"The server at {target.base_url} does not serve {target.model!r} (it serves: {', '.join(ids)}).",
            hint="Pass --model with one of those names.",
        )
    entry = next(m for m in models if str(m.get("id")) == target.model)
    # an impossible one stops the bench (exit 1): it decides which scenarios are skipped
    target.max_model_len = reported_max_model_len(entry, f"{redact_url(target.base_url)}/v1/models")
    if target.tokenizer is None:
        root = entry.get("root")
        if isinstance(root, str) and Path(root).expanduser().is_dir():
            target.tokenizer = root
    target.server_version = await client.version()
    if target.server_version is None and entry.get("owned_by") == "llamacpp":  # llama-server: no /version
        target.server_version = await client.llamacpp_build()
    target.server_started_at = await _server_started_at(client)


async def _server_started_at(client: OpenAIClient) -> datetime | None:
    """From /metrics when the server has it (vLLM does); a missing or odd page is no error here."""
    from llmdeck.client.prom import process_start_time

    try:
        text = await client.metrics_text()
    except ClientEndpointError:
        return None
    t = process_start_time(text) if text else None
    return datetime.fromtimestamp(t, UTC) if t else None


def new_result(
    target: TargetInfo, scenarios: list[ScenarioSpec], options: BenchOptions, suite: str | None
) -> BenchResult:
    return BenchResult(
        suite=suite,
        target=target,
        host=host_facts(),
        slo=dict(options.slo),
        scenarios=[ScenarioResult(spec=s) for s in scenarios],
        request=options.request,
    )


async def run_bench_async(
    target: TargetInfo,
    scenarios: list[ScenarioSpec],
    options: BenchOptions,
    *,
    tokenizer: Any | None = None,
    progress: Progress | None = None,
    suite: str | None = None,
) -> BenchResult:
    """Run every scenario; returns the result (``status`` ``aborted`` when the server died).

    Cancellation (Ctrl-C) at any moment — while probing the server, loading the tokenizer or
    measuring — writes the partial result (every finished request; the rest marked not run or
    interrupted) to ``options.out_path``, then propagates."""
    if options.out_path is not None:  # re-running into its own result is fine; the user's file is not
        refuse_foreign_file(options.out_path, "bench result", json_kind_is(BENCH_RESULT_KIND))
    result = new_result(target, scenarios, options, suite)
    writer = ResultWriter(options.out_path, result)
    began = False  # a result of this run written: an earlier one at --out is not replaced before that
    try:
        async with OpenAIClient(
            target.base_url, api_key=options.api_key, timeouts=options.timeouts
        ) as client:
            await probe_target(client, target)
            if tokenizer is None and target.tokenizer and any(s.workload != "jsonl" for s in scenarios):
                if progress:
                    progress.message(f"loading tokenizer from {target.tokenizer}")
                tokenizer = await asyncio.to_thread(load_tokenizer, target.tokenizer)
            writer.write()
            began = True
            await _run_all(client, target, result, options, tokenizer, writer, progress)
    except (asyncio.CancelledError, KeyboardInterrupt):
        _mark_stopped(result, "interrupted", "The run was interrupted.", "not run: interrupted")
        result.finished_at = datetime.now(UTC)
        if began or options.out_path is None or not options.out_path.exists():
            writer.write()  # (an earlier result at --out had become an empty interrupted one)
        raise
    result.finished_at = datetime.now(UTC)
    result.repeats = summarize_repeats(result)
    writer.write()
    return result


def _mark_stopped(
    result: BenchResult, status: Literal["interrupted", "aborted"], error: str, skip_reason: str
) -> None:
    result.status = status
    result.error = error
    for sr in result.scenarios:
        if sr.status == "pending":
            sr.status = "skipped"
            sr.skip_reason = skip_reason
        elif sr.status == "running":  # stopped in its warmup or workload build: it had stayed "running"
            sr.status = "failed" if status == "aborted" else "interrupted"


async def _run_all(
    client: OpenAIClient,
    target: TargetInfo,
    result: BenchResult,
    options: BenchOptions,
    tokenizer: Any | None,
    writer: ResultWriter,
    progress: Progress | None,
) -> None:
    try:
        for i, sr in enumerate(result.scenarios):
            spec = sr.spec
            mml = target.max_model_len
            if mml is not None and spec.max_context > mml:
                sr.status = "skipped"
                sr.skip_reason = (
                    f"needs {spec.max_context} tokens of context but the server's max_model_len is {mml}"
                )
                if progress:
                    progress.scenario_end(sr)
                writer.write()
                continue
            if progress:
                progress.scenario_start(i, len(result.scenarios), spec)
            await _run_scenario(client, target, sr, options, tokenizer, writer, progress)
            if progress:
                progress.scenario_end(sr)
        result.status = "complete"
    except ServerGone as exc:
        _mark_stopped(result, "aborted", f"The run stopped: {exc}.", "not run: the server went away")


async def _summarize(
    sr: ScenarioResult, run: ScenarioRun, monitor: Monitor, options: BenchOptions, duration: float | None
) -> None:
    """Stop the monitor (bounded) and compute the scenario's metrics and verdict from what it has."""
    spec = sr.spec
    if duration is None:
        duration = max(run.t_last - run.t0, 1e-9)
    try:
        server_sum, host_sum = await asyncio.wait_for(monitor.stop(), timeout=5.0)
    except (TimeoutError, asyncio.CancelledError):
        server_sum, host_sum = monitor.summaries()
    sr.server_metrics, sr.host = server_sum, host_sum
    sr.timeline = monitor.timeline(run.t0)
    sr.requests.sort(key=lambda r: r.index)
    check_prompt = spec.endpoint == "completions"
    sr.metrics = compute_metrics(
        sr.requests if check_prompt else [r.model_copy(update={"prompt_len": 0}) for r in sr.requests],
        duration,
        goodput_slos_ms=options.goodput_slos_ms,
    )
    sr.verdict = judge(sr.metrics, sr.server_metrics, options.slo)


async def _run_scenario(
    client: OpenAIClient,
    target: TargetInfo,
    sr: ScenarioResult,
    options: BenchOptions,
    tokenizer: Any | None,
    writer: ResultWriter,
    progress: Progress | None,
) -> None:
    spec = sr.spec
    sr.status = "running"
    sr.started_at = datetime.now(UTC)
    items = await asyncio.to_thread(build_workload, spec, tokenizer)
    warm = []
    if spec.warmup:
        warm = await asyncio.to_thread(
            build_workload, spec.model_copy(update={"seed": spec.seed + 1}), tokenizer, spec.warmup
        )
    total = len(items) if spec.duration_s is None else 0
    failed = 0

    def on_record(rec: RequestRecord) -> None:
        nonlocal failed
        sr.requests.append(rec)
        if not rec.ok:
            failed += 1
        if progress:
            progress.request_done(len(sr.requests), failed, total or max(run.dispatched, len(sr.requests)))
        writer.maybe_write()

    run = ScenarioRun(client, spec, target.model, items, warmup_items=warm, on_record=on_record)
    if warm:
        if progress:
            progress.message(f"warmup: {len(warm)} request(s)")
        await run.warmup()
    monitor = Monitor(
        client, options.monitor_interval_s, scrape_metrics=options.scrape_metrics, on_failure=run.check_server
    )
    await monitor.start()
    stop_kind: str | None = None
    reason = ""
    duration: float | None = None
    try:
        duration = await run.run()
    except ServerGone as exc:
        stop_kind, reason = "aborted", str(exc)
        raise
    except (asyncio.CancelledError, KeyboardInterrupt):
        stop_kind, reason = "interrupted", "the run was interrupted"
        raise
    finally:
        if stop_kind is not None:
            sr.requests.extend(run.unfinished(stop_kind, reason))
            sr.status = "failed" if stop_kind == "aborted" else "interrupted"
            sr.error = reason
        await _summarize(sr, run, monitor, options, duration)
        if stop_kind is None:
            sr.status = "done"
        writer.write()


def run_bench(
    target: TargetInfo,
    scenarios: list[ScenarioSpec],
    options: BenchOptions,
    *,
    tokenizer: Any | None = None,
    progress: Progress | None = None,
    suite: str | None = None,
) -> BenchResult:
    """Synchronous wrapper of :func:`run_bench_async` (a second Ctrl-C waits for the first's clean-up)."""
    from llmdeck.util.filelock import sole_writer

    with sole_writer(options.lock_dir, options.out_path, "bench"), PatientRunner() as runner:
        return runner.run(
            run_bench_async(target, scenarios, options, tokenizer=tokenizer, progress=progress, suite=suite)
        )


def run_smoke_bench(
    base_url: str,
    model: str,
    tokenizer_dir: Path | None,
    settings: Settings,
    *,
    out_path: Path | None = None,
    progress: Progress | None = None,
) -> BenchResult:
    """The quickstart's short bench (suite ``smoke``: 6 short requests, 2 at a time; ~20 s on the
    tiny CPU model). Raises an EndpointError when the server is unreachable."""
    from llmdeck.bench.suites import get_suite

    target = TargetInfo(
        base_url=normalize_base_url(base_url),
        model=model,
        tokenizer=str(tokenizer_dir) if tokenizer_dir else None,
    )
    options = BenchOptions(out_path=out_path, api_key=getattr(settings, "api_key", None))
    return run_bench(target, get_suite("smoke"), options, progress=progress, suite="smoke")
