"""`llmdeck report`: re-render saved bench results (table, --json, --plot, --html), or compare one
with `vllm bench serve` results (--against). Registered by ``cli/bench.py`` next to `bench`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from llmdeck.cli.output import JSON_OPTION, err_console, out_console, print_json

if TYPE_CHECKING:
    from rich.table import Table

    from llmdeck.bench.result_schema import BenchResult
    from llmdeck.tune.schema import TrialsHeader, TuneReport

HTML_HELP = (
    "Write one self-contained HTML page (no scripts, nothing from the network): per scenario the "
    "latency distributions, the run over time with the server's queue and the host's memory, the "
    "verdict; a sweep's latency against load and Pareto knee. Several RESULT files: a comparison page."
)


def report(
    ctx: typer.Context,
    result_files: list[Path] = typer.Argument(
        ...,
        metavar="RESULT",
        help="Result JSON(s) written by `llmdeck bench` or `llmdeck eval` (several: with --html, a "
        "comparison), or a `llmdeck tune` folder (its trials.jsonl); gzipped files (.json.gz) read as "
        "they are.",
    ),
    plot: Path | None = typer.Option(None, "--plot", help="Also draw TTFT/TPOT/throughput to a PNG."),
    against: list[Path] = typer.Option(
        [],
        "--against",
        help="A `vllm bench serve --save-result` JSON: show its metrics next to a scenario's, with ratios "
        "and every way the two workloads differ. Give it several times (and bench with --repeat) to "
        "compare medians over runs.",
    ),
    scenario: str | None = typer.Option(
        None,
        "--scenario",
        help="With --against: the scenario to compare (default: the only one, or the one that matches).",
    ),
    html: Path | None = typer.Option(None, "--html", help=HTML_HELP),
    json_out: bool = JSON_OPTION,
) -> None:
    """Re-render a saved bench result (table, or --json; --plot needs matplotlib), write it as an HTML
    page (--html; several results: a comparison page), or compare it with a `vllm bench serve` result
    (--against).

    With --against, the table puts both tools' metrics side by side with their ratios and lists every
    workload difference that would make the comparison unfair (lengths, count, rate, seed, endpoint).

    The HTML comparison puts each metric's median over a file's runs (bench --repeat) next to the
    others', with its min-max range and the change against the first file; a change is coloured only
    when the ranges do not overlap. It also diffs the environments (vLLM version, flags, GPU, model).

    Examples:

      llmdeck report r.json --plot r.png

      llmdeck report r.json --html r.html           # one page: open it in any browser, share it

      llmdeck report base.json tuned.json --html cmp.html   # side by side, environments diffed

      llmdeck report r.json --against vllm-result.json --scenario random-2048-512

      # `llmdeck eval` results: serving configurations side by side on the same tasks
      llmdeck report fp8-kv.json bf16-kv.json --html evals.html

      # a `llmdeck tune` folder (copied from the GPU box): the config it chose, its page again
      llmdeck report tune-agent --html tune.html

      # medians of 3 runs each: llmdeck bench ... --seed S --repeat 3 (one scenario: seeds S, S+1, S+2)
      # and vllm bench serve ... --seed S, S+1, S+2 --save-result
      llmdeck report r.json --against v0.json --against v1.json --against v2.json
    """
    _report(result_files, plot, against, scenario, html, json_out)


def _report(
    result_files: list[Path],
    plot: Path | None,
    against: list[Path],
    scenario: str | None,
    html: Path | None,
    json_out: bool,
) -> None:
    from llmdeck.bench.result_file import load_result, plot_result
    from llmdeck.bench.tables import render_result
    from llmdeck.errors import UsageError

    if _report_other(result_files, plot, against, scenario, html, json_out):
        return
    if len(result_files) > 1 and html is None:
        raise UsageError(
            f"{len(result_files)} result files were given; several compare only as an HTML page.",
            hint="Add --html OUT.html, or pass one file.",
        )
    if len(result_files) > 1 and (against or plot is not None):
        raise UsageError("--against and --plot take one result file.", hint="Pass one RESULT file.")
    if html is not None:
        from llmdeck.bench.html.page import check_html_path

        check_html_path(html)
    results = [load_result(p) for p in result_files]
    if html is not None:
        _write_html(results, result_files, html)
        if len(results) > 1:
            if json_out:  # the results compared, in order
                print_json(results)
            return
    result, result_file = results[0], result_files[0]
    if against:
        from llmdeck.bench.compare import compare, load_vllm_result, render_comparison

        cmp = compare(
            result,
            [load_vllm_result(p) for p in against],
            scenario=scenario,
            llmdeck_file=str(result_file),
            vllm_files=[str(p) for p in against],
        )
        if json_out:
            print_json(cmp)
        else:
            render_comparison(cmp, out_console())
        return
    if scenario is not None:
        raise UsageError("--scenario only applies with --against.", hint="Add --against VLLM_RESULT.json.")
    if plot is not None:
        plot_result(result, plot)
        err_console().print(f"[dim]plot written to {escape(str(plot))}[/]", highlight=False)
    if json_out:
        print_json(result)
    else:
        render_result(result, out_console())


def _report_other(
    files: list[Path],
    plot: Path | None,
    against: list[Path],
    scenario: str | None,
    html: Path | None,
    js: bool,
) -> bool:
    """A `bench --compare` result, eval results or a tune: rendered here (True), else False."""
    from llmdeck.cli.bench_compare import is_versus_file, report_versus
    from llmdeck.evals.results import is_eval_file

    if len(files) == 1 and not (plot or against or html) and is_versus_file(files[0]):
        report_versus(files[0], js)
    elif any(is_eval_file(p) for p in files):
        _report_evals(files, plot, against, scenario, html, js)
    elif any(_is_tune(p) for p in files):
        _report_tune(files, bool(plot or against or scenario), html, js)
    else:
        return False
    return True


def _report_evals(
    files: list[Path],
    plot: Path | None,
    against: list[Path],
    scenario: str | None,
    html: Path | None,
    json_out: bool,
) -> None:
    """`report` of `llmdeck eval` results: the table or --json of one; --html: its page, or several side by
    side (serving configurations on the same tasks)."""
    from llmdeck.errors import UsageError
    from llmdeck.evals.results import is_eval_file, load_eval_result

    if not all(is_eval_file(p) for p in files):
        raise UsageError(
            "Eval results and bench results cannot be mixed in one report.", hint="Pass one kind."
        )
    if plot is not None or against or scenario is not None:
        raise UsageError(
            "--plot, --against and --scenario are for bench results.", hint="Use --html or --json."
        )
    if len(files) > 1 and html is None:
        raise UsageError(
            f"{len(files)} eval results compare only as an HTML page.", hint="Add --html OUT.html."
        )
    results = [load_eval_result(p) for p in files]
    if html is not None:
        from llmdeck.evals.html import write_eval_report

        size = write_eval_report(results, [str(f) for f in files], html)
        err_console().print(
            f"[dim]HTML report written to {escape(str(html))} ({size / 1024:.0f} kB)[/]", highlight=False
        )
        if len(results) > 1:
            if json_out:
                print_json(results)
            return
    if json_out:
        print_json(results[0])
    else:
        from llmdeck.evals.tables import render_result

        render_result(results[0], out_console())


def _is_tune(p: Path) -> bool:
    """A tune's folder or trials file (by name, or by its first line when gzipped or renamed)."""
    from llmdeck.tune.trials import trials_path_of

    return p.is_dir() or p.suffix == ".jsonl" or trials_path_of(p) is not None


def _report_tune(files: list[Path], bench_options: bool, html: Path | None, json_out: bool) -> None:
    """`report` of a tune (its folder or trials file, e.g. copied from the GPU box): which config it
    chose and why, --json, or its page again (--html) with this llmdeck's renderer."""
    from llmdeck.errors import UsageError
    from llmdeck.tune.outputs import best_runs, chosen
    from llmdeck.tune.schema import TuneReport
    from llmdeck.tune.startcost import fill_from_logs
    from llmdeck.tune.trials import read_trials, trials_path_of

    path = trials_path_of(files[0])
    if len(files) > 1 or path is None:
        raise UsageError(
            f"{files[0]} is not a tune folder or trials file, or several were given.",
            hint="Pass one folder written by `llmdeck tune --out DIR` (or its trials.jsonl).",
        )
    if bench_options:
        raise UsageError(
            "--plot, --against and --scenario are for bench results.", hint="Use --html or --json."
        )
    from llmdeck.tune.html import shown

    header, records = read_trials(path)
    records = [shown(r) for r in records]  # what is printed or drawn: secrets redacted
    fill_from_logs(records, path.parent)
    best, noise = chosen(records, header.request.max_repeats, budget_stopped=None)
    if html is not None:
        from llmdeck.bench.html.page import check_html_path
        from llmdeck.tune.html import write_tune_report

        check_html_path(html)
        write_tune_report(header, records, best, html, noise)
        err_console().print(f"[dim]HTML report written to {escape(str(html))}[/]", highlight=False)
    report = TuneReport(
        trials_file=str(path), best=best, best_runs=best_runs(records, best), noise=noise, trials=records
    )
    if json_out:
        print_json(report)
    elif html is None:
        _print_tune(report, header)


def _trials_table(header: TrialsHeader, report: TuneReport) -> tuple[Table, list[str]]:
    """Every trial, as the page's table (goodput with each run, SLO figures), and a line a trial of
    what it changed from vLLM's defaults (configs are long: below the table, not in a column)."""
    from rich.table import Table

    from llmdeck.tune.html import rows

    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for name in ("#", "origin", "goodput req/s", "runs", "× defaults"):
        t.add_column(name, justify="left" if name in ("origin", "runs") else "right", no_wrap=True)
    for slo in header.request.slo:
        t.add_column(f"{slo.label()} ms", justify="right")
    t.add_column("SLOs")
    configs = []
    for r in rows(header, report.trials, report.best):
        runs = " ".join(f"{g:.2f}" for g in r.goodput_runs) if len(r.goodput_runs) > 1 else ""
        state = ("meets" if r.meets else "misses") if r.status == "ok" else r.status
        t.add_row(
            f"{r.number}{' *' if r.best else ''}", r.origin,
            f"{r.goodput:.3f}" if r.goodput is not None else "-", runs,
            f"{r.vs_default:.2f}" if r.vs_default is not None else "-", *r.slo_values, state,
        )  # fmt: skip
        same = f" (at vLLM's defaults: {', '.join(r.at_default)})" if r.at_default else ""
        configs.append(f"  {r.number}: {r.label}{same}")
    return t, configs


def _print_tune(report: TuneReport, header: TrialsHeader) -> None:
    console, best = out_console(), report.best
    ok = sum(1 for t in report.trials if t.status == "ok")
    console.print(f"{report.trials_file}: {len(report.trials)} trial(s), {ok} measured.", markup=False)
    if report.trials:
        table, configs = _trials_table(header, report)
        console.print(table)
        for line in configs:
            console.print(line, markup=False, highlight=False)
    if report.noise is not None:
        console.print(report.noise.message, markup=False)
    if best is None:
        said = (  # a tune interrupted in its first trial had read as one whose candidates all failed
            "No trial was measured: every candidate was rejected or failed."
            if report.trials
            else "No trial finished (an interrupted tune?): the same `tune` command and --out go on."
        )
        console.print(said, markup=False)
        return
    met = "meets the SLOs" if best.meets_slo else "no config met the SLOs; this is the best goodput"
    console.print(f"chosen: trial {best.number} ({best.origin}) — goodput {best.score:.3f} req/s ({met})",
                  markup=False)  # fmt: skip
    from llmdeck.util.shellquote import join

    console.print("  " + join(best.args), markup=False)  # copy-pasteable: quoted for a shell


def _write_html(results: list[BenchResult], files: list[Path], out: Path) -> None:
    from llmdeck.bench.html.page import write_report

    size = write_report(results, [str(f) for f in files], out)
    err_console().print(
        f"[dim]HTML report written to {escape(str(out))} ({size / 1024:.0f} kB)[/]", highlight=False
    )


def write_bench_html(out_path: Path, html: Path) -> None:
    """After `llmdeck bench` (or its interruption): the page of the result file it wrote."""
    from llmdeck.bench.result_file import load_result

    _write_html([load_result(out_path)], [out_path], html)
