"""Terminal rendering of eval results, the task list and `eval verify` (rich tables, data on stdout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.markup import escape
from rich.table import Table

from llmdeck.evals.results import EvalResult, TaskRun
from llmdeck.evals.spec import EvalTask, suites
from llmdeck.evals.verifier import TaskVerification
from llmdeck.util.redact import redact_argv, redact_url

if TYPE_CHECKING:
    from rich.console import Console


# the server's side: its own mean TTFT per turn, prefix-cache hit rate, KV cache and queue maxima
RUN_COLUMNS = (
    "task", "verdict", "hidden tests", "turns", "tokens", "wall s",
    "server TTFT ms", "prefix hits", "KV max", "queue max",
)  # fmt: skip


def _f(v: float | None, fmt: str = "{:.0f}") -> str:
    return fmt.format(v) if v is not None else "-"


def run_row(run: TaskRun) -> list[str]:
    a, t, sm = run.agent, run.tests, run.server_metrics
    tests = f"{t.passed}/{t.total}" if t else "-"
    verdict: str = (
        "[green]pass[/]" if run.passed else ("[red]fail[/]" if run.status == "done" else run.status)
    )
    if a is not None and a.unreached is not None:  # not the model's failure: it never answered
        verdict = f"[yellow]unreachable[/] ({a.unreached.kind.replace('_', ' ')})"
    if a is not None and a.limit_hit:
        verdict += f" ({a.limit_hit})"
    ttfts = [x.server_ttft_ms for x in (a.turns if a else []) if x.server_ttft_ms is not None]
    return [
        escape(f"{run.task} #{run.repeat}"),
        verdict,
        tests,
        str(len(a.turns)) if a else "-",
        f"{a.tokens.total:,}" if a else "-",
        _f(a.wall_s) if a else "-",
        _f(sum(ttfts) / len(ttfts) if ttfts else None),
        _f(sm.prefix_cache_hit_rate_pct if sm else None, "{:.0f}%"),
        _f(sm.kv_cache_usage_max_pct if sm else None, "{:.0f}%"),
        _f(sm.waiting_max if sm else None),
    ]


def render_result(result: EvalResult, console: Console) -> None:
    t = result.target
    url = redact_url(t.base_url)  # a file edited by hand or written by an older llmdeck may hold secrets
    console.print(
        f"eval: {escape(result.client)} {escape(result.client_version or '')} on {escape(t.model)} at "
        f"{escape(url)} ({escape(t.server_version or 'version unknown')}) · {result.status}",
        highlight=False,
    )
    if t.server_args:
        flags = " ".join(redact_argv(t.server_args))
        console.print(f"[dim]server flags: {escape(flags)}[/]", highlight=False)
    split = 6  # the agent's columns, then the server's (two tables: each fits 80 columns)
    for cols, cells in (
        (RUN_COLUMNS[:split], slice(0, split)),
        (RUN_COLUMNS[:1] + RUN_COLUMNS[split:], None),
    ):
        table = Table(show_header=True, header_style="bold", box=box.SIMPLE_HEAD)
        for col in cols:
            left = col in ("task", "verdict")
            table.add_column(col, justify="left" if left else "right", no_wrap=True)
        for run in result.runs:
            row = run_row(run)
            table.add_row(*(row[cells] if cells else [row[0], *row[split:]]))
        console.print(table)
    for run in result.runs:
        if run.error:
            console.print(
                f"[yellow]{escape(run.task)} #{run.repeat}:[/] {escape(run.error)}", highlight=False
            )
    console.print(escape(result.summary.verdict), highlight=False)


def render_tasks(tasks: list[EvalTask], console: Console) -> None:
    table = Table(show_header=True, header_style="bold")
    for col in ("task", "category", "prompts", "limits (s / turns / tokens)", "description"):
        table.add_column(col)
    for task in tasks:
        lim = task.config.agent
        table.add_row(
            escape(task.name),
            escape(task.config.metadata.category),
            str(len(task.prompts)),
            f"{lim.timeout_sec:g} / {lim.max_turns} / {lim.max_tokens:,}",
            escape(task.config.metadata.description),
        )
    console.print(table)
    for name, (desc, names) in sorted(suites().items()):
        console.print(f"suite [bold]{escape(name)}[/]: {escape(', '.join(names))} — {escape(desc)}")


def render_verify(checks: list[TaskVerification], console: Console) -> None:
    table = Table(show_header=True, header_style="bold")
    for col in ("task", "reference", "wrong solution", "must fail", "verdict"):
        table.add_column(col)
    for c in checks:
        ref = f"{c.reference.passed}/{c.reference.total} pass"
        wrong = f"{c.wrong.passed}/{c.wrong.total} pass" if c.wrong else "-"
        caught = sum(1 for i in c.must_fail if c.wrong and c.wrong.outcome_of(i) not in (None, "passed"))
        verdict = "[green]ok[/]" if c.ok else "[red]" + escape("; ".join(c.problems)) + "[/]"
        table.add_row(escape(c.task), ref, wrong, f"{caught}/{len(c.must_fail)} fail", verdict)
    console.print(table)
