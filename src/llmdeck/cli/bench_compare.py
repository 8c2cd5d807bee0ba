"""`llmdeck bench --compare URL_A URL_B`: the CLI side (run, table, exit code) of bench.versus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmdeck.cli.output import err_console, out_console, print_json
from llmdeck.util.redact import redact_url
from llmdeck.util.safetext import markup_data

COMPARE_DEFAULT_WORKLOAD = "agent-sessions"


def run_compare(
    settings: Any,
    req: Any,
    urls: tuple[str, str],
    *,
    model: str | None,
    tokenizer: str | None,
    api_key: str | None,
    json_out: bool,
) -> None:
    """Resolve both sides, run the rounds, print the comparison; exit 1 when nothing was measured."""
    import asyncio
    from datetime import datetime

    from llmdeck.bench.request import build_options, build_scenarios
    from llmdeck.bench.runner import resolve_target
    from llmdeck.bench.versus import MIN_ROUNDS, VERSUS_KIND, run_versus
    from llmdeck.cli.bench_parts import RichProgress
    from llmdeck.errors import UsageError
    from llmdeck.util.atomic import check_writable
    from llmdeck.util.filelock import sole_writer
    from llmdeck.util.owned import json_kind_is, refuse_foreign_file

    if req.suite or len(req.request_rates) * len(req.max_concurrencies) > 1:
        raise UsageError(
            "--compare runs one workload on both servers; a suite or a sweep is several.",
            hint="Drop --suite and give one --request-rate / --max-concurrency.",
        )
    req = req.model_copy(update={"repeat": max(req.repeat, MIN_ROUNDS)})
    specs = build_scenarios(req)
    targets = tuple(resolve_target(u, settings, model=model, tokenizer=tokenizer) for u in urls)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out_path = req.out or Path(settings.results_dir) / f"bench-compare-{stamp}.json"
    check_writable(out_path)
    refuse_foreign_file(out_path, "bench comparison", json_kind_is(VERSUS_KIND))
    options = build_options(req, out_path=out_path, api_key=api_key)
    console = err_console()
    console.print(
        f"[dim]comparing A={markup_data(redact_url(targets[0].base_url))} and "
        f"B={markup_data(redact_url(targets[1].base_url))}: "
        f"{len(specs)} rounds of {markup_data(specs[0].label())}, ABBA order; result file: "
        f"{markup_data(str(out_path))}[/]",
        highlight=False,
    )
    with sole_writer(settings.locks_dir, out_path, "bench comparison"), RichProgress(console) as progress:
        whole = asyncio.run(run_versus((targets[0], targets[1]), specs, options, progress=progress))
    if json_out:
        print_json(whole)
    else:
        render_versus(whole, out_console())
        console.print(f"[dim]result: {markup_data(str(out_path))}[/]", highlight=False)
    _fail_if_nothing(whole, out_path)


def _fail_if_nothing(whole: Any, out_path: Path) -> None:
    from llmdeck.errors import OperationError

    if whole.status == "aborted":
        raise OperationError(
            f"{whole.error} What finished is saved in {out_path}.",
            hint="Check both servers (`llmdeck check URL`) and run the comparison again.",
        )
    for side in (whole.a, whole.b):
        done = sum(sr.metrics.completed for sr in side.result.scenarios if sr.metrics)
        if done == 0:
            errors = [r.error for sr in side.result.scenarios for r in sr.requests if r.error]
            first = f" The first: {errors[0][:300]}" if errors else ""
            raise OperationError(
                f"Every request to {side.label} ({side.url}) failed, so nothing was compared.{first} "
                f"The failures are saved in {out_path}.",
                hint="Check that the model answers there (`llmdeck check URL`).",
            )


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if unit == "requests" else f"{value:,.1f}"


def render_versus(whole: Any, console: Any) -> None:
    """The side-by-side table (medians over the rounds, B/A) and each side's facts."""
    from rich.table import Table

    for side in (whole.a, whole.b):
        t = side.result.target
        engine = side.engine or "not reported (no /metrics)"
        url = redact_url(side.url)  # a file edited by hand or written by an older llmdeck may hold one
        console.print(
            f"[bold]{side.label}[/] {markup_data(url)}  engine {markup_data(engine)}, "
            f"model {markup_data(t.model)}"
            + (f", server {markup_data(t.server_version)}" if t.server_version else "")
        )
        for s in side.ollama[-1:]:
            console.print(
                f"    Ollama /api/ps after {markup_data(s.after)}: {s.bytes / 2**30:.2f} GiB held "
                f"({s.vram_bytes / 2**30:.2f} GiB on the GPU) by {markup_data(', '.join(s.models) or 'none')}"
            )
    workload = whole.workload.model_copy(update={"repeat": None}).label()
    table = Table(
        title=f"{markup_data(workload)}: {whole.rounds} rounds ({' '.join(whole.order)}), medians",
        show_header=True,
        header_style="bold",
    )
    for col in ("metric", "A", "B", "B / A"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in whole.rows:
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "n/a"
        table.add_row(f"{row.metric} ({row.unit})", _fmt(row.a, row.unit), _fmt(row.b, row.unit), ratio)
    console.print(table)
    if whole.status != "complete":
        console.print(f"[yellow]status: {markup_data(whole.status)} {markup_data(whole.error or '')}[/]")


def report_versus(path: Path, json_out: bool) -> None:
    """`llmdeck report FILE` of a comparison: its table again, or --json."""
    from llmdeck.bench.versus import VERSUS_KIND, VERSUS_SCHEMA_VERSION, VersusResult
    from llmdeck.formats.result_file import load_versioned

    whole = load_versioned(
        path, VersusResult, VERSUS_KIND, VERSUS_SCHEMA_VERSION, "bench comparison", "bench"
    )
    if json_out:
        print_json(whole)
    else:
        render_versus(whole, out_console())


def is_versus_file(path: Path) -> bool:
    """A comparison's result file, gzipped or not (its kind, near the top; a FIFO or a device is not
    opened blocking: the reader then names it)."""
    from llmdeck.bench.versus import VERSUS_KIND
    from llmdeck.util.kindsniff import has_kind

    return has_kind(path, VERSUS_KIND)
