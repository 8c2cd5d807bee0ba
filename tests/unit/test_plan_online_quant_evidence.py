"""`llmdeck plan` with ``--quantization`` on full-precision checkpoints against real vLLM 0.22.0
start-ups on an H200 (evidence/plan/online-quant/: the script, its rows, the logs it brought back).

vLLM quantizes such a checkpoint while loading it; before the plan knew that, it priced the weights
in bf16 (Qwen3-30B-A3B with --quantization fp8: 56.88 GiB planned, 29.03 GiB loaded). Each run: the
weights within 1% (or 0.05 GiB: the 0.6B model's are 0.74 vs 0.71), the KV-cache tokens within 2% both
from vLLM's printed "Available KV cache memory" and from the plan's own memory model.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest

from llmdeck.catalog.entries import load_catalog
from llmdeck.plan.machine import GIB
from llmdeck.plan.planner import Plan, PlanRequest, make_plan
from repo_paths import ROOT

EVIDENCE = ROOT / "evidence" / "plan" / "online-quant"
RESULTS = EVIDENCE / "results"
CONFIG_DIRS = (EVIDENCE / "configs", ROOT / "evidence" / "plan" / "families" / "configs")
RUNS = [json.loads(x) for x in (RESULTS / "runs.jsonl").read_text().splitlines() if x.strip()]
CATALOG = load_catalog()


def _log(run: dict[str, Any]) -> str:
    return (RESULTS / run["log"]).read_text(errors="replace")


def _num(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, pattern
    return float(m.group(1).replace(",", ""))


def _plan(run: dict[str, Any], kv_gib: float | None) -> Plan:
    model = next(d / run["model"] for d in CONFIG_DIRS if (d / run["model"]).is_dir())
    total = json.loads((RESULTS / "device.json").read_text())["gpu_total_bytes"] / GIB
    req = PlanRequest(
        model=str(model),
        machine="h200",
        engine="venv",
        vllm_version="0.22.0",
        vllm_args=shlex.split(run["flags"]),
        kv_cache_memory_gib=kv_gib,
        total_gib=total,
    )
    return make_plan(req, catalog=CATALOG, raise_if_impossible=False)


def test_the_evidence_covers_every_online_method_and_three_kinds_of_model() -> None:
    methods = {shlex.split(r["flags"])[-1] for r in RUNS if r["status"] == "ok"}
    assert methods == {"fp8", "fp8_per_block", "int8_per_channel_weight_only", "mxfp8"}
    kinds = {_plan(r, None).facts.kind for r in RUNS}
    assert {"dense", "MoE"} <= kinds and any(_plan(r, None).facts.is_hybrid for r in RUNS)


@pytest.mark.parametrize("run", RUNS, ids=[f"run{r['run']}-{r['model']}" for r in RUNS])
def test_plan_matches_what_vllm_loaded(run: dict[str, Any]) -> None:
    text = _log(run)
    weights = _num(r"Model loading took ([\d.]+) GiB", text)
    available = _num(r"Available KV cache memory: ([\d.]+) GiB", text)
    tokens = _num(r"GPU KV cache size: ([\d,]+) tokens", text)
    predicted, given = _plan(run, None), _plan(run, available)
    assert predicted.facts.quantization is not None and predicted.facts.quantization.online
    assert abs(predicted.memory.weights_gib - weights) <= max(0.01 * weights, 0.05)
    for plan in (given, predicted):
        assert plan.memory.capacity.kv_cache_tokens == pytest.approx(tokens, rel=0.02)


def test_without_the_flag_the_weights_would_be_bf16() -> None:
    run = RUNS[0]
    flags = shlex.split(run["flags"])
    bf16 = _plan({**run, "flags": shlex.join(flags[:-2])}, None).memory.weights_gib
    loaded = _num(r"Model loading took ([\d.]+) GiB", _log(run))
    assert flags[-2:] == ["--quantization", "fp8"] and bf16 > 1.9 * loaded
