"""The CUDA-graph flags a user gives vLLM move the estimate the plan subtracts (plan/cudagraphs.py,
plan/memory.py cudagraph_captures); the sizes follow vLLM 0.26.0 config/vllm.py."""

from __future__ import annotations

import json

import pytest

from llmdeck.catalog.entries import load_catalog
from llmdeck.errors import UsageError
from llmdeck.plan.memory import cudagraph_capture_sizes, cudagraph_captures
from llmdeck.plan.planner import PlanRequest, make_plan
from repo_paths import ROOT

QWEN3_MOE = ROOT / "evidence" / "plan" / "families" / "configs" / "qwen3-30b-a3b"
GPT_OSS = ROOT / "evidence" / "plan" / "families" / "configs" / "gpt-oss-120b"


def plan(args: list[str], model: str = str(QWEN3_MOE)) -> object:
    req = PlanRequest(model=model, machine="h200", engine="venv", vllm_version="0.26.0", vllm_args=args)
    return make_plan(req, catalog=load_catalog(), raise_if_impossible=False)


def graphs(args: list[str], model: str = str(QWEN3_MOE)) -> tuple[list[int], list[int]]:
    p = plan(args, model)
    return cudagraph_captures(p.facts, p.settings)  # type: ignore[attr-defined]


def test_vllms_default_list_and_the_gpt_oss_cap() -> None:
    sizes, full = graphs([])
    assert (len(sizes), sizes[-1], len(full)) == (51, 512, 51)  # round 4 row 1 logged 51 / 51, 512
    sizes, full = graphs([], str(GPT_OSS))
    assert (len(sizes), sizes[-1], len(full)) == (83, 1024, 83)  # round 4 row 2
    sizes, full = graphs(["--max-num-seqs", "8", "--max-num-batched-tokens", "4096"])
    assert (sizes, full) == ([1, 2, 4, 8, 16], [1, 2, 4, 8])  # seed 000's flags: 5 / 4 as logged
    assert cudagraph_capture_sizes(1024, 200)[-1] == 200  # max_num_batched_tokens itself is captured
    # gpt-oss's 1024 is set as an explicit largest size: vLLM's 2 x max_num_seqs cap does not apply
    # (0.22.0 models/config.py:164-170 then config/vllm.py:1646-1661); full graphs stop at max_num_seqs
    sizes, full = graphs(["--max-num-seqs", "64"], str(GPT_OSS))
    assert (len(sizes), sizes[-1], full[-1]) == (83, 1024, 64)


@pytest.mark.parametrize(
    "args",
    [["--enforce-eager"], ["-O0"], ["--compilation-config", json.dumps({"cudagraph_mode": "NONE"})]],
)
def test_no_graphs_no_estimate(args: list[str]) -> None:
    assert graphs(args) == ([], [])
    assert plan(args).memory.overhead.cuda_graph_gib == 0  # type: ignore[attr-defined]


def test_the_users_sizes_and_largest_size_are_read() -> None:
    assert graphs(["--cudagraph-capture-sizes", "1", "2", "4", "8"])[0] == [1, 2, 4, 8]
    assert graphs(["-cc", json.dumps({"cudagraph_capture_sizes": [4, 1, 4]})])[0] == [1, 4]
    assert graphs(["--max-cudagraph-capture-size", "64"])[0][-1] == 64
    assert graphs(["-cc", json.dumps({"max_cudagraph_capture_size": 64})], str(GPT_OSS))[0][-1] == 64
    fewer = plan(["--max-cudagraph-capture-size", "64"]).memory  # type: ignore[attr-defined]
    default = plan([]).memory  # type: ignore[attr-defined]
    assert fewer.overhead.cuda_graph_gib < default.overhead.cuda_graph_gib
    assert fewer.capacity.kv_cache_tokens > default.capacity.kv_cache_tokens


@pytest.mark.parametrize("args", [["--cudagraph-capture-sizes", "x"], ["--max-cudagraph-capture-size", "0"]])
def test_a_bad_size_is_a_usage_error(args: list[str]) -> None:
    with pytest.raises(UsageError) as exc:
        plan(args)
    assert exc.value.exit_code == 2 and "whole numbers" in str(exc.value)
