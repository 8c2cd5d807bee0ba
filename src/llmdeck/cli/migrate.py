"""CLI group: `llmdeck migrate ollama` — an Ollama setup as launch specs and a gateway config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmdeck.cli.options import request_timeout
from llmdeck.cli.output import JSON_OPTION, err_console, esc, get_settings, out_console, print_json

OLLAMA_HELP = """Turn what you run on Ollama into vLLM servers behind llmdeck's gateway.

Reads Ollama's /api/tags, /api/ps and /api/show (each model's family, parameters, GGUF
quantization, num_ctx, thinking and tools capabilities, keep-alive), maps every model to its vLLM
build in llmdeck's catalog (a Q4 GGUF to the NVFP4 build on Blackwell, else AWQ or FP8; Q8 to FP8),
plans each one (memory, KV tokens, flag lint) and writes into --out: one launch spec per model
(`llmdeck up --spec`), gateway.yaml whose aliases are the Ollama names your clients already send
(`qwen3:30b-a3b`), started on demand within the memory budget, and migration.json (the whole
report). A model without a vLLM build is listed with the reason; that is no failure (exit 0).

Ollama keeps loaded models in memory until their keep-alive ends (seed 000: they took the memory
vLLM needed). The report prints the command that unloads each; --unload runs them. Nothing is
unloaded otherwise. Exit 2 for a bad --ollama URL or an --out folder that is not llmdeck's (or is,
without --force); exit 1 when Ollama does not answer or answers something that is not its API.

Examples:

  llmdeck migrate ollama --machine dgx-spark --out ~/llmdeck-migration

  llmdeck migrate ollama --ollama http://192.168.1.20:11434 --out mig --json

  llmdeck migrate ollama --out mig --force --unload     # replace an earlier migration, unload Ollama

  llmdeck gateway up --config mig/gateway.yaml --port 4000   # clients: :4000/v1, or :4000 for Ollama's API
"""


def ollama(
    ctx: typer.Context,
    url: str = typer.Option("http://127.0.0.1:11434", "--ollama", help="Ollama's URL."),
    out: Path = typer.Option(Path("llmdeck-migration"), "--out", help="Folder for specs and gateway.yaml."),
    machine: str = typer.Option("auto", "--machine", help="Machine profile for the plans: auto, h200, ..."),
    engine: str = typer.Option("docker", "--engine", help="Engine of the launch specs: docker or venv."),
    context: int | None = typer.Option(
        None, "--context", min=1, help="max_model_len for every model (default: what plan gives)."
    ),
    base_port: int = typer.Option(8001, "--base-port", min=1, max=65000, help="First server's port."),
    gateway_port: int = typer.Option(
        4000, "--gateway-port", min=1, max=65535, help="In the printed command."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an earlier migration in --out."),
    unload: bool = typer.Option(False, "--unload", help="Unload Ollama's loaded models (keep_alive 0)."),
    timeout: float = request_timeout(10.0, " Ollama"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Map Ollama's models to vLLM: launch specs and a gateway config with the Ollama names."""
    from pydantic import ValidationError

    from llmdeck.errors import UsageError
    from llmdeck.migrate.results import MigrateRequest
    from llmdeck.migrate.run import migrate_ollama

    settings = get_settings(ctx)
    try:
        req = MigrateRequest(
            ollama_url=url, out_dir=out.expanduser(), machine=machine, engine=engine, context=context,
            base_port=base_port, gateway_port=gateway_port, force=force, unload=unload, timeout_s=timeout,
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(
            f"--{str(first['loc'][0]).replace('_', '-')} {first.get('input')!r}: {first['msg']}.",
            hint="See `llmdeck migrate ollama --help`.",
        ) from exc
    from llmdeck.util.redact import redact_url

    err_console().print(f"[dim]reading Ollama at {esc(redact_url(url))} …[/]", highlight=False)
    report = migrate_ollama(req, settings)
    if as_json:
        print_json(report)
    else:
        render_report(report, out_console())


def render_report(report: Any, console: Any) -> None:
    from rich.table import Table

    t = Table(title=f"Ollama ({esc(report.ollama_url)}) -> vLLM on {esc(report.machine)}")
    for col in ("Ollama model", "vLLM build", "context", "memory", "KV tokens", "spec"):
        t.add_column(col)
    for m in report.migrated:
        t.add_row(
            esc(", ".join(m.aliases)),
            esc(f"{m.repo_id} ({m.quantization or 'bf16'})"),
            f"{m.max_model_len:,}",
            f"{m.requested_gib:.1f} GiB",
            f"{m.kv_cache_tokens:,}",
            esc(m.spec_file),
        )
    if report.migrated:
        console.print(t)
    elif not report.unmapped:
        console.print(f"Ollama at {esc(report.ollama_url)} lists no local model: nothing to migrate.")
    for m in report.migrated:
        console.print(f"[bold]{esc(m.ollama_name)}[/] — what changes:")
        for c in m.changes:
            note = f" [dim]({esc(c.note)})[/]" if c.note else ""
            console.print(f"  {esc(c.what)}: {esc(c.ollama)} -> {esc(c.vllm)}{note}")
        for e in m.lint_errors:
            console.print(f"  [red]plan error:[/] {esc(e)}")
    if report.unmapped:
        console.print("[yellow]No vLLM equivalent:[/]")
        for u in report.unmapped:
            console.print(f"  {esc(u.ollama_name)}: {esc(u.why)}")
    if report.loaded and not report.unloaded:
        console.print("[yellow]Ollama holds models in memory that vLLM will need; unload them first:[/]")
    for cmd in report.next_commands:
        console.print(f"  {esc(cmd)}")
    if report.unloaded:
        console.print(f"unloaded from Ollama: {esc(', '.join(report.unloaded))}")


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    group = typer.Typer(help="Move a setup from another server to vLLM.", no_args_is_help=True)
    group.command("ollama", help=OLLAMA_HELP)(ollama)
    app.add_typer(group, name="migrate")
