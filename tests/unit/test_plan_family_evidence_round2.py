"""`llmdeck plan` against vLLM 0.22.0 on the H200, round 2 (issue 38): the families round 1 did not
measure, and gpt-oss-120b at vLLM's default --max-num-seqs (1024).

evidence/plan/families/device_families_round2.sh makes the runs (plan-round2.txt; the method of
round 1); the lead copies what it returns to evidence/plan/families/results-round2/. Until then this
module skips. For every start that printed its KV lines: block size, KV-cache tokens and max concurrency
within 2% of vLLM's, from vLLM's own "Available KV cache memory" (the KV math) and from llmdeck's memory
model. Families the plan does not model yet are expected to miss (strict: a pass means the gap closed,
so the entry must go). A start that failed must be caught by plan's lint.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from llmdeck.catalog.entries import load_catalog
from llmdeck.plan.machine import GIB
from llmdeck.plan.planner import PlanRequest, make_plan
from repo_paths import ROOT

FAMILIES = ROOT / "evidence" / "plan" / "families"
RESULTS = FAMILIES / "results-round2"
CONFIGS = FAMILIES / "configs"
TOL = 0.02
# model -> why plan is expected to miss it (the lint says so to the user: ssm-hybrid-not-modelled)
KNOWN_GAPS: dict[str, str] = {}  # Nemotron-H was one until its Mamba-2 layers were modelled


def _runs() -> list[dict[str, Any]]:
    path = RESULTS / "runs.jsonl"
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _log(run: dict[str, Any]) -> str:
    return (RESULTS / "logs" / Path(run["log"]).name).read_text(errors="replace")


def _num(pat: str, text: str) -> float | None:
    m = re.search(pat, text)
    return float(m.group(1).replace(",", "")) if m else None


def _started(run: dict[str, Any]) -> bool:
    return run.get("status") == "ok" and "GPU KV cache size" in _log(run)


RUNS = _runs()
STARTED = [r for r in RUNS if _started(r)]
FAILED = [r for r in RUNS if not _started(r)]
CATALOG = load_catalog()
pytestmark = pytest.mark.skipif(not RUNS, reason="no round-2 family runs committed yet")


def _plan(run: dict[str, Any], kv_gib: float | None) -> Any:
    device = RESULTS / "device.json"
    total = json.loads(device.read_text()).get("gpu_total_bytes", 150122463232) if device.is_file() else 0
    version = re.search(r"Initializing a V1 LLM engine \(v([\d.]+)\)", _log(run))
    req = PlanRequest(
        model=str(CONFIGS / run["model"]),
        machine="h200",
        engine="venv",
        vllm_version=version.group(1) if version else "0.22.0",
        vllm_args=shlex.split(run["flags"]),
        kv_cache_memory_gib=kv_gib,
        total_gib=(total or 150122463232) / GIB,
    )
    return make_plan(req, catalog=CATALOG, raise_if_impossible=False)


STARTED_PARAMS = [
    pytest.param(
        r,
        id=f"run{r['run']}-{r['model']}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[r["model"]])]
        if r["model"] in KNOWN_GAPS
        else [],
    )
    for r in STARTED
]


@pytest.mark.parametrize("run", STARTED_PARAMS)
@pytest.mark.parametrize("source", ["given", "predicted"])
def test_plan_matches_vllm_startup_lines(run: dict[str, Any], source: str) -> None:
    text = _log(run)
    available = _num(r"Available KV cache memory: ([\d.]+) GiB", text)
    tokens = _num(r"GPU KV cache size: ([\d,]+) tokens", text)
    conc = _num(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", text)
    block = _num(r"Setting attention block size to (\d+) tokens", text) or _num(
        r"Setting kv cache block size to (\d+) for", text
    )
    mem = _plan(run, available if source == "given" else None).memory
    assert mem.layout.block_size == (block or 16)
    assert mem.capacity.kv_cache_tokens == pytest.approx(tokens, rel=TOL)
    assert mem.capacity.max_concurrency == pytest.approx(conc, rel=TOL)


@pytest.mark.parametrize("run", FAILED, ids=lambda r: f"run{r['run']}-{r['model']}")
def test_failed_starts_are_caught_by_the_lint(run: dict[str, Any]) -> None:
    error = re.search(r"(AssertionError|ValueError|RuntimeError): (.+)", _log(run))
    assert error, "a failed start must leave vLLM's error in its log"
    plan = _plan(run, None)
    assert plan.errors or not plan.memory.fits, error.group(0)
