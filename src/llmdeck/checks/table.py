"""The check report as a rich table (stdout) — the human view of `llmdeck check`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.checks.results import CheckReport
from llmdeck.util.redact import redact_text, redact_url
from llmdeck.util.safetext import markup_data, safe_text

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
    url, model = markup_data(redact_url(facts.base_url)), markup_data(facts.model or "?")
    title = f"llmdeck check {url} — model {model}"
    if facts.max_model_len:
        title += f", max_model_len {facts.max_model_len}"
    if facts.server_version:
        title += f", vLLM {markup_data(facts.server_version)}"
    table = Table(
        title=title, caption=f"required (*) = needed by {markup_data(who)}", show_lines=False, expand=False
    )
    table.add_column("probe", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("*", no_wrap=True)
    table.add_column("finding", ratio=1, min_width=30)
    for probe in report.probes:
        finding = Text(safe_text(probe.summary))  # a Text is not markup: `[/]` in a model id is text
        if probe.fix:
            finding.append("\nfix: ", style="bold")
            finding.append(safe_text(probe.fix))
        verdict = STYLE.get(probe.status, markup_data(probe.status))
        table.add_row(markup_data(probe.id), verdict, "*" if probe.required else "", finding)
    return table


def print_report(report: CheckReport, console: Console, *, verbose: bool = False) -> None:
    """The table, a one-line verdict, and (``verbose``) every exchange behind each probe."""
    console.print(report_table(report))
    if verbose:
        for probe in report.probes:
            for ex in probe.evidence:
                line = markup_data(f"{ex.method} {ex.path} -> {ex.status_code}")
                console.print(f"[bold]{markup_data(probe.id)}[/] {line}", highlight=False)
                if ex.sent:
                    console.print(f"  sent: {redact_text(ex.sent)}", markup=False, highlight=False)
                if ex.received:
                    console.print(f"  got:  {redact_text(ex.received)}", markup=False, highlight=False)
    failed = report.failed_required
    who = report.client or "a plain OpenAI client"
    if report.only:
        who += f" (only {', '.join(report.only)} asked for)"
    if failed:
        names = ", ".join(p.id for p in failed)
        console.print(
            f"[bold red]NOT READY[/] for {markup_data(who)}: {markup_data(names)} failed.", highlight=False
        )
    elif report.incomplete is not None or report.error is not None:  # it had said READY, the check cut short
        why = report.incomplete or "the check ended before its probes ran"
        line = f"[bold yellow]NOT CHECKED[/] for {markup_data(who)}: {markup_data(why)}."
        console.print(line, highlight=False)
    else:
        console.print(f"[bold green]READY[/] for {markup_data(who)}.", highlight=False)
