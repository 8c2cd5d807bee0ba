"""``llmdeck plan``: resolve a model, size it for a machine, lint the flags, render the commands."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from llmdeck import __version__
from llmdeck.catalog.entries import Catalog, CatalogEntry, load_catalog
from llmdeck.engines import get as get_engine
from llmdeck.engines.base import PlanEngine
from llmdeck.engines.docker import DEFAULT_IMAGE, split_image
from llmdeck.engines.spec import ImageName, LaunchSpec, invalid_spec
from llmdeck.errors import PlanError, UsageError
from llmdeck.plan.autofit import plan_memory_fitted
from llmdeck.plan.cudagraphs import cudagraph_settings
from llmdeck.plan.flags import SPEC_FLAGS, VllmFlags, parse_vllm_flags
from llmdeck.plan.lint import Finding, LintContext, lint
from llmdeck.plan.machine import GB10_CEILING, MachineProfile, get_machine
from llmdeck.plan.memory import DEFAULT_GPU_MEMORY_UTILIZATION, MemoryPlan, ServeSettings
from llmdeck.plan.modelinfo import ModelFacts
from llmdeck.plan.no_fit import no_fit_error
from llmdeck.plan.quant import online_quantization
from llmdeck.plan.resolve import LONE_CONFIG_MODEL, ResolvedModel, find_local_copy, resolve_model
from llmdeck.plan.runner import default_async_scheduling
from llmdeck.plan.settings import mamba_prefix_mode
from llmdeck.plan.versions import at_least, version_tuple
from llmdeck.util.hfpaths import default_hf_home, find_in_hf_cache
from llmdeck.util.units import parse_bytes

__all__ = ["Plan", "PlanRequest", "ResolvedModel", "find_in_hf_cache", "find_local_copy", "make_plan"]
__all__ += ["resolve_model"]

# 2: memory.layout.in_flight_tokens replaces layout.max_num_batched_tokens; memory.overhead.model_runner added
PLAN_SCHEMA_VERSION = 2
DEFAULT_VLLM_VERSION = "0.22.0"  # the version of the field reports (seed 004 §5) and of ../shared/gpu-lab
HYBRID_PREFIX_CACHING_DEFAULT_SINCE = "0.28.0"  # vllm PR #50991 (0.27.1 arg_utils.py:2604-2606; 0.28.0 :2650)
Workload = Literal["agent", "multi-user", "long-context"]


class PlanRequest(BaseModel):
    """What the user asked ``llmdeck plan`` for."""

    model: str
    machine: str = "auto"
    context: int | None = Field(None, gt=0)
    concurrency: int = Field(1, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    kv_cache_dtype: str | None = None
    kv_cache_memory_gib: float | None = Field(None, gt=0, le=1e6)  # 1 PiB: far above any device
    engine: PlanEngine = "docker"
    image: ImageName | None = None
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    name: str = "default"
    workload: Workload = "agent"
    vllm_version: str | None = None
    vllm_version_source: str | None = Field(None, description="where vllm_version was read (--vllm-version)")
    python: str | None = Field(None, description="venv engine: the Python that has vLLM (into the spec)")
    vllm_args: list[str] = Field(default_factory=list)
    total_gib: float | None = Field(
        None, gt=0, le=1e6, description="Override the machine's device memory total."
    )
    nodes: int = Field(1, ge=1, description="machines the server spans (Ray)")
    gpus_per_node: int = Field(1, ge=1, description="GPUs each machine gives the server")
    docker_log_driver: str | None = Field(None, description="this host's docker log driver (None: json-file)")


class Plan(BaseModel):
    """The result of ``llmdeck plan`` (``--json``)."""

    schema_version: int = PLAN_SCHEMA_VERSION
    llmdeck_version: str = __version__
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    host: dict[str, str] = Field(
        default_factory=lambda: {"platform": platform.platform(), "python": platform.python_version()}
    )
    request: PlanRequest
    model: ResolvedModel
    catalog_entry: CatalogEntry | None = None
    facts: ModelFacts
    machine: MachineProfile
    target_vllm: str | None
    target_vllm_source: str
    settings: ServeSettings
    memory: MemoryPlan
    findings: list[Finding]
    spec: LaunchSpec
    commands: dict[str, list[str]]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def fit_error(self) -> PlanError | None:
        """The PlanError (exit 2) for a model or context that does not fit, None when it fits."""
        if self.memory.fits:
            return None
        name = self.catalog_entry.name if self.catalog_entry else self.model.name
        return no_fit_error(self.memory, name)


# ---- settings -----------------------------------------------------------------------------------


def _merge_option(flags: VllmFlags, flag: str, value: str | None) -> None:
    """Put a CLI option into the vLLM flags; refuse a contradiction with the flags after `--`."""
    if value is None:
        return
    existing = flags.get(flag)
    if existing is not None and str(existing) != value:
        try:
            same = float(str(existing)) == float(value)
        except ValueError:
            same = False
        if not same:
            raise UsageError(
                f"--{flag} is given twice with different values ({value} and {existing} after `--`).",
                hint="Give it once.",
            )
    flags.set(flag, value)


def image_version(image: str | None, catalog: Catalog) -> tuple[str | None, str | None, str]:
    """(version, upper bound, source) of the vLLM inside an image."""
    if image is None:
        return None, None, "none"
    info = catalog.image_info(image)
    if info is not None:
        return info.vllm, info.below, f"catalog: {info.evidence}"
    repo, tag = split_image(image)
    if tag and repo.endswith("vllm-openai") and version_tuple(tag):
        return tag.lstrip("v").split("-")[0], None, f"image tag {tag}"
    return None, None, f"unknown (image {image}; assumed recent)"


def resolve_settings(
    req: PlanRequest, facts: ModelFacts, flags: VllmFlags, machine: MachineProfile, target_vllm: str | None
) -> ServeSettings:
    _merge_option(flags, "max-model-len", str(req.context) if req.context else None)
    util = req.gpu_memory_utilization
    if util is None and not flags.has("gpu-memory-utilization") and machine.unified_memory:
        util = GB10_CEILING  # the planner's choice on GB10: vLLM's 0.92 default does not boot there
    _merge_option(flags, "gpu-memory-utilization", str(util) if util is not None else None)
    _merge_option(flags, "kv-cache-dtype", req.kv_cache_dtype)
    given = flags.get_int("max-model-len")  # auto (-1): the model's, then fitted to memory (make_plan)
    max_len = given if given and given > 0 else facts.default_max_len or facts.max_position_embeddings
    hybrid_default = at_least(target_vllm, HYBRID_PREFIX_CACHING_DEFAULT_SINCE)
    prefix = flags.get_bool("enable-prefix-caching")
    if prefix is None:
        prefix = hybrid_default if facts.is_hybrid else True
    spec_tokens, spec_method = _speculative(flags)
    kv_gib = req.kv_cache_memory_gib
    raw_bytes = flags.get("kv-cache-memory-bytes")
    if kv_gib is None and isinstance(raw_bytes, str):
        kv_gib = parse_bytes(raw_bytes) / (1 << 30)
    util_value = flags.get_float("gpu-memory-utilization") or DEFAULT_GPU_MEMORY_UTILIZATION
    graphs = cudagraph_settings(flags)
    if not 0 < util_value <= 1:
        raise UsageError(
            f"--gpu-memory-utilization {util_value} is outside (0, 1].", hint="It is a fraction, e.g. 0.85."
        )
    if max_len <= 0:
        raise UsageError(
            f"--max-model-len {max_len} must be positive.", hint="Write e.g. --max-model-len 32768."
        )
    s = ServeSettings(
        max_model_len=max_len,
        gpu_memory_utilization=util_value,
        kv_cache_dtype=str(flags.get("kv-cache-dtype") or "auto"),
        max_num_seqs=flags.get_int("max-num-seqs") or machine.default_max_num_seqs,
        max_num_batched_tokens=flags.get_int("max-num-batched-tokens")
        or machine.default_max_num_batched_tokens,
        enable_prefix_caching=prefix,
        enforce_eager=bool(flags.get_bool("enforce-eager")),
        tensor_parallel_size=flags.get_int("tensor-parallel-size") or 1,
        pipeline_parallel_size=flags.get_int("pipeline-parallel-size") or 1,
        nodes=req.nodes,
        gpus_per_node=req.gpus_per_node,
        block_size=flags.get_int("block-size"),
        num_speculative_tokens=spec_tokens,
        language_model_only=bool(flags.get_bool("language-model-only")) or not facts.has_vision,
        kv_cache_memory_gib=kv_gib,
        disable_hybrid_kv_cache_manager=bool(flags.get_bool("disable-hybrid-kv-cache-manager")),
        gdn_prefill_backend=_str_flag(flags, "gdn-prefill-backend"),
        compute_capability_major=machine.compute_capability_major,
        vllm_version=target_vllm,
        mamba_prefix_mode=mamba_prefix_mode(
            facts.architecture, _str_flag(flags, "mamba-cache-mode"), target_vllm
        ),
        mamba_block_size=flags.get_int("mamba-block-size"),
        cudagraphs=graphs.enabled,
        cudagraph_capture_sizes=graphs.sizes,
        max_cudagraph_capture_size=graphs.max_size,
    )
    return s.model_copy(update={"async_scheduling": _async_scheduling(flags, facts, s, spec_method)})


def _speculative(flags: VllmFlags) -> tuple[int, str | None]:
    """``--speculative-config``'s draft tokens and method (0 and None without one)."""
    spec_cfg = flags.get_json("speculative-config")
    if not isinstance(spec_cfg, dict):
        return 0, None
    method = spec_cfg.get("method")
    return int(spec_cfg.get("num_speculative_tokens", 0) or 0), method if isinstance(method, str) else None


def _async_scheduling(flags: VllmFlags, facts: ModelFacts, s: ServeSettings, spec_method: str | None) -> bool:
    """``--async-scheduling`` / ``--no-async-scheduling`` as given, else the target vLLM's default."""
    given = flags.get_bool("async-scheduling")
    return given if given is not None else default_async_scheduling(facts, s, spec_method)


def _str_flag(flags: VllmFlags, name: str) -> str | None:
    value = flags.get(name)
    return value if isinstance(value, str) else None


def _overrides(flags: VllmFlags) -> dict[str, Any] | None:
    """``--hf-overrides`` JSON (e.g. RoPE scaling) applies to the config as vLLM applies it; an
    explicit ``--dtype`` replaces the checkpoint's dtype."""
    dtype = _str_flag(flags, "dtype")
    extra: dict[str, Any] = {"dtype": dtype, "torch_dtype": dtype} if dtype and dtype != "auto" else {}
    if not flags.has("hf-overrides"):
        return extra or None
    value = flags.get_json("hf-overrides")
    if not isinstance(value, dict):
        raise UsageError(
            f"--hf-overrides {flags.get('hf-overrides')!r} is not a JSON object.",
            hint='Write e.g. --hf-overrides \'{"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}\'.',
        )
    return {**value, **extra}


def _flags_on_facts(facts: ModelFacts, flags: VllmFlags) -> ModelFacts:
    """What flags change in the model vLLM loads. ``--quantization fp8`` (and the other online
    methods) on a full-precision checkpoint: vLLM quantizes the weights while loading, so they are
    priced by the scheme, not read from the checkpoint's index (a quantized checkpoint keeps its own
    scheme; the lint says what vLLM does). ``--mamba-ssm-cache-dtype``: a hybrid's SSM state dtype
    (vllm config/cache.py)."""
    update: dict[str, Any] = {}
    online = online_quantization(_str_flag(flags, "quantization"))
    if online is not None and facts.quantization is None:
        update |= {"quantization": online, "checkpoint_bytes": None}
    ssm = _str_flag(flags, "mamba-ssm-cache-dtype")
    if facts.is_hybrid and ssm not in (None, "auto"):
        update["mamba_ssm_dtype"] = ssm
    return facts.model_copy(update=update) if update else facts


# ---- the plan -----------------------------------------------------------------------------------


def _target_vllm(req: PlanRequest, image: str | None, catalog: Catalog) -> tuple[str | None, str, str | None]:
    """(target vLLM version, where it came from, the image's upper bound when only that is known)."""
    if req.vllm_version:
        return req.vllm_version, req.vllm_version_source or "--vllm-version", None
    img_version, img_below, img_source = image_version(image, catalog)
    if get_engine(req.engine).containerized:
        return img_version, img_source, img_below
    return DEFAULT_VLLM_VERSION, f"assumed (the field reports' vLLM {DEFAULT_VLLM_VERSION})", img_below


def make_plan(
    req: PlanRequest,
    *,
    catalog: Catalog | None = None,
    catalog_paths: list[Path] | None = None,
    models_dir: Path | None = None,
    machine: MachineProfile | None = None,
    raise_if_impossible: bool = True,
) -> Plan:
    """Build the whole plan. Raises PlanError (exit 2) for a context beyond memory when asked to."""
    catalog = catalog or load_catalog(catalog_paths)
    flags = parse_vllm_flags(req.vllm_args)
    flags.check_values()
    flags.check_model(req.model)
    image = (req.image or DEFAULT_IMAGE) if get_engine(req.engine).containerized else None
    target, source, img_below = _target_vllm(req, image, catalog)
    facts, entry, resolved = resolve_model(req.model, catalog, models_dir, _overrides(flags))
    facts = _flags_on_facts(facts.for_vllm(target), flags)
    machine = machine or get_machine(req.machine, total_gib=req.total_gib)
    settings = resolve_settings(req, facts, flags, machine, target)
    settings, memory = plan_memory_fitted(facts, settings, machine, flags, req.concurrency)  # auto: fitted
    arch = catalog.min_vllm_for(facts.architecture)
    ctx = LintContext(
        facts=facts,
        entry=entry,
        model_name=entry.name if entry else resolved.name,
        flags=flags,
        settings=settings,
        machine=machine,
        memory=memory,
        workload=req.workload,
        target_vllm=target,
        min_vllm=arch.min_vllm if arch else None,
        min_vllm_evidence=arch.evidence if arch else None,
        image=image,
        image_vllm_below=img_below,
        target_concurrency=req.concurrency,
        lone_config=None if resolved.local_path or resolved.repo_id else resolved.config_source,
    )
    findings = lint(ctx, target_source=source)
    if raise_if_impossible and not memory.fits:
        raise no_fit_error(memory, ctx.model_name)
    spec = build_spec(req, resolved, flags, image)
    return Plan(
        request=req,
        model=resolved,
        catalog_entry=entry,
        facts=facts,
        machine=machine,
        target_vllm=target,
        target_vllm_source=source,
        settings=settings,
        memory=memory,
        findings=findings,
        spec=spec,
        commands=_commands(req, spec, image),
    )


def _commands(req: PlanRequest, spec: LaunchSpec, image: str | None) -> dict[str, list[str]]:
    from llmdeck.plan.argv import docker_argv, vllm_serve_argv

    commands = {"vllm_serve": vllm_serve_argv(spec.model_copy(update={"engine": "venv", "image": None}))}
    docker = spec.model_copy(update={"engine": "docker", "image": image or DEFAULT_IMAGE})
    commands["docker"] = docker_argv(docker, log_driver=req.docker_log_driver)
    if req.nodes > 1:
        commands |= _cluster_commands(req, spec)
    return commands


def _cluster_commands(req: PlanRequest, spec: LaunchSpec) -> dict[str, list[str]]:
    """Across boxes: Ray first (HEAD/WORKER are the user's), then vLLM on it from the head."""
    up = ["llmdeck", "cluster", "up", "--head", "HEAD"]
    for i in range(1, req.nodes):
        up += ["--worker", f"WORKER{i}"]
    serve = ["llmdeck", "up", "--model", spec.model, "--ray-cluster", "--", *spec.vllm_args]
    return {"cluster_up": [*up, "--netcheck", "nccl"], "up_on_cluster": serve}


def build_spec(req: PlanRequest, resolved: ResolvedModel, flags: VllmFlags, image: str | None) -> LaunchSpec:
    model_ref = resolved.local_path or resolved.repo_id or LONE_CONFIG_MODEL
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"} if resolved.local_path else {}
    served = flags.get("served-model-name")
    if flags.more.get("served-model-name"):
        raise UsageError(
            "--served-model-name is given several names; an llmdeck server answers to one.",
            hint="Give one name; the gateway's aliases (`llmdeck gateway up`) give a model more.",
        )
    host = flags.get("host")
    engine = get_engine(req.engine)
    try:
        return LaunchSpec(
            name=req.name,
            engine=req.engine,
            model=model_ref,
            served_model_name=served if isinstance(served, str) else resolved.name,
            host=host if isinstance(host, str) else req.host,
            port=flags.get_int("port") or req.port,
            vllm_args=flags.to_argv(skip=SPEC_FLAGS),
            env={} if engine.containerized else env,
            image=image,
            hf_cache=str(default_hf_home()) if engine.containerized else None,
            python=None if engine.containerized else req.python,
        )
    except ValidationError as exc:  # a value given after `--` (--served-model-name $'a\nb')
        raise invalid_spec(exc, flags={"served_model_name"}, hint="See `llmdeck plan --help`.") from exc
