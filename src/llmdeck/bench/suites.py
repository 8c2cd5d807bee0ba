"""Named scenario presets: the seeds' benchmark tables, an agent suite, and a tiny smoke test."""

from __future__ import annotations

from llmdeck.bench.result_schema import ScenarioSpec
from llmdeck.errors import UsageError


def _s(name: str, i: int, o: int, n: int, rate: float | None, desc: str, **kw: object) -> ScenarioSpec:
    return ScenarioSpec.model_validate(
        {
            "name": name,
            "input_len": i,
            "output_len": o,
            "num_prompts": n,
            "request_rate": rate,
            "description": desc,
            **kw,
        }
    )


# Seed 004's table (vllm bench serve --dataset-name random, rates as in the seed).
SEED_SCENARIOS: list[ScenarioSpec] = [
    _s("512-256-x20-r1", 512, 256, 20, 1.0, "short context, 1 user"),
    _s("2048-512-x20-r1", 2048, 512, 20, 1.0, "medium code context"),
    _s("2048-512-x30-r3", 2048, 512, 30, 3.0, "several users, medium context"),
    _s("2048-512-x50-r4", 2048, 512, 50, 4.0, "multi-user stress"),
    _s("14336-1024-x3-r0.1", 14336, 1024, 3, 0.1, "16K context"),
    _s("28672-1024-x1", 28672, 1024, 1, 0.05, "32K single request"),
    _s("57344-2048-x1", 57344, 2048, 1, 0.02, "64K single request"),
    _s("122880-1024-x1", 122880, 1024, 1, 0.01, "near-128K single request"),
]

SUITES: dict[str, list[ScenarioSpec]] = {
    "seeds": SEED_SCENARIOS,
    "quick": SEED_SCENARIOS[:2],
    "agent": [
        _s(
            "agent-prefix-4096",
            256,
            256,
            24,
            None,
            "long fixed system prompt + varying suffix (prefix cache, seed 000)",
            workload="shared-prefix",
            prefix_len=4096,
            max_concurrency=8,
            endpoint="chat",
        ),
        _s(
            "agent-multiturn",
            512,
            128,
            24,
            1.0,
            "sessions of 4 turns whose context grows",
            workload="multi-turn",
            num_turns=4,
            endpoint="chat",
        ),
    ],
    # For the tiny CPU engine: a few short requests, ~20 s on 2 cores.
    "smoke": [_s("smoke-64-32-x6-c2", 64, 32, 6, None, "CPU smoke test", max_concurrency=2, warmup=1)],
}


def get_suite(name: str) -> list[ScenarioSpec]:
    """Copies of a suite's scenarios, each with its own seed (no scenario reuses another's prompts,
    which would turn into prefix-cache hits and flatter TTFT)."""
    try:
        return [s.model_copy(deep=True, update={"seed": i}) for i, s in enumerate(SUITES[name])]
    except KeyError:
        raise UsageError(
            f"There is no bench suite named {name!r}.",
            hint=f"Use one of: {', '.join(SUITES)}.",
        ) from None
