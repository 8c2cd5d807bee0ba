"""`llmdeck plan` against real vLLM start-ups of every model family on an H200, round by round.

Each round ran vLLM on random weights (`--load-format dummy --enforce-eager --max-num-seqs 8` unless the
row says otherwise) for the public configs in evidence/plan/families/configs and committed runs.jsonl
and the logs under its results folder:

- results: vLLM 0.22.0, the families (issue 18; device_families.sh, plan.txt);
- results-round2: vLLM 0.22.0, the families round 1 did not measure and vLLM's default 1,024 sequences
  (issue 38; device_families_round2.sh, plan-round2.txt);
- results-v0.26: vLLM 0.26.0, Granite 4.0-H and what changed since 0.22 (device_families_v026.sh,
  plan-v0.26.txt; planned before they ran: results-v0.26/predicted.txt);
- results-v0.26-compiled: vLLM 0.26.0 in its default mode (torch.compile + CUDA graphs, vLLM's own
  sequence count; device_families.sh COMPILED=1, plan-v0.26-compiled.txt, predicted.txt), where the V1
  runner subtracts its CUDA-graph estimate (held to vLLM's own estimate line here);
- results-v0.22-compiled: vLLM 0.22.0 in its default mode (plan-v0.22-compiled.txt, predicted.txt): the
  dense Llama and Mistral on the V1 runner, and rows at --max-num-seqs 8 that tell the forward pass's
  torch peak from the sampler's (held to vLLM's "torch peak memory increase" here).

For every start that reached its KV lines: block size, KV-cache tokens and max concurrency within 2% of
vLLM's lines, from vLLM's printed "Available KV cache memory" (the KV math; exact) and from llmdeck's own
memory model; the model runner (V1/V2) the plan assumes is the one vLLM logged. A start that failed is
evidence too: plan's lint must name the error vLLM died of. The vLLM version is read from each log.
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
from llmdeck.plan.memory import cudagraph_captures
from llmdeck.plan.planner import PlanRequest, make_plan
from llmdeck.plan.runner import uses_v2_model_runner
from repo_paths import ROOT

FAMILIES = ROOT / "evidence" / "plan" / "families"
CONFIGS = FAMILIES / "configs"
ROUNDS = ("results", "results-round2", "results-v0.26", "results-v0.26-compiled", "results-v0.22-compiled")
TOL = 0.02
H200_BYTES = 150122463232


def _runs(folder: str) -> list[dict[str, Any]]:
    path = FAMILIES / folder / "runs.jsonl"
    if not path.is_file():
        return []
    runs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [{**r, "round": folder} for r in runs]


def _log(run: dict[str, Any]) -> str:
    return (FAMILIES / run["round"] / "logs" / Path(run["log"]).name).read_text(errors="replace")


def _num(pat: str, text: str) -> float | None:
    m = re.search(pat, text)
    return float(m.group(1).replace(",", "")) if m else None


def _started(run: dict[str, Any]) -> bool:
    return run.get("status") == "ok" and "GPU KV cache size" in _log(run)


def _total_gib(folder: str) -> float:
    dev = FAMILIES / folder / "device.json"
    data = json.loads(dev.read_text()) if dev.is_file() else {}
    return float(data.get("gpu_total_bytes", H200_BYTES)) / GIB


RUNS = [r for folder in ROUNDS for r in _runs(folder)]
STARTED = [r for r in RUNS if _started(r)]
FAILED = [r for r in RUNS if not _started(r)]
CATALOG = load_catalog()
pytestmark = pytest.mark.skipif(not RUNS, reason="no family runs committed yet")


def _id(run: dict[str, Any]) -> str:
    return f"{run['round']}-run{run['run']}-{run['model']}"


def _plan(run: dict[str, Any], kv_gib: float | None) -> Any:
    version = re.search(r"Initializing a V1 LLM engine \(v([\d.]+)\)", _log(run))
    req = PlanRequest(
        model=str(CONFIGS / run["model"]),
        machine="h200",
        engine="venv",
        vllm_version=version.group(1) if version else "0.22.0",
        vllm_args=shlex.split(run["flags"]),
        kv_cache_memory_gib=kv_gib,
        total_gib=_total_gib(run["round"]),
    )
    return make_plan(req, catalog=CATALOG, raise_if_impossible=False)


def test_the_evidence_covers_the_families_and_two_releases() -> None:
    facts = [_plan(r, None).facts for r in STARTED]
    kinds = {f.kind for f in facts}
    assert len(STARTED) >= 30, [r["model"] for r in STARTED]
    assert any("MLA" in k for k in kinds) and any("sliding" in k for k in kinds)
    assert any("hybrid" in k for k in kinds) and any(k == "dense" for k in kinds)
    assert any("MoE" in k for k in kinds)
    quant = {f.quantization.scheme for f in facts if f.quantization}
    assert {"mxfp4", "nvfp4"} <= quant
    versions = {re.search(r"LLM engine \(v([\d.]+)\)", _log(r)).group(1) for r in STARTED}  # type: ignore[union-attr]
    assert {"0.22.0", "0.26.0"} <= versions


@pytest.mark.parametrize("run", STARTED, ids=_id)
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


@pytest.mark.parametrize("run", STARTED, ids=_id)
def test_the_plan_assumes_the_runner_vllm_logged(run: dict[str, Any]) -> None:
    """vLLM logs "Using V2 Model Runner" when it takes V2 (0.22.0 and 0.26.0 gpu_worker.py)."""
    plan = _plan(run, None)
    assert uses_v2_model_runner(plan.facts, plan.settings) is ("Using V2 Model Runner" in _log(run))


@pytest.mark.parametrize("run", FAILED, ids=_id)
def test_failed_starts_are_caught_by_the_lint(run: dict[str, Any]) -> None:
    error = re.search(r"(AssertionError|ValueError|RuntimeError|KeyError): (.+)", _log(run))
    assert error, "a failed start must leave vLLM's error in its log"
    plan = _plan(run, None)
    assert plan.errors or not plan.memory.fits, error.group(0)


COMPILED = [r for r in STARTED if "--enforce-eager" not in r["flags"]]


@pytest.mark.parametrize("run", COMPILED, ids=_id)
def test_the_cuda_graph_estimate_is_vllms(run: dict[str, Any]) -> None:
    """The graphs vLLM profiles (counts and largest sizes, exact) and the estimate it subtracts from the
    KV budget (within 0.25 GiB); on the V2 runner there is neither line and the plan subtracts nothing."""
    text, plan = _log(run), _plan(run, None)
    estimate = _num(r"Estimated CUDA graph memory: ([\d.]+) GiB total", text)
    if plan.memory.overhead.model_runner == "V2":
        assert estimate is None and plan.memory.overhead.cuda_graph_gib == 0
        return
    assert estimate is not None
    sizes, full = cudagraph_captures(plan.facts, plan.settings)
    seen = re.search(r"PIECEWISE=(\d+) \(largest=(\d+)\), FULL=(\d+) \(largest=(\d+)\)", text)
    assert seen and tuple(map(int, seen.groups())) == (len(sizes), sizes[-1], len(full), full[-1])
    assert plan.memory.overhead.cuda_graph_gib == pytest.approx(estimate, abs=0.25)


def test_the_compiled_round_covers_both_runners() -> None:
    runners = {_plan(r, None).memory.overhead.model_runner for r in COMPILED}
    assert len(COMPILED) >= 5 and runners == {"V1", "V2"}


@pytest.mark.parametrize("run", COMPILED, ids=_id)
def test_the_profile_peak_is_vllms(run: dict[str, Any]) -> None:
    """vLLM's torch peak of the profile run (its DEBUG line) against the plan's: the larger of the forward
    pass and the sampler on top of what the forward left held (plan/memory.py HELD_BY_THE_FORWARD), within
    0.25 GiB; the sum of the two (the rule before round 5) misses gpt-oss-120b and the dense rows by 0.9+."""
    peak = _num(r"torch peak memory increase: ([\d.]+) ?GiB", _log(run))
    assert peak is not None
    o = _plan(run, None).memory.overhead
    assert max(o.activation_gib, o.sampler_gib + o.held_gib) == pytest.approx(peak, abs=0.25)


def test_the_v022_compiled_round_puts_dense_models_on_v1() -> None:
    rows = [r for r in COMPILED if r["round"] == "results-v0.22-compiled"]
    runners = {r["model"]: _plan(r, None).memory.overhead.model_runner for r in rows}
    assert len(rows) == 7 and set(runners.values()) == {"V1"}
    assert {"llama-3.1-8b-instruct", "mistral-small-24b-instruct"} <= set(runners)
