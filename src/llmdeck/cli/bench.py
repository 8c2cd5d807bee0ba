"""CLI group: `llmdeck bench` (serving benchmarks) and `llmdeck report` (re-render a result)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from llmdeck.cli import options
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import api_key_option, nonempty, number, positive_seconds

BENCH_HELP = """Benchmark a server the way `vllm bench serve` does, plus server/host state and a verdict.

TARGET is a URL (http://127.0.0.1:8000) or a server name from `llmdeck status`.

Besides the table, each scenario prints the server's /metrics over the run (queue, KV cache,
prefix-cache hits, token rates, and vLLM's own mean TTFT and ITL from its histograms, with what
the client adds on top) and the host's memory. The table's title says how long the server had been
up: in one H200 run a fresh vLLM's own TTFT at 1 req/s fell from 105 to 72 ms over its first ~20
minutes of traffic (benchmarks/README.md), so compare runs on servers of similar age, or warm up.

Examples:

  llmdeck bench mysrv --suite seeds                 # the seeds' scenarios (skips what exceeds max_model_len)

  llmdeck bench http://127.0.0.1:8000 --input-len 2048 --output-len 512 --num-prompts 30 --request-rate 3

  llmdeck bench mysrv --max-concurrency 1,4,16 --num-prompts 64   # a concurrency sweep

  llmdeck bench mysrv --suite agent --slo ttft_p99=2s --out agent.json

  llmdeck bench mysrv --workload agent-sessions --prefix-len 4096 --num-turns 4 --max-concurrency 16
      # sessions that grow turn by turn behind one shared system prompt (a coding agent's traffic)

  llmdeck bench mysrv --suite seeds --html seeds.html   # also one HTML page to open or share

  llmdeck bench mysrv --suite seeds --temperature 0   # greedy, like `vllm bench serve --temperature 0`

  llmdeck bench mysrv --request-rate 1 --num-prompts 96 --repeat 3   # median and range over 3 runs

  llmdeck bench --compare http://127.0.0.1:8000 http://127.0.0.1:11434 --prefix-len 4096 --repeat 4
      # vLLM against Ollama (its OpenAI port): agent sessions, ABBA rounds, TTFT ratio, Ollama's memory

Workloads (--workload): random (exact-length prompts, as vLLM's random dataset); shared-prefix
(one system prompt of --prefix-len tokens before every request); multi-turn (chat sessions of
--num-turns turns, each turn sending the whole conversation so far: replies and a new user message
of --input-len tokens); agent-sessions (multi-turn sessions that all open with the same system
prompt of --prefix-len tokens: the prefix cache sees the shared prompt across sessions and each
session's history across its turns); jsonl (--prompts FILE).

Repeats: one run's mean TTFT moves with the server's state. On an H200 at 1 req/s, two runs of
`vllm bench serve` itself on the same 96 prompts differed by 4.3% and 6.4% (benchmarks/README.md). --repeat N
runs every scenario N times, in rounds (A1 B1, A2 B2, ...), each run with prompts of its own (so a
prefix cache cannot serve a repeat), and prints each metric's median and min-max range; compare
configurations by medians, and trust only differences larger than the range.

Sampling: like `vllm bench serve`, requests carry no temperature unless you give one, so the
server's default applies (often the model's generation_config). Numbers published with
`vllm bench serve --temperature 0` compare with `--temperature 0` here.
"""


CMP = (
    "Run one workload on two servers in alternating rounds (ABBA; --repeat rounds, at least 2) and give one "
    "result with each metric's ratio B/A; default workload agent-sessions."
)


def bench(
    ctx: typer.Context,
    target: str | None = typer.Argument(None, help="Server URL or server name (not with --compare)."),
    compare: tuple[str, str] | None = typer.Option(None, "--compare", metavar="URL_A URL_B", help=CMP),
    suite: str | None = typer.Option(None, "--suite", help="Named preset: seeds, quick, agent, smoke."),
    model: str | None = typer.Option(
        None, "--model", callback=nonempty, help="Served model name (default: the server's first)."
    ),
    tokenizer: str | None = typer.Option(
        None, "--tokenizer", help="Model folder with the tokenizer (default: the server's model folder)."
    ),
    workload: str | None = typer.Option(None, "--workload", help="What to send (default: random)."),
    prompts: Path | None = typer.Option(
        None, "--prompts", help="JSONL prompt file, 256 MiB at most (implies --workload jsonl)."
    ),
    endpoint: str = typer.Option("completions", "--endpoint", help="completions or chat (multi-turn: chat)."),
    input_len: int = typer.Option(512, "--input-len", min=1, help="Prompt tokens (shared-prefix: suffix)."),
    output_len: int = typer.Option(
        256, "--output-len", min=1, help="Output tokens per request (max_tokens)."
    ),
    num_prompts: int | None = typer.Option(None, "--num-prompts", min=1, help="Requests per scenario (20)."),
    range_ratio: float = typer.Option(
        0.0, "--range-ratio", callback=number(at_least=0, at_most=0.999), help="Length spread, like vLLM."
    ),
    prefix_len: int = typer.Option(2048, "--prefix-len", min=0, help="Shared system prompt's tokens."),
    num_turns: int = typer.Option(4, "--num-turns", min=1, help="multi-turn, agent-sessions: turns."),
    request_rate: list[str] = typer.Option(
        [], "--request-rate", help="Arrivals/s (Poisson/gamma); comma list sweeps; inf = all at once."
    ),
    max_concurrency: list[str] = typer.Option(
        [], "--max-concurrency", help="Client concurrency; comma list sweeps."
    ),
    burstiness: float = typer.Option(
        1.0, "--burstiness", callback=number(above=0), help="Gamma shape (1 = Poisson)."
    ),
    warmup: int = typer.Option(0, "--warmup", min=0, help="Warmup requests, not measured."),
    duration: float | None = typer.Option(
        None, "--duration", callback=positive_seconds, help="Stop dispatching after N seconds."
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        help="Seed for prompts and arrivals: the random workload's prompts and send times are "
        "those of `vllm bench serve --seed N`.",
    ),
    no_ignore_eos: bool = typer.Option(False, "--no-ignore-eos", help="Let the model stop early."),
    temperature: float | None = typer.Option(
        None,
        "--temperature",
        callback=number(),
        help="Sampling temperature sent with every request (default: the server's, as `vllm bench "
        "serve`; 0 = greedy, the same tokens on every run).",
    ),
    top_p: float | None = typer.Option(
        None, "--top-p", callback=number(), help="top_p sent with every request."
    ),
    top_k: int | None = typer.Option(None, "--top-k", help="top_k sent with every request (-1: off)."),
    slo: list[str] = typer.Option(
        [], "--slo", help="Verdict rule, e.g. ttft_p99=10s tpot_mean=150ms failed=0."
    ),
    goodput: list[str] = typer.Option(
        [], "--goodput", help="vLLM goodput SLOs in ms: ttft:500 tpot:50 e2el:..."
    ),
    timeout_connect: float = options.connect_timeout(10.0),
    timeout_read: float = options.read_timeout(600.0),
    timeout_total: float = options.total_timeout(
        1800.0, ": a stream still going after this fails (bounds a trickling server)"
    ),
    timeout_probe: float = options.probe_timeout(
        30.0,
        " (/v1/models, /version, /metrics): a server that accepts but never answers is reported as "
        "not answering after this",
    ),
    metrics_interval: float = typer.Option(
        1.0, "--metrics-interval", callback=positive_seconds, help="Sampling period of /metrics (s)."
    ),
    no_metrics: bool = typer.Option(False, "--no-metrics", help="Do not scrape the server's /metrics."),
    repeat: int = typer.Option(
        1,
        "--repeat",
        min=1,
        max=100,
        help="Run every scenario N times (in rounds, fresh prompts per run) and report each metric's "
        "median and range.",
    ),
    api_key: str | None = api_key_option("API key to send (default: LLMDECK_API_KEY)."),
    out: Path | None = typer.Option(
        None, "--out", help="Result JSON file (default: LLMDECK_RESULTS_DIR/bench-*.json)."
    ),
    html: Path | None = typer.Option(
        None, "--html", help="Also write the result as one self-contained HTML page (as `report --html`)."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    """Benchmark a server (TTFT/TPOT/ITL/E2EL/throughput like vllm bench serve) and give a verdict."""
    from datetime import datetime

    from llmdeck.bench.request import build_options, build_scenarios
    from llmdeck.bench.runner import resolve_target, run_bench
    from llmdeck.bench.tables import render_result
    from llmdeck.cli.bench_compare import run_compare
    from llmdeck.cli.bench_parts import counts, floats, parse_request, sampling
    from llmdeck.util.atomic import check_writable
    from llmdeck.util.redact import redact_url

    settings = get_settings(ctx)
    target, workload = _target_or_compare(target, compare, html, workload)
    key = api_key if api_key is not None else settings.api_key
    sampling(temperature, top_p, top_k)  # vLLM's own bounds, as exit 2 before anything runs
    rates = floats(request_rate, "--request-rate") or [None]
    concs = counts(max_concurrency, "--max-concurrency") or [None]
    fields = {
        "target": target, "suite": suite, "model": model, "tokenizer": tokenizer, "workload": workload,
        "prompts": prompts, "endpoint": endpoint, "input_len": input_len, "output_len": output_len,
        "num_prompts": num_prompts, "range_ratio": range_ratio, "prefix_len": prefix_len,
        "num_turns": num_turns, "request_rates": rates, "max_concurrencies": concs,
        "burstiness": burstiness, "warmup": warmup, "duration_s": duration, "seed": seed,
        "ignore_eos": not no_ignore_eos, "temperature": temperature, "top_p": top_p, "top_k": top_k,
        "slo": slo, "goodput": goodput, "metrics_interval_s": metrics_interval,
        "scrape_metrics": not no_metrics, "repeat": repeat, "out": out, "html": html,
        "timeouts": {"connect": timeout_connect, "read": timeout_read, "total": timeout_total,
                     "probe": timeout_probe},
    }  # fmt: skip
    req = parse_request(fields)
    if compare:
        return run_compare(
            settings, req, compare, model=model, tokenizer=tokenizer, api_key=key, json_out=json_out
        )
    scenarios = build_scenarios(req)
    if html is not None:
        from llmdeck.bench.html.page import check_html_path

        check_html_path(html)
    tgt = resolve_target(target, settings, model=model, tokenizer=tokenizer)
    out_path = out or Path(settings.results_dir) / f"bench-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    check_writable(out_path)
    options = build_options(req, out_path=out_path, api_key=key, lock_dir=settings.locks_dir)
    console = err_console()
    console.print(
        f"[dim]benchmarking {escape(redact_url(tgt.base_url))}; result file: {escape(str(out_path))}; "
        f"asking /v1/models (up to {timeout_probe:g} s) …[/]",
        highlight=False,
    )
    result = _measure(
        lambda progress: run_bench(tgt, scenarios, options, progress=progress, suite=suite),
        out_path,
        html,
        console,
    )
    if json_out:
        print_json(result)
    else:
        render_result(result, out_console())
        console.print(f"[dim]result: {escape(str(out_path))}[/]", highlight=False)
    _html_after(out_path, html, console)
    _fail_if_failed(result, out_path)


def _target_or_compare(
    target: str | None, compare: tuple[str, str] | None, html: Path | None, workload: str | None
) -> tuple[str, str]:
    """(TARGET or --compare's two URLs as "A B", the workload: agent-sessions by default with
    --compare, else random); exactly one of TARGET and --compare."""
    from llmdeck.errors import UsageError

    if compare and compare[1].startswith("-"):  # one server given: click took the next option as the second
        raise UsageError(
            f"--compare takes two servers (URL_A URL_B), but after {compare[0]!r} came the option "
            f"{compare[1]!r}.",
            hint="Name both, e.g. llmdeck bench --compare http://127.0.0.1:8000 http://127.0.0.1:11434",
        )
    if compare and target is not None:
        raise UsageError(
            f"Give TARGET ({target!r}) or --compare URL_A URL_B, not both.",
            hint="llmdeck bench --compare http://127.0.0.1:8000 http://127.0.0.1:11434",
        )
    if compare:
        if html is not None:
            raise UsageError("--html is not made for --compare yet.", hint="Use --json or the table.")
        return f"{compare[0]} {compare[1]}", workload or "agent-sessions"
    if target is None or not target.strip():  # '' had meant the default server, in silence
        raise UsageError(
            "No server to bench: give TARGET or --compare URL_A URL_B.", hint="llmdeck bench --help"
        )
    return target, workload or "random"


def _fail_if_failed(result: Any, out_path: Path) -> None:
    """Exit 1 when nothing was measured (aborted, every scenario skipped, every request failed)."""
    from llmdeck.bench.outcome import run_failure

    error = run_failure(result, out_path)
    if error is not None:
        raise error


def _html_after(out_path: Path, html: Path | None, console: Any, *, interrupted: bool = False) -> None:
    """--html: the page of the result file the run wrote (a partial one after Ctrl-C, if any; then a
    failure to write it is reported and the interruption still ends the command)."""
    if html is None:
        return
    if not out_path.is_file():
        console.print("[yellow]no result file was written, so no HTML report[/]", highlight=False)
        return
    from llmdeck.cli.report import write_bench_html
    from llmdeck.errors import LlmdeckError

    try:
        write_bench_html(out_path, html)
    except LlmdeckError as exc:
        if not interrupted:
            raise
        console.print(f"[yellow]no HTML report: {escape(exc.render())}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.command("bench", help=BENCH_HELP, no_args_is_help=True)(bench)
    from llmdeck.cli.report import report

    app.command("report", no_args_is_help=True)(report)


def _measure(run: Any, out_path: Path, html: Path | None, console: Any) -> Any:
    """``run(progress)`` with the live progress; after Ctrl-C, the partial result's page and the word
    of where it is (or that an earlier result at --out was left as it was)."""
    from llmdeck.cli.bench_parts import RichProgress
    from llmdeck.util.localfile import file_stamp

    before = file_stamp(out_path)
    try:
        with RichProgress(console) as progress:
            return run(progress)
    except KeyboardInterrupt:
        from llmdeck.bench.outcome import interrupted_error

        written = file_stamp(out_path) != before
        if written:
            _html_after(out_path, html, console, interrupted=True)
        raise interrupted_error(out_path, written) from None
