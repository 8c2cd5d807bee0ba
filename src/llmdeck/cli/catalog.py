"""`llmdeck models` and `llmdeck recommend`: what the catalogs hold, and which model suits a machine."""

from __future__ import annotations

import typer

from llmdeck.cli.output import JSON_OPTION, esc, get_settings, out_console, print_json


def models_cmd(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the models in the catalogs (bundled + LLMDECK_CATALOG_PATHS).

    Examples:

      llmdeck models

      llmdeck models --json
    """
    from rich.table import Table
    from rich.text import Text

    from llmdeck.catalog.entries import load_catalog

    catalog = load_catalog(list(get_settings(ctx).catalog_paths))
    if as_json:
        print_json({"schema_version": 1, "catalog_files": catalog.files, "models": catalog.models})
        return
    t = Table(show_header=True, header_style="bold")
    for col in (
        "name",
        "repo",
        "GB",
        "architecture",
        "kind",
        "quant",
        "tool parser",
        "reasoning",
        "min vLLM",
    ):
        t.add_column(col)
    for e in catalog.models:
        arch = catalog.min_vllm_for(e.architecture)
        cells = (
            e.name,
            e.repo_id,
            f"{e.size_on_disk_gb:g}" if e.size_on_disk_gb else "?",
            (e.architecture or "?") + ("" if e.architecture_verified else " (unverified)"),
            e.kind or "",
            e.quantization or "bf16",
            e.tool_call_parser or "-",
            e.reasoning_parser or "-",
            arch.min_vllm if arch else "?",
        )
        t.add_row(*(Text(c) for c in cells))  # a user catalog's strings are data, never markup
    out_console().print(t)


def recommend_cmd(
    ctx: typer.Context,
    machine: str = typer.Option("auto", "--machine", help="dgx-spark | h200 | auto"),
    workload: str = typer.Option("agent", "--workload", help="agent | multi-user | long-context"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Pick a model for a machine and a workload, and explain why (seed 004 §1 and §10).

    Examples:

      llmdeck recommend --machine dgx-spark --workload agent

      llmdeck recommend --machine h200 --workload multi-user --json
    """
    from llmdeck.plan.recommend import recommend

    settings = get_settings(ctx)
    rec = recommend(machine, workload, catalog_paths=list(settings.catalog_paths))
    if as_json:
        print_json(rec)
        return
    con = out_console()
    con.print(
        f"[bold]{esc(rec.pick)}[/] for {esc(rec.workload)} on {esc(rec.machine)} at {rec.context:,} tokens",
        highlight=False,
    )
    con.print(rec.why, highlight=False, markup=False)
    if rec.memory_summary:
        con.print(rec.memory_summary, highlight=False, markup=False)
    if rec.alternatives:
        con.print("alternatives: " + ", ".join(rec.alternatives), highlight=False, markup=False)
    con.print(f"next: {rec.next_command}", highlight=False, markup=False)
