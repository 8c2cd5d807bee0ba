"""`llmdeck plan` against the start-up lines of the 11 real vLLM 0.22.0 runs on the H200 (issue 4).

The logs and runs.jsonl are committed under evidence/plan/results (evidence/plan/device_plan_vs_vllm.sh
produced them on the device). For every run: block size, KV-cache tokens and max concurrency within 2%
of vLLM's lines, both from vLLM's own "Available KV cache memory" (exact KV math) and from llmdeck's
overhead model (the whole prediction). The same comparison as evidence/plan/compare.py, in-process.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from llmdeck.plan.machine import GIB
from llmdeck.plan.planner import PlanRequest, make_plan
from repo_paths import ROOT

RESULTS = ROOT / "evidence" / "plan" / "results"
CONFIGS = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs"
MODELS = {
    "qwen3-0.6b": "Qwen3-0.6B",
    "qwen3-30b-a3b": "Qwen3-30B-A3B",
    "qwen3.6-35b-a3b": "Qwen3.6-35B-A3B",
}
H200_TOTAL_BYTES = json.loads((RESULTS / "device.json").read_text())["gpu_total_bytes"]


def _runs() -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (RESULTS / "runs.jsonl").read_text().splitlines() if x.strip()]
    return [r for r in rows if r["status"] == "ok"]


def _vllm_lines(log: Path) -> dict[str, float]:
    text = log.read_text()
    block = re.search(r"Setting attention block size to (\d+) tokens", text)
    return {
        "block_size": float(block.group(1)) if block else 16.0,
        "available_gib": float(re.search(r"Available KV cache memory: ([\d.]+) GiB", text).group(1)),  # type: ignore[union-attr]
        "kv_tokens": float(re.search(r"GPU KV cache size: ([\d,]+) tokens", text).group(1).replace(",", "")),  # type: ignore[union-attr]
        "concurrency": float(
            re.search(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", text).group(1)
        ),  # type: ignore[union-attr]
    }


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    for name, cfg in MODELS.items():
        (root / name).mkdir()
        (root / name / "config.json").write_bytes((CONFIGS / f"{cfg}.config.json").read_bytes())
    return root


def test_the_evidence_covers_three_models_two_contexts_two_utilizations() -> None:
    runs = _runs()
    assert len(runs) >= 11
    for model in MODELS:
        mine = [r for r in runs if r["model"] == model]
        assert len({r["context"] for r in mine}) == 2, model
        assert len({r["utilization"] for r in mine}) == 2, model


@pytest.mark.parametrize(
    "run", _runs(), ids=lambda r: f"run{r['run']}-{r['model']}-{r['context']}-{r['utilization']}"
)
@pytest.mark.parametrize("source", ["given", "predicted"])
def test_plan_matches_vllm_startup_lines(run: dict[str, Any], source: str, models: Path) -> None:
    log = _vllm_lines(RESULTS / "logs" / Path(run["log"]).name)
    req = PlanRequest(
        model=str(models / run["model"]),
        machine="h200",
        engine="venv",
        vllm_version="0.22.0",
        vllm_args=shlex.split(run["flags"]),
        kv_cache_memory_gib=log["available_gib"] if source == "given" else None,
        total_gib=H200_TOTAL_BYTES / GIB,
    )
    mem = make_plan(req).memory
    assert mem.layout.block_size == log["block_size"]
    assert mem.capacity.kv_cache_tokens == pytest.approx(log["kv_tokens"], rel=0.02)
    assert mem.capacity.max_concurrency == pytest.approx(log["concurrency"], rel=0.02)
    if source == "given":  # the KV math itself is exact
        assert mem.capacity.kv_cache_tokens == pytest.approx(log["kv_tokens"], rel=1e-3)
