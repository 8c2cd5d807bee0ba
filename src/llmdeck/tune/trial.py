"""One trial: plan it (a rejection starts nothing), start the server through the runtime service,
warm it up, run the workload at its target load through bench, score goodput under the SLOs, stop the
server. One server at a time: the next trial starts only after this one's engine has exited (two vLLMs
started together on one GPU break each other's memory profiling)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeck.engines import get as get_engine
from llmdeck.errors import LlmdeckError
from llmdeck.tune.schema import (
    Origin,
    ParamValue,
    TrialMetrics,
    TrialRecord,
    TuneEvent,
    TuneEvents,
    TuneRequest,
)
from llmdeck.tune.slo import goodput_limits_ms
from llmdeck.tune.space import candidate_flags

if TYPE_CHECKING:
    from llmdeck.bench.request import BenchRequest
    from llmdeck.bench.result_schema import BenchResult, ScenarioResult
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord
    from llmdeck.settings import Settings
    from llmdeck.tune.prune import Pruner


def server_name(req: TuneRequest) -> str:
    """One name per tune: a server left by an interrupted run is known as this tune's."""
    return f"tune-{req.fingerprint()[:10]}"


def engine_env(req: TuneRequest) -> dict[str, str]:
    """What every GPU start of a tune gets in its environment (and the winning spec keeps).

    DeepGEMM's first-start JIT warmup (> 15 min for block-FP8 on an H200) is chosen, not met: its
    kernels land in VLLM_CACHE_ROOT/deep_gemm, which every trial shares, so only the first start of a
    shape pays for it ("relax", vLLM's default) — or none does ("skip"), or DeepGEMM is not used at all
    ("off": block-FP8 runs on CUTLASS/Triton, no JIT, for every trial alike). Triton's autotuning
    results are kept on disk (TRITON_CACHE_AUTOTUNING=1, in its cache, which the trials share): the
    hybrids' Gated-DeltaNet kernels autotune in vLLM's profiling run, 81-96 s of every start in the
    H200 tune of session 13."""
    if get_engine(req.base.engine).runs_on_cpu:
        return {}
    env = {"TRITON_CACHE_AUTOTUNING": "1"}
    if req.deep_gemm_warmup == "off":
        env["VLLM_USE_DEEP_GEMM"] = "0"
    else:
        env["VLLM_DEEP_GEMM_WARMUP"] = req.deep_gemm_warmup
    return env


def trial_port(req: TuneRequest) -> int:
    """A port free now for the trial's server (the tune picks it: no trial starts on the user's)."""
    from llmdeck.util.net import free_port

    return free_port(req.base.host if req.base.host != "0.0.0.0" else "127.0.0.1")


def trial_spec(req: TuneRequest, args: list[str], env: dict[str, str]) -> LaunchSpec:
    return req.base.model_copy(
        update={
            "name": server_name(req),
            "port": trial_port(req),
            "vllm_args": args,
            "env": {**engine_env(req), **req.base.env, **env, **req.secret_env},
        }
    )


def tokenizer_of(spec: LaunchSpec) -> str | None:
    from llmdeck.plan.flags import parse_vllm_flags

    given = parse_vllm_flags(spec.vllm_args).get("tokenizer")
    if isinstance(given, str):
        return given
    return spec.model if Path(spec.model).expanduser().is_dir() else None


def run_trial(
    req: TuneRequest,
    number: int,
    params: dict[str, ParamValue],
    origin: Origin,
    *,
    base_args: list[str],
    pruner: Pruner,
    settings: Settings,
    out_dir: Path,
    events: TuneEvents,
) -> TrialRecord:
    """Run one candidate to its record (rejected, failed or ok); Ctrl-C stops the server and propagates."""
    args, env = candidate_flags(base_args, params)
    rec = TrialRecord(number=number, params=params, origin=origin, args=args, env=env, status="ok")
    reasons, planned = pruner.check(params, base_args)
    if reasons:
        rec.status, rec.reason = "rejected", " ".join(reasons)
        return rec
    rec.args = args = planned
    spec = trial_spec(req, args, env)
    t0, wall0 = time.monotonic(), time.time()
    try:
        server, spec = start_clear_of_clashes(spec, req, settings, events)
    except LlmdeckError as exc:
        if is_input_error(exc, params):
            raise  # every trial would fail alike: exit 2 now, not --trials failed starts
        rec.status, rec.startup_s = "failed", time.monotonic() - t0
        tail = getattr(exc, "log_tail", "")
        rec.reason = exc.render() + (f" Log tail: {tail[-1500:]}" if tail else "")
        _keep_log(rec, spec.name, settings, out_dir, wall0)
        return rec
    rec.startup_s = time.monotonic() - t0
    try:
        t1 = time.monotonic()
        if req.load.rate_sweep is not None:
            from llmdeck.tune.ratesweep import sweep_trial as measure
        else:
            measure = fixed_load
        rec.metrics, bench_file, error = measure(req, server, spec, number, out_dir, settings, events)
        rec.bench_s = time.monotonic() - t1
        rec.bench_file = str(bench_file.relative_to(out_dir)) if bench_file else None
        rec.meets_slo = meets(rec.metrics, req)
        if error:
            rec.status, rec.reason = "failed", error
    except LlmdeckError as exc:
        rec.status, rec.reason = "failed", f"the bench failed: {exc.render()}"
    finally:
        _stop(spec.name, settings, events)
        _keep_log(rec, spec.name, settings, out_dir, wall0)
    return rec


def is_input_error(exc: Exception, params: dict[str, ParamValue]) -> bool:
    """A start refused for what the user gave, not for the candidate: the model path, a missing engine,
    or any bad-input refusal of vLLM's defaults (no candidate flags at all). Not a taken port: the tune
    picks the trials' ports, and one taken again at each of its picks (runtime.portpick) fails that trial."""
    from llmdeck.errors import MissingDependencyError, ModelPathError, PortInUseError, UsageError

    if isinstance(exc, ModelPathError | MissingDependencyError):
        return True
    return isinstance(exc, UsageError) and not isinstance(exc, PortInUseError) and not params


def _keep_log(rec: TrialRecord, name: str, settings: Settings, out_dir: Path, since: float) -> None:
    """The trial's log into the tune's folder, and where its start went (llmdeck.tune.startcost)."""
    from llmdeck.tune.startcost import log_phases

    rec.log_file = keep_log(name, rec.number, settings, out_dir, since)
    rec.start_phases = log_phases(out_dir, rec.log_file)


def keep_log(name: str, number: int, settings: Settings, out_dir: Path, since: float) -> str | None:
    """The trial's engine log, copied into the tune's folder (the next start rotates the server's);
    None when this trial wrote none (a start refused before the launch leaves the last one's)."""
    import os
    import shutil

    src = settings.logs_dir / f"{name}.log"
    if not src.is_file() or src.stat().st_mtime < since:
        return None
    from llmdeck.util.localfile import make_dirs

    dest = out_dir / "logs" / f"trial-{number:03d}.log"
    make_dirs(dest.parent, 0o700)  # an engine log, as the state's: an --out the user made may be 0755
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # 0600 as the original: copyfile's
    os.fchmod(fd, 0o600)  # copy was 0644 (0666 under umask 000); a copy a resumed run replaces too
    with os.fdopen(fd, "wb") as sink, src.open("rb") as source:
        shutil.copyfileobj(source, sink)
    return str(dest.relative_to(out_dir))


def start_clear_of_clashes(
    spec: LaunchSpec, req: TuneRequest, settings: Settings, events: TuneEvents
) -> tuple[ServerRecord, LaunchSpec]:
    """The trial's start; a port another program took before the engine bound it is picked again
    (runtime.portpick): the clash had aborted the whole tune as a user's taken port (exit 2), or failed
    the candidate. Returns the server and the spec it runs (its port)."""
    from llmdeck.runtime.portpick import start_on_picked_ports

    def clash(taken: int, port: int, exc: LlmdeckError) -> None:
        events(
            TuneEvent(
                kind="service",
                message=f"port {taken} was taken by another program before the trial's server bound it "
                f"({exc.message}); starting again on port {port}",
                data={"service": "port_clash", "port": taken, "next_port": port},
            )
        )

    return start_on_picked_ports(
        spec, lambda s: _start(s, req, settings, events), lambda: trial_port(req), clash
    )


def _start(spec: LaunchSpec, req: TuneRequest, settings: Settings, events: TuneEvents) -> ServerRecord:
    from llmdeck.runtime.service import ServiceEvent, UpOptions, up
    from llmdeck.runtime.watchdog import WatchdogConfig

    def relay(ev: ServiceEvent) -> None:
        if ev.kind in {"starting", "phase", "ready", "failed", "stopped", "warmup"}:
            events(TuneEvent(kind="service", message=ev.message, data={"service": ev.kind}))

    options = UpOptions(
        timeout_s=req.ready_timeout_s,
        # the shapes' JIT before measuring; bench's warmup follows
        warmup=not get_engine(req.base.engine).runs_on_cpu,
        watchdog=WatchdogConfig(floor_gib=settings.watchdog_floor_gib),
        leashed=True,  # a tune killed outright leaves no trial server holding the GPU
    )
    return up(spec, settings, options, events=relay)


def _stop(name: str, settings: Settings, events: TuneEvents) -> None:
    from llmdeck.runtime.service import down

    outcome = down(name, settings, who="`llmdeck tune` (its trial ended)")
    events(TuneEvent(kind="service", message=f"server stopped ({outcome})", data={"service": "stopped"}))


def fixed_load(
    req: TuneRequest,
    server: ServerRecord,
    spec: LaunchSpec,
    number: int,
    out_dir: Path,
    settings: Settings,
    events: TuneEvents,
) -> tuple[TrialMetrics, Path | None, str | None]:
    """The workload at its target load (``--repeat`` runs): (metrics, bench file, error or None)."""
    from llmdeck.tune.workload import bench_request

    bench_file = out_dir / "bench" / f"trial-{number:03d}.json"
    breq = bench_request(req, server.base_url, tokenizer_of(spec))
    events(TuneEvent(kind="bench", message=f"bench: {req.workload} at concurrency {req.load.concurrency}"))
    result = bench(breq, server, spec, bench_file, settings, req)
    error = None if result.status == "complete" else result.error or f"the bench ended {result.status}"
    return score(result, req), bench_file, error


def bench(
    breq: BenchRequest,
    server: ServerRecord,
    spec: LaunchSpec,
    out: Path,
    settings: Settings,
    req: TuneRequest,
) -> BenchResult:
    """One bench run of ``breq`` against the trial's server, scored by goodput under the tune's SLOs."""
    from llmdeck.bench.request import build_options, build_scenarios
    from llmdeck.bench.result_schema import TargetInfo
    from llmdeck.bench.runner import run_bench

    tok = tokenizer_of(spec)
    key = req.secret_env.get("VLLM_API_KEY") or settings.api_key
    options = build_options(breq, out_path=out, api_key=key)
    options.goodput_slos_ms = goodput_limits_ms(req.slo)
    out.parent.mkdir(parents=True, exist_ok=True)
    target = TargetInfo(
        base_url=server.base_url,
        server_name=server.name,
        model=server.served_model_name,
        tokenizer=tok,
        server_args=server.argv,
    )
    return run_bench(target, build_scenarios(breq), options, suite=None)


def _slo_values(sr: ScenarioResult, req: TuneRequest) -> dict[str, float | None]:
    from llmdeck.bench.metrics import compute_metrics

    pcts = sorted({float(t.stat[1:]) for t in req.slo if t.stat.startswith("p")} | {50.0, 99.0})
    m = compute_metrics(sr.requests, sr.metrics.duration_s if sr.metrics else 0.0, percentiles=pcts)
    out: dict[str, float | None] = {}
    for t in req.slo:
        stats = getattr(m, f"{t.metric}_ms")
        if stats is None:
            out[t.key] = None
        elif t.stat == "mean":
            out[t.key] = stats.mean
        elif t.stat == "median":
            out[t.key] = stats.median
        else:
            out[t.key] = stats.percentiles.get(f"p{float(t.stat[1:]):g}")
    return out


def score(result: BenchResult, req: TuneRequest) -> TrialMetrics:
    """Medians over the trial's runs (``--repeat``): goodput, throughput, each SLO's statistic; the
    worst run's failures."""
    runs = [sr for sr in result.scenarios if sr.metrics is not None and sr.status == "done"]
    if not runs:
        return TrialMetrics(goodput=0.0, request_throughput=0.0, output_throughput=0.0, completed=0, failed=0)
    goodputs = [sr.metrics.request_goodput or 0.0 for sr in runs if sr.metrics]
    values = [_slo_values(sr, req) for sr in runs]
    med: dict[str, float | None] = {}
    for t in req.slo:
        got = [v[t.key] for v in values if v[t.key] is not None]
        med[t.key] = statistics.median(x for x in got if x is not None) if got else None
    ms = [sr.metrics for sr in runs if sr.metrics]
    return TrialMetrics(
        goodput=statistics.median(goodputs),
        request_throughput=statistics.median(m.request_throughput for m in ms),
        output_throughput=statistics.median(m.output_throughput for m in ms),
        completed=min(m.completed for m in ms),
        failed=max(m.failed for m in ms),
        slo_values_ms=med,
        runs=len(runs),
        goodput_runs=goodputs,
    )


def meets(m: TrialMetrics, req: TuneRequest) -> bool:
    """Every SLO statistic within its limit, and no request failed."""
    if m.failed or not m.completed:
        return False
    return all((m.slo_values_ms.get(t.key) or float("inf")) <= t.limit_ms for t in req.slo)
