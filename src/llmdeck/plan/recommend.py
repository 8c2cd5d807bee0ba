"""``llmdeck recommend``: a model for a machine and a workload, with the reasons (seed 004 §1, §10)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from llmdeck.catalog.entries import CatalogEntry, load_catalog
from llmdeck.errors import LlmdeckError, PlanError, UsageError

if TYPE_CHECKING:
    from llmdeck.plan.planner import PlanRequest

WORKLOADS = ("agent", "multi-user", "long-context")


class RecommendResult(BaseModel):
    schema_version: int = 1
    machine: str
    workload: str
    pick: str
    repo_id: str
    context: int
    why: str
    alternatives: list[str] = Field(default_factory=list)
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    memory_summary: str | None = None
    provenance: list[str] = Field(default_factory=list)
    next_command: str


def recommend(machine: str, workload: str, *, catalog_paths: list[Path] | None = None) -> RecommendResult:
    if workload not in WORKLOADS:
        raise UsageError(
            f"--workload {workload!r} is not known.", hint="Use agent, multi-user or long-context."
        )
    if machine == "auto":
        from llmdeck.plan.machine import get_machine

        machine = get_machine("auto").name
        if machine == "auto":
            machine = "h200"  # a discrete GPU: the H200 picks are the discrete-GPU picks
    if machine not in {"dgx-spark", "h200"}:
        raise UsageError(f"--machine {machine!r} is not known.", hint="Use dgx-spark, h200 or auto.")
    catalog = load_catalog(catalog_paths)
    rec = next((r for r in catalog.recommendations if r.machine == machine and r.workload == workload), None)
    if rec is None:
        raise PlanError(
            f"No catalog has a recommendation for {workload} on {machine}.",
            hint="Add one under `recommendations:` in a catalog of your own.",
        )
    entry = catalog.get(rec.pick)
    result = RecommendResult(
        machine=machine,
        workload=workload,
        pick=entry.name,
        repo_id=entry.repo_id,
        context=rec.context,
        why=rec.why,
        alternatives=rec.alternatives,
        provenance=[f"{p.source}: {p.result}" for p in entry.provenance],
        next_command=(
            f"llmdeck plan {entry.name} --machine {machine} --context {rec.context} --workload {workload}"
        ),
    )
    try:
        from llmdeck.plan.planner import make_plan

        mem = make_plan(_request(entry, machine, rec.context, workload), catalog=catalog).memory
        result.kv_cache_tokens = mem.capacity.kv_cache_tokens
        result.max_concurrency = round(mem.capacity.max_concurrency, 2)
        result.memory_summary = (
            f"Planned: weights {mem.weights_gib:.1f} GiB, KV cache {mem.available_kv_gib:.1f} GiB = "
            f"{mem.capacity.kv_cache_tokens:,} tokens, {mem.capacity.max_concurrency:.1f} requests of "
            f"{mem.max_model_len:,} tokens at --gpu-memory-utilization {mem.gpu_memory_utilization}."
        )
    except LlmdeckError:
        pass  # no config available offline: the recommendation stands on the field reports alone
    return result


def _request(entry: CatalogEntry, machine: str, context: int, workload: str) -> PlanRequest:
    """The pick planned on the engine its figures come from (a venv at the field reports' vLLM)."""
    from llmdeck.engines import get as get_engine
    from llmdeck.plan.planner import DEFAULT_VLLM_VERSION, PlanRequest

    engine = get_engine(entry.engine or "docker")
    return PlanRequest(
        model=entry.name,
        machine=machine,
        context=context,
        workload=workload,
        engine=engine.plans_as,
        vllm_version=None if engine.containerized else DEFAULT_VLLM_VERSION,
    )
