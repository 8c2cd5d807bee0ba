"""Loading saved results (`llmdeck report`) and an optional plot (matplotlib, if installed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmdeck.bench.result_schema import BENCH_RESULT_KIND, BENCH_SCHEMA_VERSION, BenchResult
from llmdeck.errors import MissingDependencyError, ResultFileError, UsageError
from llmdeck.formats.result_file import first_problem, load_versioned, read_json_file

# Numbers of a bench result that may be below zero: sample times relative to the run's start (a sample
# taken before it) and vLLM's "top_k -1: off". Every other number is a count, a length, a duration, a
# rate, a share or a clock reading: never negative, never NaN or infinite.
_SIGNED_KEYS = frozenset({"server_t", "host_t", "top_k"})


def _bad_number(data: Any, where: str = "") -> str | None:
    """``where: value`` of the first number a bench result cannot hold, or None."""
    import math

    if isinstance(data, dict):
        for key, value in data.items():
            if key in _SIGNED_KEYS and not isinstance(value, dict | list):
                if isinstance(value, float) and not math.isfinite(value):
                    return f"{where}{key}: {value}"
                continue
            found = _bad_number(value, f"{where}{key}.")
            if found:
                return found
    elif isinstance(data, list):
        key = where.rstrip(".").rsplit(".", 1)[-1]
        for i, value in enumerate(data):
            if key in _SIGNED_KEYS and isinstance(value, int | float):
                if isinstance(value, float) and not math.isfinite(value):
                    return f"{where}{i}: {value}"
                continue
            found = _bad_number(value, f"{where}{i}.")
            if found:
                return found
    elif (
        isinstance(data, int | float)
        and not isinstance(data, bool)
        and ((isinstance(data, float) and not math.isfinite(data)) or data < 0)
    ):
        return f"{where.rstrip('.')}: {data}"
    return None


def load_result(path: Path) -> BenchResult:
    """Read and validate a bench result file. Raises ResultFileError (exit 2) with what is wrong.

    Stricter than the model alone: the JSON's types as written (``true`` is not a number, ``"5"`` is
    not a count: pydantic's strict JSON mode) and no negative, NaN or infinite measurement."""
    p = Path(path)
    result = load_versioned(p, BenchResult, BENCH_RESULT_KIND, BENCH_SCHEMA_VERSION, "bench", "bench")
    hint = "The file may be edited by hand or written by something else; run the bench again."
    data = read_json_file(p, hint)
    bad = _bad_number(data)
    if bad:
        raise ResultFileError(f"{p} is not a valid bench result: {bad} is not a measurement.", hint=hint)
    try:
        BenchResult.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise ResultFileError(f"{p} is not a valid bench result: {first_problem(exc)}.", hint=hint) from exc
    if not result.scenarios:  # a bench writes every scenario it was asked (pending ones too): an empty table
        raise ResultFileError(f"{p} is not a valid bench result: it lists no scenario.", hint=hint)
    return result


PLOT_FORMATS = ("png", "svg", "pdf")  # what matplotlib writes that a later --plot knows as llmdeck's


def plot_result(result: BenchResult, out: Path) -> None:
    """TTFT of each request over time (one series per scenario) and output tok/s per scenario."""
    kind = Path(out).suffix.lstrip(".").lower() or "png"
    if kind not in PLOT_FORMATS:  # matplotlib's ValueError had come out as an internal error
        raise UsageError(
            f"--plot {out}: llmdeck draws PNG, SVG or PDF, not {kind!r}.",
            hint="Give --plot a name ending in .png, .svg or .pdf.",
        )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError(
            "--plot needs matplotlib, which is not installed.",
            hint="pip install 'llmdeck[plot]' (or matplotlib).",
        ) from exc
    from llmdeck.util.atomic import atomic_write_bytes, check_writable

    check_writable(Path(out))
    done = [sr for sr in result.scenarios if sr.metrics is not None]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for sr in done:
        pts = [(r.start, r.ttft) for r in sr.requests if r.ok and r.start is not None and r.ttft is not None]
        if pts:
            ax1.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, label=sr.spec.label())
    ax1.set_xlabel("request start (s from scenario start)")
    ax1.set_ylabel("TTFT (s)")
    ax1.set_title("TTFT per request")
    if ax1.get_legend_handles_labels()[0]:
        ax1.legend(fontsize=7)
    labels = [sr.spec.label() for sr in done]
    ax2.barh(labels, [sr.metrics.output_throughput if sr.metrics else 0.0 for sr in done])
    ax2.set_xlabel("output tok/s")
    ax2.set_title("Output throughput")
    fig.tight_layout()
    import io

    from llmdeck.util.owned import PLOT_MARK, is_plot, refuse_foreign_file

    refuse_foreign_file(Path(out), "plot", is_plot, tail_too=True)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format=kind, metadata={"Software" if kind == "png" else "Creator": PLOT_MARK})
    plt.close(fig)
    atomic_write_bytes(Path(out), buf.getvalue())
