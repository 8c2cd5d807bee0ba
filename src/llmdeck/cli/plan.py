"""CLI group: plan (with models and recommend from cli/catalog.py) — will it fit, which flags are wrong,
what to run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmdeck.cli.catalog import models_cmd, recommend_cmd
from llmdeck.cli.output import JSON_OPTION, err_console, esc, get_settings, out_console, print_json
from llmdeck.cli.validate import ForwardingCommand, nonempty, number
from llmdeck.cli.validate import host as host_check

MAX_CONCURRENCY = 1_000_000
"""The most --concurrency a plan takes: far above any server's max_num_seqs (a 20-digit value had been
planned and printed as asked for, exit 0).
"""
MAX_CONTEXT = 1 << 40  # plan.flags.MAX_FLAG_INT: beyond it the error had named --max-model-len, not --context

PLAN_HELP = """Plan a vLLM server before starting it: memory, KV tokens, concurrency, flag lint, commands.

MODEL is a catalog name (llmdeck models), a Hugging Face repo id, a local model folder or its
config.json. vLLM flags go after `--`. Exit 1 when the lint finds errors (the plan is still
printed), exit 2 for an unknown model, a broken config.json or a context beyond memory (with
--json, a JSON error object on stdout). Rules bound to vLLM versions apply to --vllm-version (or
the image's version); for an unknown version (`latest`) their errors become warnings. Each vLLM
flag is checked against the releases that take it (0.22-0.34): a misspelt one is an error naming the
nearest spelling (whatever the version), a name unlike any a warning for an unknown version (a newer
vLLM may have it), an abbreviation is read as the whole flag, as vLLM's parser reads it.

Examples:

  llmdeck plan Qwen3.6-35B-A3B-FP8 --machine dgx-spark --context 131072 -- --kv-cache-dtype fp8

  llmdeck plan gpt-oss-120b --machine dgx-spark --context 131072 --vllm-version 0.22.0

  llmdeck plan gpt-oss-120b --machine dgx-spark --python ~/vllm/.venv/bin/python   # that venv's vLLM

  llmdeck plan ./Qwen3-8B-YaRN/config.json --machine h200 --context 131072

  llmdeck plan Qwen3-30B-A3B --machine dgx-spark -- -q fp8   # bf16 weights quantized while loading

  llmdeck plan Qwen3-0.6B --machine h200 --vllm-version 0.32.0 -- --max-model-length 4096  # misspelt

  llmdeck plan Qwen3-30B-A3B --machine dgx-spark --nodes 2 -- --tensor-parallel-size 2 \\
      --distributed-executor-backend ray        # two boxes: per-GPU weights, KV, lint
"""


def _gib(x: float) -> str:
    return f"{x:,.2f} GiB"


def _group_rows(t: Any, plan: Any) -> None:
    """The KV-cache groups row, and for a hybrid model the mamba state row."""
    mem, f, lay = plan.memory, plan.facts, plan.memory.layout
    kinds: dict[str, int] = {}
    for g in lay.groups:
        key = g.kind + (f" (window {g.window})" if g.window else "")
        kinds[key] = kinds.get(key, 0) + 1
    windowed = any(g.window and g.kind in ("sliding", "chunked") for g in lay.groups)
    held = f"; a window holds {lay.in_flight_tokens:,} tokens in flight besides" if windowed else ""
    t.add_row(
        "KV-cache groups",
        f"{len(lay.groups)} × {lay.group_size} layers",
        ", ".join(f"{n} {k}" for k, n in kinds.items()) + held,
    )
    if f.is_hybrid:
        t.add_row(
            "mamba state / request",
            f"{lay.mamba_state_bytes_per_request / 2**20:,.1f} MiB",
            f"{f.linear_attention_layers} linear-attention layers; cache mode {mem.mamba_cache_mode}",
        )


def _memory_table(plan: Any) -> Any:
    from rich.table import Table

    mem, f = plan.memory, plan.facts
    t = Table(title="Memory plan", show_header=True, header_style="bold")
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_column("how")
    t.add_row("device memory", _gib(mem.total_gib), plan.machine.source)
    t.add_row("requested", _gib(mem.requested_gib), f"--gpu-memory-utilization {mem.gpu_memory_utilization}")
    t.add_row(
        "weights",
        _gib(mem.weights_gib),
        "safetensors index"
        if f.checkpoint_bytes
        else (f"params × {f.quantization.scheme} / {f.dtype}" if f.quantization else "params × dtype"),
    )
    o = mem.overhead
    t.add_row(
        "non-weight overhead",
        _gib(o.total_gib),
        f"non-torch {o.non_torch_gib:.2f} + the larger of activations {o.activation_gib:.2f} and sampler "
        f"{o.sampler_gib:.2f} ({o.model_runner} model runner) + CUDA graphs {o.cuda_graph_gib:.2f}",
    )
    t.add_row("available KV cache", _gib(mem.available_kv_gib), mem.kv_source)
    lay = mem.layout
    t.add_row(
        "KV per token",
        f"{lay.kv_bytes_per_token / 1024:,.1f} KiB",
        f"{f.attention_layers} attention layers"
        + (f" (MLA latent {f.kv_head_size})" if f.use_mla else "")
        + f", kv dtype {lay.kv_cache_dtype} ({lay.kv_dtype_bytes} B)",
    )
    _group_rows(t, plan)
    t.add_row("block size", f"{lay.block_size}", lay.block_size_how)
    t.add_row(
        "KV blocks", f"{mem.capacity.num_blocks:,}", f"{lay.bytes_per_block / 2**20:,.2f} MiB per block"
    )
    t.add_row("GPU KV cache size", f"{mem.capacity.kv_cache_tokens:,} tokens", "as vLLM prints it")
    t.add_row(
        f"max concurrency @ {mem.max_model_len:,}",
        f"{mem.capacity.max_concurrency:.2f}x",
        f"{mem.capacity.blocks_per_request} blocks per request",
    )
    t.add_row(
        "scheduler",
        f"{mem.max_num_seqs} seqs / {mem.max_num_batched_tokens} tokens",
        "max_num_seqs / batched",
    )
    return t


def _print_plan(plan: Any) -> None:
    from llmdeck.engines.secrets import split_secrets
    from llmdeck.plan.argv import shell_join
    from llmdeck.util.redact import redact_argv

    con = out_console()
    f = plan.facts
    quant = f", {f.quantization.method}" if f.quantization else ""
    quant += " quantized while loading" if f.quantization and f.quantization.online else ""
    con.print(  # names and config values are data: escaped, never markup
        f"[bold]{esc(plan.model.name)}[/] ({esc(f'{f.architecture}, {f.kind}, {f.dtype}{quant}')}) on "
        f"[bold]{esc(plan.machine.name)}[/] — {esc(plan.machine.description)}",
        highlight=False,
    )
    source = f"config: {plan.model.config_source}; target vLLM: {plan.target_vllm or 'recent'}"
    con.print(f"{source} ({plan.target_vllm_source})", highlight=False, style="dim", markup=False)
    con.print(
        f"longest context vLLM allows: {f.derived_max_len:,} ({f.derived_max_len_how})"
        + (
            f"; library defaults for {', '.join(f.defaults_used)} from {f.defaults_source}"
            if f.defaults_used
            else ""
        ),
        highlight=False,
        style="dim",
        markup=False,
    )
    t = _memory_table(plan)
    con.print(t)
    if plan.memory.parallel is not None:
        from llmdeck.cli.plan_parallel import parallel_table

        con.print(parallel_table(plan.memory.parallel))
    if plan.findings:
        con.print("[bold]Lint[/]")
        colors = {"error": "red", "warning": "yellow", "info": "cyan"}
        for fd in plan.findings:
            con.print(
                f"[{colors[fd.severity]}]{fd.severity:7}[/] [bold]{esc(fd.rule)}[/]: {esc(fd.message)}",
                highlight=False,
            )
            if fd.fix:
                con.print(f"         fix: {fd.fix}", highlight=False, markup=False)
            con.print(
                f"         evidence: {'; '.join(fd.evidence)}", style="dim", highlight=False, markup=False
            )
    else:
        con.print("[green]Lint: no findings.[/]")
    con.print("[bold]docker[/]")
    con.print(shell_join(redact_argv(plan.commands["docker"])), markup=False, highlight=False)
    con.print("[bold]venv[/]")
    con.print(shell_join(redact_argv(plan.commands["vllm_serve"])), markup=False, highlight=False)
    if secrets := sorted(split_secrets(plan.spec)[1]):  # the key stays out of both lines
        them = "them" if len(secrets) > 1 else "it"
        note = f"(both commands read {', '.join(secrets)} from the environment: export {them} first)"
        con.print(note, style="dim", markup=False, highlight=False)
    for key in ("cluster_up", "up_on_cluster"):  # --nodes > 1
        if key in plan.commands:
            con.print(f"[bold]{key.replace('_', ' ')}[/]")
            con.print(shell_join(redact_argv(plan.commands[key])), markup=False, highlight=False)


def plan_cmd(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Catalog name, HF repo id, or local model folder."),
    machine: str = typer.Option("auto", "--machine", help="dgx-spark | h200 | auto (read this machine)."),
    context: int | None = typer.Option(
        None, "--context", min=1, max=MAX_CONTEXT, help="--max-model-len (tokens)."
    ),
    concurrency: int = typer.Option(
        1, "--concurrency", min=1, max=MAX_CONCURRENCY, help="Full-context requests to hold."
    ),
    gpu_memory_utilization: float | None = typer.Option(
        None,
        "--gpu-memory-utilization",
        callback=number(at_least=0.01, at_most=1.0),
        help="Fraction of device memory for vLLM.",
    ),
    kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="auto | fp8"),
    kv_cache_memory_gib: float | None = typer.Option(
        None,
        "--kv-cache-memory-gib",
        callback=number(at_least=0.001, at_most=1e6),
        help="Plan from a known KV budget (skips the overhead model).",
    ),
    engine: str | None = typer.Option(
        None, "--engine", callback=nonempty, help="docker | venv (default: docker; venv with --python)"
    ),
    image: str | None = typer.Option(
        None, "--image", callback=nonempty, help="Docker image (default vllm/vllm-openai:latest)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", callback=host_check, help="Address the server binds to."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Server port."),
    name: str = typer.Option("default", "--name", help="Server name (for llmdeck up)."),
    workload: str = typer.Option("agent", "--workload", help="agent | multi-user | long-context"),
    vllm_version: str | None = typer.Option(None, "--vllm-version", help="vLLM version of the venv/image."),
    python: str | None = typer.Option(
        None,
        "--python",
        callback=nonempty,
        help="A venv's Python: plan for the vLLM installed there (implies --engine venv).",
    ),
    nodes: int = typer.Option(
        1, "--nodes", min=1, max=1024, help="Machines the server spans (Ray; TP x PP = GPUs)."
    ),
    gpus_per_node: int = typer.Option(
        1, "--gpus-per-node", min=1, max=64, help="GPUs each machine gives the server."
    ),
    spec_out: Path | None = typer.Option(
        None, "--spec-out", help="Write the LaunchSpec JSON for `llmdeck up`."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    values = {k: v for k, v in locals().items() if k not in {"ctx", "spec_out", "as_json"}}
    _plan(ctx, values, spec_out, as_json)


def _check_choices(engine: str, workload: str, kv_cache_dtype: str | None) -> None:
    from llmdeck.engines.base import PLAN_ENGINES
    from llmdeck.errors import UsageError

    if engine not in PLAN_ENGINES:
        raise UsageError(f"--engine {engine!r} is not known.", hint="Use --engine docker or --engine venv.")
    if workload not in {"agent", "multi-user", "long-context"}:
        raise UsageError(
            f"--workload {workload!r} is not known.", hint="Use agent, multi-user or long-context."
        )
    kv_dtypes = {"auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16"}
    if kv_cache_dtype is not None and kv_cache_dtype not in kv_dtypes:
        raise UsageError(f"--kv-cache-dtype {kv_cache_dtype!r} is not known.", hint="Use auto or fp8.")


def _check_name_and_version(name: str, vllm_version: str | None) -> None:
    """--name follows the server-name rule (as `up --name`); --vllm-version must read as a version."""
    from llmdeck.plan.versions import check_version_option
    from llmdeck.util.names import validate_server_name

    validate_server_name(name)
    check_version_option(vllm_version)


def _venv_version(python: str, engine: str, given: str | None) -> dict[str, Any]:
    """--python: the vLLM version installed in that venv (package metadata), or why there is none."""
    from llmdeck.engines import get as get_engine
    from llmdeck.errors import UsageError
    from llmdeck.runtime.preflight.vllm_version import probe_venv_vllm

    if get_engine(engine).containerized or given:
        raise UsageError(
            "--python reads the vLLM of a venv; it goes with neither --engine docker nor --vllm-version.",
            hint="Give --python PATH alone (it implies --engine venv), or --vllm-version for an image.",
        )
    version, why = probe_venv_vllm(python)
    if not version:
        raise UsageError(
            f"--python {python!r} has no vLLM to plan for: {why}.",
            hint="Give the Python of the venv vLLM is installed in (…/bin/python), or --vllm-version.",
        )
    where = str(Path(python).expanduser().absolute())  # for the spec: `up --spec` may run elsewhere
    return {
        "vllm_version": version,
        "vllm_version_source": f"the vLLM installed for {where}",
        "python": where,
    }


def _plan_request(values: dict[str, Any], vllm_args: list[str]) -> Any:
    from pydantic import ValidationError

    from llmdeck.errors import UsageError
    from llmdeck.plan.planner import PlanRequest

    try:
        return PlanRequest(**values, vllm_args=vllm_args)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(
            f"Invalid option {first['loc'][0]}: {first['msg']}.", hint="See llmdeck plan --help."
        ) from exc


def _plan(ctx: typer.Context, values: dict[str, Any], spec_out: Path | None, as_json: bool) -> None:
    """The body of `llmdeck plan`: check the choices, plan, print (or fail with the plan in JSON)."""
    from llmdeck.plan.planner import make_plan

    settings = get_settings(ctx)
    values["engine"] = values["engine"] or ("venv" if values["python"] else "docker")
    _check_choices(values["engine"], values["workload"], values["kv_cache_dtype"])
    _check_name_and_version(values["name"], values["vllm_version"])
    if values["python"]:
        values |= _venv_version(values["python"], values["engine"], values["vllm_version"])
    values["docker_log_driver"] = _docker_log_driver()
    req = _plan_request(values, list(ctx.args))
    plan = make_plan(
        req,
        catalog_paths=list(settings.catalog_paths),
        models_dir=settings.models_dir,
        raise_if_impossible=False,
    )
    _emit_plan(plan, spec_out, as_json)


def _docker_log_driver() -> str | None:
    """This host's docker log driver, which decides the log options of the printed docker command as
    it decides those `up --engine docker` passes; None (docker's default) when no daemon answers soon."""
    from llmdeck.engines.docker import DockerCLI
    from llmdeck.errors import LlmdeckError

    try:
        return DockerCLI().log_driver(timeout_s=5.0)
    except LlmdeckError:
        return None


def _emit_plan(plan: Any, spec_out: Path | None, as_json: bool) -> None:
    from llmdeck.engines.spec import write_spec_file
    from llmdeck.errors import CheckFailedError
    from llmdeck.util.shellquote import quote

    fit_error = plan.fit_error()
    if fit_error is not None:
        if as_json:  # scripts read stdout: the error as a JSON object, with the plan that failed
            print_json(
                {
                    "schema_version": 1,
                    "error": {"kind": "does-not-fit", "exit_code": 2, "message": fit_error.render()},
                    "plan": plan,
                }
            )
        raise fit_error
    if spec_out is not None:
        left_out = write_spec_file(spec_out, plan.spec)
        if left_out:
            err_console().print(
                f"note: {', '.join(left_out)} left out of {spec_out} (a spec file holds no secrets); "
                f"pass it when starting: {left_out[0]}=... llmdeck up --spec {quote(str(spec_out))}",
                markup=False,
                highlight=False,
            )
    if as_json:
        print_json(plan)
    else:
        _print_plan(plan)
        if spec_out is not None:
            out_console().print(
                f"launch spec written to {spec_out} (llmdeck up --spec {quote(str(spec_out))})", markup=False
            )
    if plan.errors:
        raise CheckFailedError(
            f"The plan has {len(plan.errors)} lint error(s): "
            + "; ".join(f"{f.rule} (fix: {f.fix})" for f in plan.errors),
            hint="Apply the fixes above and plan again.",
        )


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    app.command("plan", help=PLAN_HELP, cls=ForwardingCommand, context_settings={"allow_extra_args": True})(
        plan_cmd
    )
    app.command("models")(models_cmd)
    app.command("recommend")(recommend_cmd)
