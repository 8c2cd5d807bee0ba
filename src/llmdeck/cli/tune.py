"""`llmdeck tune`: search the vLLM flags that serve a workload best under the user's SLOs, one real
server start per trial (the library: llmdeck.tune)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from llmdeck.cli import options, validate
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import ForwardingCommand, nonempty

TUNE_HELP = """Find the vLLM flags that serve this workload best under your SLOs, on the real engine.

Each trial is planned first (a config plan refuses — memory, KV tokens, the hybrid block-size rule —
is recorded as rejected and never started), then started through the runtime service, warmed up,
benched at the workload's target load, scored by goodput (requests/s within the per-request SLOs, as
`vllm bench serve --goodput`), and stopped before the next starts. vLLM's defaults run first as the
baseline; then your --candidate configs; then optuna's TPE sampler (first proposing what the workload
argues for: prefix caching where vLLM's defaults leave it off and prompts repeat) searches --max-num-seqs,
--max-num-batched-tokens, --gpu-memory-utilization (at most 0.85 on GB10), --kv-cache-dtype, prefix
caching, CUDA-graph sizes and async scheduling (the CPU engine: seqs, batched tokens, prefix caching,
VLLM_CPU_KVCACHE_SPACE), within --trials starts and the --budget; --confirm N then runs the N best
configs and the defaults once more each, and the winner is the best median. Adaptive repeats
(--max-repeats N, 3; 1 turns them off): while the leader's per-run goodputs overlap the runner-up's,
the defaults' or a --candidate's (their min..max ranges, 3 runs each at least), both are measured again
in alternating order until they separate, N trials each or the budget; a tie that never separates is
reported "within noise" — no winner — and spec.json gets the config with the fewest flags set (then
the higher median). --find-max-rate: each trial steps the request rate (--rate-start, doubling, then
bisecting, at most --rate-steps bench runs, no concurrency cap) and scores the highest rate that
meets the SLOs (its goodput). --max-model-len is set to what the workload needs. Speculative
decoding is not searched: on random weights nothing is accepted for real.

Workloads (-w): agent = a coding agent's traffic: chat sessions of --num-turns turns (4) whose
context grows turn by turn, every one opening with the same system prompt of --prefix-len tokens
(4096), --concurrency in flight (16): the prefix cache sees the shared prompt and each session's
history; multi-user = such sessions without the shared prompt; long-context = few long prompts.

The folder (--out) gets spec.json (the winner: `llmdeck up --spec DIR/spec.json`), trials.jsonl
(every trial, appended as it ends, with the environment in its header) and report.html. An interrupted
tune (Ctrl-C, kill) resumes from trials.jsonl when run again with the same --out; a folder holding
another tune's trials is refused. Exit 1 when no config met the SLOs (the best goodput is still
written).

Examples:

  llmdeck tune Qwen3.6-35B-A3B-FP8 --machine dgx-spark -w agent --slo ttft_p99=2s,tpot_p99=100ms

  llmdeck tune --spec spec.json --workload multi-user --slo ttft_p99=2s --budget 45m --out tune-mu

  llmdeck tune ./tiny --engine cpu -w agent --slo ttft_p99=30s --trials 3 -c 2 --num-prompts 6

  llmdeck tune MODEL -w agent --slo tpot_p99=100ms --candidate '--max-num-seqs 8' --repeat 2 --max-repeats 4

  llmdeck tune MODEL -w multi-user --slo ttft_p99=2s,tpot_p99=100ms --find-max-rate --rate-start 0.5

  llmdeck tune MODEL --prompts my-agent.jsonl --slo e2el_p99=30s --out tune-mine --resume
"""


RATE_START = typer.Option(
    None,
    "--rate-start",
    help="--find-max-rate: the first rate (1/s).",
    callback=validate.number(above=0, at_most=1e6),
)
RATE_STEPS = typer.Option(
    None,
    "--rate-steps",
    help="--find-max-rate: bench runs a trial (8).",
    callback=validate.number(at_least=2, at_most=30),
)


def register(app: typer.Typer) -> None:
    app.command("tune", help=TUNE_HELP, cls=ForwardingCommand, context_settings={"allow_extra_args": True})(
        tune_cmd
    )


def tune_cmd(
    ctx: typer.Context,
    model: str = typer.Argument(None, help="Model folder or catalog name (or --spec)."),
    spec_file: Path = typer.Option(
        None, "--spec", help="A launch spec (from `plan --spec-out`) to start from."
    ),
    workload: str = typer.Option(None, "--workload", "-w", help="agent | multi-user | long-context."),
    prompts: Path = typer.Option(None, "--prompts", help="Your own prompts (JSONL), instead of --workload."),
    slo: str = typer.Option(None, "--slo", help="SLO targets, e.g. ttft_p99=2s,tpot_p99=100ms."),
    budget: str = typer.Option("45m", "--budget", help="Wall-clock budget (45m, 1h30m, 600s)."),
    trials: int = typer.Option(
        20, "--trials", min=1, max=500, help="Most server starts (rejections are free)."
    ),
    out: Path = typer.Option(Path("tune"), "--out", help="Folder for spec.json, trials.jsonl, report.html."),
    resume: bool = typer.Option(False, "--resume", help="Require a trials file in --out to resume from."),
    engine: str = typer.Option(
        None, "--engine", help="cpu | venv | docker (default: venv with a GPU, else cpu)."
    ),
    machine: str = typer.Option("auto", "--machine", help="Plan's machine: auto | dgx-spark | h200."),
    python: str = typer.Option(None, "--python", help="venv engine: the Python that has vLLM."),
    image: str = typer.Option(None, "--image", callback=nonempty, help="docker engine: the image."),
    concurrency: int = typer.Option(None, "--concurrency", "-c", min=1, help="Requests in flight (load)."),
    input_len: int = typer.Option(None, "--input-len", min=1, help="Prompt tokens per request/turn."),
    output_len: int = typer.Option(None, "--output-len", min=1, help="Output tokens per request."),
    prefix_len: int = typer.Option(None, "--prefix-len", min=0, help="agent: shared system-prompt tokens."),
    num_turns: int = typer.Option(None, "--num-turns", min=1, help="agent, multi-user: turns per session."),
    num_prompts: int = typer.Option(None, "--num-prompts", min=1, help="Requests measured per trial."),
    warmup: int = typer.Option(None, "--warmup", min=0, help="Warmup requests per trial (not measured)."),
    repeat: int = typer.Option(None, "--repeat", min=1, max=20, help="Runs per trial (median goodput)."),
    candidate: list[str] = typer.Option([], "--candidate", help="A config to measure too (vLLM flags)."),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="Measure vLLM's defaults first."),
    confirm: int = typer.Option(
        0, "--confirm", min=0, max=10, help="Then run the N best configs and the defaults once more."
    ),
    max_repeats: int = typer.Option(
        3,
        "--max-repeats",
        min=1,
        max=20,
        help="Re-measure the leader and an overlapping contender up to N trials each (1: off).",
    ),
    find_max_rate: bool = typer.Option(
        False, "--find-max-rate", help="Each trial: the highest request rate that meets the SLOs."
    ),
    rate_start: float = RATE_START,
    rate_steps: int = RATE_STEPS,
    seed: int = typer.Option(0, "--seed", help="Prompts and sampler seed."),
    vllm_version: str = typer.Option(None, "--vllm-version", help="The vLLM the rules are checked for."),
    deep_gemm: str = typer.Option(
        "relax",
        "--deep-gemm-warmup",
        help="GPU: VLLM_DEEP_GEMM_WARMUP per start (relax | skip | full); off: VLLM_USE_DEEP_GEMM=0.",
    ),
    ready_timeout: float = options.ready_timeout(1800.0, " (each trial's start)", also_timeout=False),
    as_json: bool = JSON_OPTION,
) -> None:
    values = dict(locals())
    _tune(values.pop("ctx"), values)


# the load options (LoadShape's fields), passed on as given (None = the workload's default)
_LOAD_KEYS: tuple[str, ...] = ("concurrency", "input_len", "output_len", "prefix_len", "num_turns")
_LOAD_KEYS += ("num_prompts", "warmup", "repeat")


def _tune(ctx: typer.Context, v: dict[str, Any]) -> None:
    from llmdeck.tune.request import make_request
    from llmdeck.tune.search import run_tune

    settings = get_settings(ctx)
    req = make_request(
        settings,
        model=v["model"],
        spec_file=v["spec_file"],
        workload=v["workload"],
        prompts=v["prompts"],
        slo=v["slo"],
        budget=v["budget"],
        trials=v["trials"],
        extra_args=list(ctx.args),
        spec_overrides={"engine": v["engine"], "python": v["python"], "image": v["image"]},
        load={k: v[k] for k in _LOAD_KEYS},
        options={
            "machine": v["machine"],
            "candidates": v["candidate"],
            "seed": v["seed"],
            "vllm_version": v["vllm_version"],
            "deep_gemm_warmup": v["deep_gemm"],
            "ready_timeout_s": v["ready_timeout"],
            "confirm": v["confirm"],
            "max_repeats": v["max_repeats"],
            "rate_sweep": _rate_sweep(v),
        },
    )
    # SIGTERM and SIGHUP arrive as an interrupt (cli/app.py): the running trial's server is stopped
    result = run_tune(req, settings, v["out"], render_event, resume=v["resume"], baseline=v["baseline"])
    _print(result, v["as_json"])
    if result.best is None or not result.best.meets_slo:
        raise typer.Exit(1)


def render_event(event: Any) -> None:
    console = err_console()
    style = {"rejected": "yellow", "failed": "red", "result": "green", "trial": "bold", "budget": "yellow"}
    color = style.get(event.kind)
    text = escape(event.message)
    if event.kind == "service":
        text = f"  [dim]{text}[/]"
    elif color:
        text = f"[{color}]{text}[/]"
    console.print(text, highlight=False, soft_wrap=True)


def _print(result: Any, as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    console = out_console()
    best = result.best
    console.print(
        f"{len(result.trials)} trial(s) ({result.resumed} resumed, {result.ran} run now); "
        f"stopped by {result.stopped_by}.",
        markup=False,
    )
    noise = result.noise
    if noise is not None:
        console.print(noise.message, markup=False)
    if best is None:
        console.print("No trial was measured: every candidate was rejected or failed.", markup=False)
    else:
        met = "meets the SLOs" if best.meets_slo else "no config met the SLOs; this is the best goodput"
        runs = result.best_runs
        many = f", runs {', '.join(f'{g:.3f}' for g in runs)}" if len(runs) > 1 else ""
        label = "chosen (within noise, no winner)" if noise is not None and noise.within_noise else "best"
        rate = f", max rate {best.metrics.max_rate:g} req/s" if best.metrics and best.metrics.max_rate else ""
        console.print(
            f"{label}: trial {best.number} — goodput {best.score:.3f} req/s{rate} ({met}{many})", markup=False
        )
        from llmdeck.util.shellquote import join

        console.print("  " + join(best.args), markup=False)  # copy-pasteable: quoted for a shell
    for label, path in (
        ("spec", result.spec_file),
        ("trials", result.trials_file),
        ("report", result.report_file),
    ):
        if path:
            console.print(f"{label}: {path}", markup=False)


def _rate_sweep(v: dict[str, Any]) -> dict[str, Any] | None:
    if not v["find_max_rate"]:
        given = [
            f for f, k in (("--rate-start", "rate_start"), ("--rate-steps", "rate_steps")) if v[k] is not None
        ]
        if given:
            from llmdeck.errors import UsageError

            raise UsageError(
                f"{' and '.join(given)} only take effect with --find-max-rate.",
                hint="Add --find-max-rate (each trial then finds the highest rate that meets the SLOs), "
                "or leave them out.",
            )
        return None
    start = 1.0 if v["rate_start"] is None else v["rate_start"]
    return {"start": start, "max_steps": 8 if v["rate_steps"] is None else v["rate_steps"]}
