"""A multi-turn scenario's time to first token by turn: how a server's TTFT follows a session's growing
history (a prefix cache that keeps every session stays flat; one that re-computes the history grows)."""

from __future__ import annotations

import statistics

from llmdeck.bench.result_schema import ScenarioResult


def ttft_by_turn(sr: ScenarioResult) -> dict[int, float]:
    """Median TTFT (ms) of the completed requests of each turn (0 = a session's first); empty for a
    scenario of one turn."""
    by_turn: dict[int, list[float]] = {}
    for r in sr.requests:
        if r.ok and r.turn is not None and r.ttft is not None:
            by_turn.setdefault(r.turn, []).append(1000 * r.ttft)
    if len(by_turn) < 2:
        return {}
    return {turn: statistics.median(v) for turn, v in sorted(by_turn.items())}
