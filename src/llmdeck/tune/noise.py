"""Adaptive repeats: is the winner told apart from its contenders, or is the difference within noise?

After the search (and ``--confirm``), the leader — the best median goodput among the configs that meet
the SLOs in every run — is compared with each *contender*: the runner-up, vLLM's defaults and every
``--candidate`` (those that meet the SLOs too; one that misses them is already told apart).

**The spread** of a config is the min..max range of its per-run goodputs: every ``--repeat`` run of
every measured trial of that config. Two configs are *separated* when both have at least
:data:`MIN_RUNS` runs and their ranges do not overlap. Why the range and not a bootstrap interval: a
config here has 2 to 6 runs (each a bench, most a server start of their own), and a bootstrap of so few
values resamples the same few numbers: its interval is narrower than the range and no more trustworthy.
The range needs no assumption about the distribution, it is what ``llmdeck bench --repeat`` reports as
run-to-run spread, and its false-alarm rate is exact: when two configs are really the same (their runs
exchangeable), the chance that n runs of each come out with disjoint ranges is 2 / C(2n, n) — 1/3 at
2 runs each, 1/10 at 3, 1/35 at 4 — hence :data:`MIN_RUNS` = 3.

**The loop**: while the leader overlaps a contender (or either has fewer than :data:`MIN_RUNS` runs),
both are measured again — each a new trial (origin ``recheck``) with the same workload seed, the two in
alternating order round by round (contender first, then leader first, ...) so that a drift of the
machine does not always land on the same one — until they separate, each has ``--max-repeats``
measured trials, or the budget is spent. The leader is recomputed after every round.

**Within noise**: a contender the leader never separated from ties with it. Then no winner is named;
``spec.json`` gets the *simplest* config of the tie — the fewest flags set away from vLLM's defaults
(vLLM's defaults: none), then the higher median, then the earlier trial — because a flag that is not
shown to help is a flag to maintain for nothing. ``--max-repeats 1`` turns all this off (the pick is
the best median, as before the option).
"""

from __future__ import annotations

import statistics
from typing import Literal

from llmdeck.tune.outputs import best_trial, config_runs
from llmdeck.tune.schema import Comparison, NoiseDecision, TrialRecord

MIN_RUNS = 3
RULE = (
    "separated = each config has >= 3 per-run goodputs and their min..max ranges do not overlap; "
    "within noise: the fewest flags set away from vLLM's defaults wins, then the higher median"
)


def samples(runs: list[TrialRecord]) -> list[float]:
    """Every per-run goodput of a config's measured trials (a trial without them counts as one run)."""
    out: list[float] = []
    for r in runs:
        got = r.metrics.goodput_runs if r.metrics is not None else []
        out.extend(got or [r.score])
    return out


def separated(a: list[float], b: list[float], min_runs: int = MIN_RUNS) -> bool:
    """Both have ``min_runs`` values or more and their ranges are apart."""
    if len(a) < min_runs or len(b) < min_runs:
        return False
    return min(a) > max(b) or min(b) > max(a)


def flags_set(rec: TrialRecord) -> int:
    """How far a config is from vLLM's defaults: the parameters it sets (None and "default": unset)."""
    return sum(v is not None and v != "default" for v in rec.params.values())


def _pool(groups: dict[int, list[TrialRecord]]) -> list[int]:
    return [k for k, runs in groups.items() if all(r.meets_slo for r in runs)] or list(groups)


def contenders(records: list[TrialRecord], leader: int) -> list[int]:
    """The configs the leader is checked against: the runner-up, vLLM's defaults, each --candidate —
    those in the leader's pool (meeting the SLOs in every run, when any config does)."""
    groups = config_runs(records)
    first = {r.number: r for r in records}
    pool = [k for k in _pool(groups) if k != leader]
    ranked = sorted(pool, key=lambda k: (-statistics.median(r.score for r in groups[k]), k))
    out = ranked[:1]
    out += [k for k in sorted(pool) if first[k].origin in ("default", "given") and k not in out]
    return out


def next_round(records: list[TrialRecord], cap: int) -> list[int]:
    """The configs (their first trials' numbers) to measure again now, in order; [] when the leader is
    separated from every contender or every overlapping pair is at ``cap`` measured trials."""
    best = best_trial(records)
    if best is None or cap <= 1:
        return []
    groups = config_runs(records)
    tries: dict[int, int] = {}  # every trial of a config, failed ones too: a failing re-run ends too
    for r in records:
        tries[r.repeat_of or r.number] = tries.get(r.repeat_of or r.number, 0) + 1
    leader = best.number
    for c in contenders(records, leader):
        if separated(samples(groups[leader]), samples(groups[c])):
            continue
        todo = [n for n in (c, leader) if tries[n] < cap]
        if todo:
            rounds = tries[c] - 1  # re-measures of this contender so far
            return todo if rounds % 2 == 0 else todo[::-1]
    return []


def decide(records: list[TrialRecord], cap: int, budget_stopped: bool | None = False) -> NoiseDecision | None:
    """The leader, its comparisons and the config to write (see the module doc); None when nothing
    was measured or ``cap`` is 1 (adaptive repeats off). ``budget_stopped`` None: not known (a trials
    file read back by `report`, which does not record why its tune stopped)."""
    best = best_trial(records)
    if best is None or cap <= 1:
        return None
    groups = config_runs(records)
    first = {r.number: r for r in records}
    leader = best.number
    comps = [
        Comparison(
            leader=leader,
            other=c,
            other_origin=first[c].origin,
            leader_runs=samples(groups[leader]),
            other_runs=samples(groups[c]),
            separated=separated(samples(groups[leader]), samples(groups[c])),
        )
        for c in contenders(records, leader)
    ]
    tied = [leader] + [c.other for c in comps if not c.separated]
    chosen = min(tied, key=lambda n: (flags_set(first[n]), -statistics.median(samples(groups[n])), n))
    within = len(tied) > 1
    stop: Literal["separated", "budget", "max-repeats", "unknown"] = "separated"
    if within:
        stop = "unknown" if budget_stopped is None else "budget" if budget_stopped else "max-repeats"
    decision = NoiseDecision(
        rule=RULE, leader=leader, chosen=chosen, within_noise=within, tied=tied, comparisons=comps,
        stopped_by=stop,
    )  # fmt: skip
    decision.message = describe(decision, first)
    return decision


def _range(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f} req/s over {len(values)} run(s)"


def _who(n: int, first: dict[int, TrialRecord]) -> str:
    origin = first[n].origin
    what = {"default": "vLLM's defaults", "given": "a --candidate", "search": "the search's"}.get(
        origin, origin
    )
    return f"trial {n} ({what})"


def _tie(c: Comparison, first: dict[int, TrialRecord]) -> str:
    """A contender not told apart; ranges that do not overlap but rest on too few runs say so (at 2
    runs a side, 1 in 3 ties look apart by chance)."""
    a, b = c.leader_runs, c.other_runs
    apart = min(a) > max(b) or min(b) > max(a)
    short = f", apart but under {MIN_RUNS} runs a side" if apart and min(len(a), len(b)) < MIN_RUNS else ""
    return f"{_who(c.other, first)} ({_range(b)}{short})"


def describe(d: NoiseDecision, first: dict[int, TrialRecord]) -> str:
    """One sentence for the CLI and the page."""
    if not d.within_noise:
        if not d.comparisons:
            return f"{_who(d.leader, first)} has no contender: no other measured config meets the SLOs."
        lead = d.comparisons[0].leader_runs
        others = "; ".join(f"{_who(c.other, first)} {_range(c.other_runs)}" for c in d.comparisons)
        return f"{_who(d.leader, first)} wins: its runs ({_range(lead)}) are apart from {others}."
    ties = [c for c in d.comparisons if not c.separated]
    why = {"budget": "the budget ran out", "max-repeats": "--max-repeats was reached"}.get(d.stopped_by, "")
    return (
        f"within noise: {_who(d.leader, first)} ({_range(ties[0].leader_runs)}) did not separate from "
        + " or ".join(_tie(c, first) for c in ties)
        + (f" before {why}" if why else "")
        + f"; no winner is named, and spec.json gets {_who(d.chosen, first)}: the fewest "
        "flags set away from vLLM's defaults, then the higher median."
    )
