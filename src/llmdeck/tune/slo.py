"""Parsing what the user asks `llmdeck tune` for: SLO targets (``ttft_p99=2s,tpot_p99=100ms``) and
the wall-clock budget (``45m``).

An SLO target is a limit on one statistic of one latency (vLLM's names: TTFT, TPOT, ITL, E2EL). The
targets give two things: the per-request limits of vLLM's goodput (``--goodput ttft:2000``: a request
is good when its own TTFT/TPOT/E2EL is within every limit; ITL is per token, so it is not one of them)
and the run's constraint (the stated statistic, e.g. the P99, within its limit).
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, Field

from llmdeck.errors import UsageError

_KEY_RE = re.compile(r"^(ttft|tpot|itl|e2el)_(mean|median|p\d+(?:\.\d+)?)$")
_DUR_RE = re.compile(r"^([0-9]*\.?[0-9]+)\s*(ms|s|m|min)?$")
_BUDGET_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|min|s)")
SLO_HINT = (
    "Write --slo ttft_p99=2s,tpot_p99=100ms: KEY=VALUE pairs, KEY one of ttft, tpot, itl, e2el followed "
    "by _mean, _median or _pNN (e.g. _p99), VALUE a duration like 2s or 100ms."
)


class SloTarget(BaseModel, frozen=True):
    """One limit: ``metric`` (ttft|tpot|itl|e2el), ``stat`` (mean|median|pNN), ``limit_ms``."""

    metric: str
    stat: str
    limit_ms: float = Field(gt=0)

    @property
    def key(self) -> str:
        return f"{self.metric}_{self.stat}"

    def label(self) -> str:
        return f"{self.metric.upper()} {self.stat.upper() if self.stat.startswith('p') else self.stat}"


def _duration_ms(text: str) -> float:
    m = _DUR_RE.match(text.strip().lower())
    if not m:
        raise ValueError(text)
    value, unit = float(m.group(1)), m.group(2) or "s"
    factor = {"ms": 1.0, "s": 1000.0, "m": 60000.0, "min": 60000.0}[unit]
    ms = value * factor
    if not math.isfinite(ms) or ms <= 0:
        raise ValueError(text)
    return ms


def parse_slo_targets(text: str) -> list[SloTarget]:
    """``"ttft_p99=2s,tpot_p99=100ms"`` -> targets. Raises UsageError (exit 2) on anything else."""
    items = [i for i in text.replace(",", " ").split() if i]
    if not items:
        raise UsageError(f"--slo {text!r} gives no target.", hint=SLO_HINT)
    out: dict[str, SloTarget] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        m = _KEY_RE.match(key)
        try:
            if not sep or not m:
                raise ValueError(item)
            ms = _duration_ms(value)
        except ValueError:
            raise UsageError(f"--slo: {item!r} is not an SLO target.", hint=SLO_HINT) from None
        if m.group(2).startswith("p") and not 0 < float(m.group(2)[1:]) <= 100:
            raise UsageError(f"--slo: {item!r} names a percentile outside 0-100.", hint=SLO_HINT)
        if key in out:
            raise UsageError(f"--slo gives {key} twice.", hint=SLO_HINT)
        out[key] = SloTarget(metric=m.group(1), stat=m.group(2), limit_ms=ms)
    return list(out.values())


def goodput_limits_ms(targets: list[SloTarget]) -> dict[str, float]:
    """vLLM's per-request goodput limits (ms) from the targets: the tightest per metric; ITL has none."""
    out: dict[str, float] = {}
    for t in targets:
        if t.metric in {"ttft", "tpot", "e2el"}:
            out[t.metric] = min(out.get(t.metric, math.inf), t.limit_ms)
    return out


def parse_budget_s(text: str) -> float:
    """``45m``, ``1h30m``, ``90s``, ``2h``, or plain seconds -> seconds. UsageError (exit 2) otherwise."""
    t = text.strip().lower().replace(" ", "")
    hint = "Write a wall-clock budget like --budget 45m, --budget 1h30m or --budget 600s."
    total = 0.0
    if re.fullmatch(r"\d+(\.\d+)?", t):
        total = float(t)
    else:
        pos = 0
        for m in _BUDGET_RE.finditer(t):
            if m.start() != pos:
                break
            total += float(m.group(1)) * {"h": 3600, "m": 60, "min": 60, "s": 1}[m.group(2)]
            pos = m.end()
        if pos != len(t) or not t:
            raise UsageError(f"--budget {text!r} is not a duration.", hint=hint)
    if not math.isfinite(total) or total <= 0:
        raise UsageError(f"--budget {text!r} must be a positive duration.", hint=hint)
    return total
