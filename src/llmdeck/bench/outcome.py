"""Whether a finished bench measured anything: the exit status of `llmdeck bench` as an error (and
the words after Ctrl-C: ``interrupted_error``).

A run that aborted, whose scenarios were all skipped, or whose every request failed gives no number to
read, so it is a failed operation (exit 1) naming why; the result file is written either way."""

from __future__ import annotations

from pathlib import Path

from llmdeck.bench.result_schema import BenchResult
from llmdeck.errors import OperationError
from llmdeck.util.shellquote import quote


def run_failure(result: BenchResult, out_path: Path) -> OperationError | None:
    """The error to end the command with, or None when at least one request was measured."""
    if result.status == "aborted":
        return OperationError(
            f"{result.error} Finished requests and the failures are saved in {out_path}.",
            hint="Check the server's log (`llmdeck logs`), restart it, and run the bench again.",
        )
    ran = [sc for sc in result.scenarios if sc.metrics is not None]
    if not ran:
        return _all_skipped(result, out_path)
    if any(sc.metrics is not None and sc.metrics.completed > 0 for sc in ran):
        return None
    errors = [r.error for sc in ran for r in sc.requests if r.error]
    first = f" The first: {errors[0][:300]}" if errors else ""
    failed = sum(sc.metrics.failed for sc in ran if sc.metrics is not None)
    if failed == 0:  # none was sent: it had said "Every request failed (0 of them)"
        cut = min((sc.spec.duration_s for sc in ran if sc.spec.duration_s), default=None)
        why = f": --duration {cut:g} s ended before the first" if cut is not None else ""
        return OperationError(
            f"No request was sent, so nothing was measured{why}. The result is saved in {out_path}.",
            hint="Give --duration a few seconds at least, or leave it out (the scenario's prompts decide).",
        )
    return OperationError(
        f"Every request failed ({failed} of them), so nothing was measured.{first} The failures are "
        f"saved in {out_path}.",
        hint="Check that the model answers (`llmdeck check URL`) and the server's log (`llmdeck logs`).",
    )


def _all_skipped(result: BenchResult, out_path: Path) -> OperationError | None:
    """No scenario ran: each was skipped (most often: it needs more context than max_model_len)."""
    skipped = [sc for sc in result.scenarios if sc.status == "skipped"]
    if not skipped:
        return None  # nothing was asked (no scenario at all)
    reasons = sorted({sc.skip_reason or "no reason given" for sc in skipped})
    shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
    return OperationError(
        f"Nothing was measured: all {len(skipped)} scenario(s) were skipped ({shown}). The result is "
        f"saved in {out_path}.",
        hint="Use a smaller --input-len/--output-len (or --prefix-len) to fit the server's max_model_len, "
        "pick another --suite, or restart the server with a larger --max-model-len.",
    )


class BenchInterrupted(OperationError):
    """The user interrupted the run (Ctrl-C); exit code 130 like any interrupted command."""

    exit_code = 130


def interrupted_error(out_path: Path, written: bool = True) -> BenchInterrupted:
    """What to say after Ctrl-C: where the partial result is (the runner wrote it), and only if it is;
    ``written``: False when the file there is an earlier one the run left alone."""
    if written and out_path.is_file():
        return BenchInterrupted(
            "The bench was interrupted; the partial result (every finished request, the rest marked "
            f"interrupted or not run) is in {out_path}.",
            hint=f"Re-render it with `llmdeck report {quote(str(out_path))}`.",
        )
    left = "(an earlier result) was left as it was" if out_path.is_file() else "was not written"
    return BenchInterrupted(
        f"The bench was interrupted before it began; nothing was measured and {out_path} {left}.",
        hint="Run the bench again.",
    )
