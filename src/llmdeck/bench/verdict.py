"""Verdict rules: limits on the measured numbers, each saying what a miss means.

Defaults come from the seeds (seed 004: "if Waiting stays above 0, or P99 TTFT exceeds 10-20 s,
the model or its flags are not fit as a multi-user default"; a mean TPOT of 165 ms was "not
ideal for interactive use", 131 ms "usable"). Users override or add limits with
``--slo KEY=VALUE`` (e.g. ``ttft_p99=5s``, ``tpot_mean=80ms``, ``failed=2``, ``waiting_drains=0``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llmdeck.bench.result_schema import ScenarioMetrics, ServerMetricsSummary, Stats, Verdict, VerdictCheck
from llmdeck.errors import UsageError

DEFAULT_SLO: dict[str, float] = {
    "failed": 0.0,
    "ttft_p99": 10.0,
    "tpot_mean": 0.150,
    "waiting_drains": 1.0,
}

_LAT_RE = re.compile(r"^(ttft|tpot|itl|e2el)_(mean|median|p\d+(?:\.\d+)?)$")
_SAYS = {
    "failed": "requests failed",
    "ttft": "not for multi-user",
    "tpot": "slow decode",
    "itl": "stuttering stream",
    "e2el": "slow answers",
    "waiting_drains": "not for multi-user: the waiting queue never drains",
    "output_throughput": "low throughput",
}
_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}


def parse_duration_s(text: str) -> float:
    """``10s``, ``500ms``, ``2m``, ``0.5`` (seconds) -> seconds."""
    t = text.strip().lower()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(ms|s|m|min)?", t)
    if not m:
        raise ValueError(text)
    value = float(m.group(1))
    unit = m.group(2) or "s"
    return value / 1000.0 if unit == "ms" else value * 60.0 if unit in {"m", "min"} else value


def parse_slo(pairs: Sequence[str], base: dict[str, float] | None = None) -> dict[str, float]:
    """Merge ``KEY=VALUE`` overrides into the default rules. Raises UsageError on a bad pair."""
    out = dict(DEFAULT_SLO if base is None else base)
    for pair in pairs:
        for item in pair.replace(",", " ").split():
            key, sep, val = item.partition("=")
            key, v = key.strip().lower(), val.strip().lower()
            is_lat = bool(_LAT_RE.match(key))
            try:
                if not sep or not (is_lat or key in {"failed", "waiting_drains", "output_throughput"}):
                    raise ValueError(item)
                if v in {"off", "none", "-"}:
                    out.pop(key, None)
                    continue
                out[key] = parse_duration_s(v) if is_lat else float(v)
            except ValueError as exc:
                raise UsageError(
                    f"{item!r} is not a verdict rule.",
                    hint="Use KEY=VALUE with KEY one of ttft_p99, ttft_mean, tpot_mean, itl_p99, e2el_p99 "
                    "(any of mean/median/pNN; values like 10s or 500ms), failed=N, waiting_drains=1|0, "
                    "output_throughput=TOK_PER_S; VALUE 'off' drops a rule.",
                ) from exc
    return out


def _stat(metrics: ScenarioMetrics, name: str, which: str) -> float | None:
    stats: Stats | None = getattr(metrics, f"{name}_ms")
    if stats is None:
        return None
    if which == "mean":
        return stats.mean / 1000.0
    if which == "median":
        return stats.median / 1000.0
    v = stats.percentiles.get(which)
    return None if v is None else v / 1000.0


def _fmt_s(v: float) -> str:
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


_Outcome = tuple[VerdictCheck, str | None]  # the check, and the words for the label when it failed


def judge(metrics: ScenarioMetrics, server: ServerMetricsSummary | None, slo: dict[str, float]) -> Verdict:
    """Apply the rules; the label names each failed rule with the numbers behind it."""
    checks: list[VerdictCheck] = []
    words: list[str] = []
    for key, limit in slo.items():
        outcome = _apply(key, limit, metrics, server)
        if outcome is None:
            continue
        check, word = outcome
        checks.append(check)
        if word:
            words.append(word)
    ok = not words
    return Verdict(label="ok" if ok else "; ".join(words), passed=ok, checks=checks)


def _apply(
    key: str, limit: float, metrics: ScenarioMetrics, server: ServerMetricsSummary | None
) -> _Outcome | None:
    """One rule of the SLO; None for a rule that does not apply (unknown, or switched off)."""
    m = _LAT_RE.match(key)
    if m:
        return _latency(key, m.group(1), m.group(2), limit, metrics)
    if key == "failed":
        return _failed(limit, metrics)
    if key == "output_throughput":
        return _throughput(limit, metrics)
    if key == "waiting_drains" and limit:
        return _drains(server)
    return None


def _latency(key: str, name: str, which: str, limit: float, metrics: ScenarioMetrics) -> _Outcome:
    value = _stat(metrics, name, which)
    passed = None if value is None else value <= limit
    check = VerdictCheck(
        rule=key, metric=key, value=value, limit=limit, unit="s", passed=passed, says=_SAYS[name]
    )
    if passed is False and value is not None:
        label = which.upper() if which.startswith("p") else which
        return check, f"{_SAYS[name]} ({label} {_NAMES[name]} {_fmt_s(value)} > {_fmt_s(limit)})"
    return check, None


def _failed(limit: float, metrics: ScenarioMetrics) -> _Outcome:
    key = "failed"
    value = float(metrics.failed)
    passed = value <= limit
    check = VerdictCheck(
        rule=key, metric="failed", value=value, limit=limit, unit="requests", passed=passed, says=_SAYS[key]
    )
    if not passed:
        return check, f"{metrics.failed} of {metrics.failed + metrics.completed} requests failed"
    return check, None


def _throughput(limit: float, metrics: ScenarioMetrics) -> _Outcome:
    key = "output_throughput"
    value = metrics.output_throughput
    passed = value >= limit
    check = VerdictCheck(
        rule=key, metric=key, value=value, limit=limit, unit="tok/s", passed=passed, says=_SAYS[key]
    )
    if not passed:
        return check, f"{_SAYS[key]} ({value:.1f} tok/s < {limit:g})"
    return check, None


def _drains(server: ServerMetricsSummary | None) -> _Outcome:
    key = "waiting_drains"
    nd = server.waiting_never_drained if server else None
    value = None if nd is None or server is None else server.waiting_mean
    passed = None if nd is None else not nd
    check = VerdictCheck(
        rule=key,
        metric="waiting_mean",
        value=value,
        limit=0.0,
        unit="requests",
        passed=passed,
        says=_SAYS[key],
    )
    if nd and server is not None:
        mean, last = server.waiting_mean or 0.0, server.waiting_last or 0.0
        return check, f"{_SAYS[key]} (waiting mean {mean:.1f}, last {last:.0f})"
    return check, None
