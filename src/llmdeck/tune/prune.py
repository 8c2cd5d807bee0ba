"""Pruning through ``plan``: each candidate is planned (memory, KV tokens, lint) before anything
starts; a plan error (a rule whose config vLLM refuses or dies on) rejects it with plan's message
and fix. The CPU engine is planned with its KV space as the KV budget (``VLLM_CPU_KVCACHE_SPACE``
GiB, vLLM's ``--kv-cache-memory-bytes`` equivalent there), so a context that one request cannot hold
is rejected as vLLM would refuse it."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from llmdeck.engines import get as get_engine
from llmdeck.plan.machine import CPU_MACHINE, MachineProfile, cpu_machine, get_machine
from llmdeck.tune.schema import ParamValue, TuneRequest
from llmdeck.tune.space import candidate_flags

if TYPE_CHECKING:
    from llmdeck.catalog.entries import Catalog
    from llmdeck.plan.planner import Plan


class Pruner:
    """Plans candidates of one tune (the catalog and the machine read once)."""

    def __init__(self, req: TuneRequest) -> None:
        self.req = req
        self.engine = get_engine(req.base.engine)

    @cached_property
    def catalog(self) -> Catalog:
        from llmdeck.catalog.entries import load_catalog

        return load_catalog()

    @cached_property
    def machine(self) -> MachineProfile:
        if self.engine.runs_on_cpu or self.req.machine == CPU_MACHINE:
            return cpu_machine()
        return get_machine(self.req.machine)

    def plan(self, args: list[str], env: dict[str, str]) -> Plan:
        from llmdeck.plan import for_spec

        base = self.req.base
        # the candidate's variables over the base's; an empty one falls back to the base's
        candidate = {**base.env, **{k: v for k, v in env.items() if v}}
        spec = base.model_copy(update={"vllm_args": args, "env": candidate})
        workload = "agent" if self.req.workload == "prompts" else self.req.workload
        return for_spec(
            spec,
            self.machine,
            catalog=self.catalog,
            model=self.req.model_ref,
            vllm_version=self.req.vllm_version,
            workload=workload,
            concurrency=self.req.load.concurrency,
        )

    def reasons(self, params: dict[str, ParamValue], base_args: list[str]) -> list[str]:
        """Why plan refuses this candidate (empty: it may start)."""
        return self.check(params, base_args)[0]

    def check(self, params: dict[str, ParamValue], base_args: list[str]) -> tuple[list[str], list[str]]:
        """(why plan refuses the candidate, the flags plan would start it with). Plan's flags are the
        candidate's plus what plan adds for the machine (GB10: --gpu-memory-utilization 0.85 where the
        candidate leaves it to vLLM, whose 0.9 does not boot there)."""
        from llmdeck.errors import UsageError

        args, env = candidate_flags(base_args, params)
        try:
            plan = self.plan(args, env)
        except UsageError as exc:  # a flag plan refuses (--max-num-seqs 0): a rejection, not the tune's end
            return [f"flags: {exc.message}" + (f" Fix: {exc.hint}" if exc.hint else "")], args
        out = [f"{f.rule}: {f.message}" + (f" Fix: {f.fix}" if f.fix else "") for f in plan.errors]
        seqs, tokens = plan.settings.max_num_seqs, plan.settings.max_num_batched_tokens
        if tokens < seqs:  # vllm 0.32.0 vllm/config/scheduler.py:328-333: a ValueError at start-up
            out.append(
                f"scheduler-batched-tokens-below-seqs: max_num_batched_tokens ({tokens}) must be greater "
                f"than or equal to max_num_seqs ({seqs}); vLLM refuses it at start-up. "
                f"Fix: --max-num-batched-tokens {seqs} or more."
            )
        if not out and not plan.memory.fits:
            err = plan.fit_error()
            out.append(err.message if err else "does not fit")
        return out, plan.spec.vllm_args

    def model_facts(self, base_args: list[str]) -> tuple[int | None, list[int], bool]:
        """(the model's longest context, the attention block sizes per KV dtype, hybrid?) of the base."""
        blocks: set[int] = set()
        limit: int | None = None
        hybrid = False
        dtypes = ["auto"] if self.engine.runs_on_cpu else ["auto", "fp8"]
        for dtype in dtypes:
            args, env = candidate_flags(base_args, {"kv-cache-dtype": dtype} if dtype != "auto" else {})
            plan = self.plan(args, env)
            limit = plan.facts.derived_max_len or plan.facts.max_position_embeddings or None
            hybrid = plan.facts.is_hybrid
            if hybrid:
                blocks.add(plan.memory.layout.block_size)
        return limit, sorted(blocks), hybrid
