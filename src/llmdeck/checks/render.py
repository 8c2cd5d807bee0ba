"""The check report as a rich table (stdout) — the human view of `llmdeck check`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from llmdeck.checks.report import CheckReport

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

STYLE = {
    "pass": "[green]pass[/]",
    "warn": "[yellow]warn[/]",
    "fail": "[bold red]FAIL[/]",
    "inconclusive": "[cyan]inconclusive[/]",
    "not_applicable": "[dim]n/a[/]",
    "skipped": "[dim]skipped[/]",
}


def report_table(report: CheckReport) -> Table:
    """One row per probe: verdict, whether the client needs it, what was found, and the fix."""
    from rich.table import Table
    from rich.text import Text

    facts = report.server
    who = report.client or "any OpenAI client"
    title = f"llmdeck check {facts.base_url} — model {facts.model or '?'}"
    if facts.max_model_len:
        title += f", max_model_len {facts.max_model_len}"
    if facts.server_version:
        title += f", vLLM {facts.server_version}"
    table = Table(title=title, caption=f"required (*) = needed by {who}", show_lines=False, expand=False)
    table.add_column("probe", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("*", no_wrap=True)
    table.add_column("finding", ratio=1, min_width=30)
    for probe in report.probes:
        finding = Text(probe.summary)
        if probe.fix:
            finding.append("\nfix: ", style="bold")
            finding.append(probe.fix)
        table.add_row(probe.id, STYLE.get(probe.status, probe.status), "*" if probe.required else "", finding)
    return table


def print_report(report: CheckReport, console: Console, *, verbose: bool = False) -> None:
    """The table, a one-line verdict, and (``verbose``) every exchange behind each probe."""
    console.print(report_table(report))
    if verbose:
        for probe in report.probes:
            for ex in probe.evidence:
                console.print(
                    f"[bold]{probe.id}[/] {ex.method} {ex.path} -> {ex.status_code}", highlight=False
                )
                if ex.sent:
                    console.print(f"  sent: {ex.sent}", markup=False, highlight=False)
                if ex.received:
                    console.print(f"  got:  {ex.received}", markup=False, highlight=False)
    failed = report.failed_required
    who = report.client or "a plain OpenAI client"
    if failed:
        names = ", ".join(p.id for p in failed)
        console.print(f"[bold red]NOT READY[/] for {escape(who)}: {escape(names)} failed.", highlight=False)
    else:
        console.print(f"[bold green]READY[/] for {escape(who)}.", highlight=False)
