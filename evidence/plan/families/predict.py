"""What `llmdeck plan` predicts for each row of a family plan file, before the device runs it.

    .venv/bin/python evidence/plan/families/predict.py evidence/plan/families/plan-v0.26.txt 0.26.0
    COMPILED=1 .venv/bin/python evidence/plan/families/predict.py \
        evidence/plan/families/plan-v0.26-compiled.txt 0.26.0

Prints one line a row: the flags device_families.sh will start vLLM with, the runner the plan assumes
(plan/runner.py), and the block size, available KV memory, KV tokens and concurrency it predicts on an
H200 as vLLM sees it (150,122,463,232 bytes); with COMPILED=1 (device_families.sh's compiled mode: no
--enforce-eager, no --max-num-seqs 8) also the CUDA-graph estimate it subtracts. Nothing is started.
"""

from __future__ import annotations

import os
import shlex
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from llmdeck.catalog.entries import load_catalog
from llmdeck.plan.machine import GIB
from llmdeck.plan.planner import PlanRequest, make_plan
from llmdeck.plan.runner import uses_v2_model_runner

HERE = Path(__file__).resolve().parent
H200_BYTES = 150122463232


def rows(plan_file: Path) -> list[tuple[str, list[str]]]:
    out = []
    for line in plan_file.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, ctx, util, _est, extra = [*line.split("|"), ""][:5]
        fixed = f"--max-model-len {ctx} --gpu-memory-utilization {util}"
        if os.environ.get("COMPILED") != "1":
            fixed += " --enforce-eager --max-num-seqs 8"
        flags = f"{fixed} {extra}"
        out.append((name, shlex.split(flags)))
    return out


def plan_on_h200(
    name: str, flags: list[str], version: str, *, total_bytes: int = H200_BYTES, kv_gib: float | None = None
) -> Any:
    """`llmdeck plan` for one family row on the H200 (the venv engine, the row's vLLM version)."""
    req = PlanRequest(
        model=str(HERE / "configs" / name),
        machine="h200",
        engine="venv",
        vllm_version=version,
        vllm_args=flags,
        kv_cache_memory_gib=kv_gib,
        total_gib=total_bytes / GIB,
    )
    return make_plan(req, catalog=_catalog(), raise_if_impossible=False)


@lru_cache(maxsize=1)
def _catalog() -> Any:
    return load_catalog()


def main(plan_file: str, version: str) -> None:
    print("row | model | extra flags | runner | block | available GiB | KV tokens | concurrency | graphs GiB")
    for i, (name, flags) in enumerate(rows(Path(plan_file)), 1):
        plan = plan_on_h200(name, flags, version)
        mem = plan.memory
        runner = "V2" if uses_v2_model_runner(plan.facts, plan.settings) else "V1"
        extra = " ".join(flags[4:] if os.environ.get("COMPILED") == "1" else flags[7:]) or "-"
        cap = mem.capacity
        print(
            f"{i} | {name} | {extra} | {runner} | {mem.layout.block_size} | "
            f"{cap.available_kv_bytes / GIB:.2f} | {cap.kv_cache_tokens:,} | {cap.max_concurrency:.2f} | "
            f"{mem.overhead.cuda_graph_gib:.2f}"
        )
        for finding in plan.errors:
            print(f"    error: {finding}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
