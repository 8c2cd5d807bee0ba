"""`llmdeck plan` against real vLLM 0.22.0 start-ups of every model family on an H200 (issue 18).

The lead ran vLLM 0.22.0 on random weights (`--enforce-eager --max-num-seqs 8`) for the public configs
in evidence/plan/families/configs (the exact config.json each run served) and committed runs.jsonl and
the logs under evidence/plan/families/results. For every start that reached its KV lines: block size,
KV-cache tokens and max concurrency within 2% of vLLM's lines, from vLLM's printed "Available KV cache
memory" (the KV math; exact) and from llmdeck's own memory model. A start that failed is evidence too:
plan's lint must name the error vLLM died of.
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
RESULTS = FAMILIES / "results"
CONFIGS = FAMILIES / "configs"
TOL = 0.02


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


def _total_gib() -> float:
    dev = RESULTS / "device.json"
    data = json.loads(dev.read_text()) if dev.is_file() else {}
    return float(data.get("gpu_total_bytes", 150122463232)) / GIB


RUNS = _runs()
STARTED = [r for r in RUNS if _started(r)]
CATALOG = load_catalog()
pytestmark = pytest.mark.skipif(not RUNS, reason="no family runs committed yet")


def _plan(run: dict[str, Any], kv_gib: float | None) -> Any:
    text = _log(run)
    version = re.search(r"Initializing a V1 LLM engine \(v([\d.]+)\)", text)
    req = PlanRequest(
        model=str(CONFIGS / run["model"]),
        machine="h200",
        engine="venv",
        vllm_version=version.group(1) if version else "0.22.0",
        vllm_args=shlex.split(run["flags"]),
        kv_cache_memory_gib=kv_gib,
        total_gib=_total_gib(),
    )
    return make_plan(req, catalog=CATALOG, raise_if_impossible=False)


def test_the_evidence_covers_the_families() -> None:
    facts = [_plan(r, None).facts for r in STARTED]
    kinds = {f.kind for f in facts}
    assert len(STARTED) >= 10, [r["model"] for r in STARTED]
    assert any("MLA" in k for k in kinds) and any("sliding" in k for k in kinds)
    assert any("hybrid" in k for k in kinds) and any(k == "dense" for k in kinds)
    assert any("MoE" in k for k in kinds)
    quant = {f.quantization.scheme for f in facts if f.quantization}
    assert {"mxfp4", "nvfp4"} <= quant


@pytest.mark.parametrize("run", STARTED, ids=lambda r: f"run{r['run']}-{r['model']}")
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
    if source == "given":  # the KV math itself is exact up to the log's two-decimal GiB
        assert mem.capacity.kv_cache_tokens == pytest.approx(tokens, rel=2e-3)


FAILED = [r for r in RUNS if not _started(r)]


@pytest.mark.parametrize("run", FAILED, ids=lambda r: f"run{r['run']}-{r['model']}")
def test_failed_starts_are_caught_by_the_lint(run: dict[str, Any]) -> None:
    text = _log(run)
    error = re.search(r"(AssertionError|ValueError): (.+)", text)
    assert error, "a failed start must leave vLLM's error in its log"
    plan = _plan(run, None)
    assert plan.errors or not plan.memory.fits, error.group(0)
