"""llmdeck.plan: what a model needs on a machine (memory, settings, lint), as a :class:`Plan`.

:func:`for_spec` is the one way a :class:`~llmdeck.engines.spec.LaunchSpec` becomes a plan (preflight's
lint, the gateway's footprint, the tuner's pruning and unified sizing all plan through it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmdeck.catalog.entries import Catalog
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.plan.machine import MachineProfile
    from llmdeck.plan.planner import Plan, PlanRequest


def request_for_spec(spec: LaunchSpec, machine: str = "auto", **fields: Any) -> PlanRequest:
    """The PlanRequest of ``spec``: its model (``~`` expanded), engine (as the planner sees it), image
    and flags (with those the engine adds: the CPU engine's ``--dtype float32``), and for an engine
    sized by a variable (the CPU engine's KV space) that budget;
    ``fields`` set or override the rest (``vllm_version``, ``workload``, ``model`` …)."""
    from pathlib import Path

    from llmdeck.engines import get
    from llmdeck.plan.planner import PlanRequest

    engine = get(spec.engine)
    data: dict[str, Any] = {
        "model": str(Path(spec.model).expanduser()) if spec.model.startswith("~") else spec.model,
        "machine": machine,
        "engine": engine.plans_as,
        "image": spec.image,
        "vllm_args": [*engine.added_args(spec), *spec.vllm_args],
    }
    if engine.kv_budget_env is not None:
        given = spec.env.get(engine.kv_budget_env)
        data["kv_cache_memory_gib"] = float(given) if given else engine.kv_budget_default_gib
    data.update(fields)
    return PlanRequest(**data)


def for_spec(
    spec: LaunchSpec,
    machine: str | MachineProfile = "auto",
    *,
    catalog: Catalog | None = None,
    raise_if_impossible: bool = False,
    **fields: Any,
) -> Plan:
    """The plan of ``spec`` on ``machine``: a name (``auto``: this machine, read as ``plan --machine
    auto`` reads it) or a profile already read (:func:`llmdeck.plan.machine.host_machine`).
    ``fields``: PlanRequest fields that the spec does not hold (see :func:`request_for_spec`)."""
    from llmdeck.plan.machine import get_machine
    from llmdeck.plan.planner import make_plan

    name = machine if isinstance(machine, str) else machine.name
    req = request_for_spec(spec, name, **fields)
    profile = get_machine(name, total_gib=req.total_gib) if isinstance(machine, str) else machine
    return make_plan(req, catalog=catalog, machine=profile, raise_if_impossible=raise_if_impossible)
