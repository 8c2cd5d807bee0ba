"""Which model runner vLLM picks, release by release (plan/runner.py), and what it does to the plan.

The table was read off the released wheels 0.22.0-0.34.0 (vllm/config/vllm.py); each case below is one
line of it. The runner decides the dummy sampler's share of the start-up profile: at vLLM's default 1,024
sequences a V1 start of Mistral-Small (vocabulary 131,072) holds 1.88 GiB there, a V2 start 0.50 GiB.
"""

from __future__ import annotations

import pytest

from llmdeck.plan.machine import GIB
from llmdeck.plan.memory import sampler_bytes
from llmdeck.plan.modelinfo import ModelFacts, facts_from_dir
from llmdeck.plan.runner import uses_v2_model_runner
from llmdeck.plan.settings import ServeSettings
from repo_paths import ROOT

CONFIGS = ROOT / "evidence" / "plan" / "families" / "configs"


def facts(name: str) -> ModelFacts:
    return facts_from_dir(CONFIGS / name)


def settings(version: str | None, **kw: object) -> ServeSettings:
    base: dict[str, object] = {"max_model_len": 32768, "max_num_seqs": 1024, "vllm_version": version}
    return ServeSettings(**{**base, **kw})  # type: ignore[arg-type]


# (model folder, vLLM version, V2?)
CASES = [
    ("mistral-small-24b-instruct", "0.22.0", False),  # only Qwen3ForCausalLM in 0.22
    ("mistral-small-24b-instruct", "0.23.0", True),  # Llama, Mistral, Qwen3 listed
    ("llama-3.1-70b-instruct-fp8", "0.23.0", False),  # quantized: not before 0.24
    ("llama-3.1-70b-instruct-fp8", "0.24.0", True),
    ("gpt-oss-120b", "0.24.0", False),  # MoE, not listed
    ("gpt-oss-120b", "0.28.0", False),
    ("gpt-oss-120b", "0.29.0", True),  # every model from 0.29
    ("deepseek-v2-lite-chat", "0.23.0", False),
    ("deepseek-v2-lite-chat", "0.24.0", True),  # DeepseekV2ForCausalLM listed, MoE or not
    ("gemma-3-4b-it", "0.24.0", False),
    ("gemma-3-4b-it", "0.25.0", True),  # every non-MoE model from 0.25
    ("nemotron-nano-9b-v2", "0.28.0", False),  # hybrids stay on V1 until 0.29
    ("nemotron-nano-9b-v2", "0.29.0", True),
    ("nemotron-nano-9b-v2", "0.34.0", True),
    ("granite-4.0-h-tiny", "0.26.0", False),
]


@pytest.mark.parametrize(("model", "version", "v2"), CASES, ids=lambda x: str(x))
def test_runner_by_release(model: str, version: str, v2: bool) -> None:
    assert uses_v2_model_runner(facts(model), settings(version)) is v2


def test_mamba_cache_mode_all_goes_back_to_v1_in_030_and_031_only() -> None:
    f = facts("nemotron-nano-9b-v2")
    for version, v2 in [("0.29.0", True), ("0.30.0", False), ("0.31.0", False)]:
        s = settings(version, enable_prefix_caching=True, mamba_prefix_mode="all")
        assert uses_v2_model_runner(f, s) is v2, version
    assert uses_v2_model_runner(f, settings("0.30.0", enable_prefix_caching=False))  # mode 'none'


def test_an_unknown_version_follows_the_newest_checked() -> None:
    assert uses_v2_model_runner(facts("gpt-oss-120b"), settings(None))
    assert uses_v2_model_runner(facts("gpt-oss-120b"), settings("latest"))


def test_the_sampler_share_follows_the_runner() -> None:
    """Mistral-Small at 1,024 sequences: 14 B an element and the Triton top-k buffer on V1 (0.22), one
    fp32 copy on V2 (0.26)."""
    f = facts("mistral-small-24b-instruct")
    v1, v2 = sampler_bytes(f, settings("0.22.0")), sampler_bytes(f, settings("0.26.0"))
    assert v1 == 1024 * 131072 * 14 + 132 * 131072 * 4
    assert v2 == 1024 * 131072 * 4
    assert (v1 - v2) / GIB == pytest.approx(1.32, abs=0.01)


def test_sliding_window_holds_the_batches_in_flight_from_026() -> None:
    """vLLM 0.26 reserves a sliding-window group `window - 1 + batches x max_num_batched_tokens` tokens
    (async scheduling overlaps two steps). gemma-3-4b on the H200 (results-v0.26 run 3, V2 runner,
    65,536 context, 1,024 sequences): vLLM printed 2,365,288 KV tokens; one batch would give ~3.3 M."""
    from llmdeck.plan.kvlayout import kv_layout
    from llmdeck.plan.runner import max_in_flight_tokens

    f = facts("gemma-3-4b-it")
    old, new = settings("0.25.1", max_model_len=65536), settings("0.26.0", max_model_len=65536)
    assert max_in_flight_tokens(f, old) == 8192 and max_in_flight_tokens(f, new) == 2 * 8192
    off = settings("0.26.0", max_model_len=65536, async_scheduling=False)
    assert max_in_flight_tokens(f, off) == 8192
    pp2 = settings("0.26.0", max_model_len=65536, pipeline_parallel_size=2)
    assert max_in_flight_tokens(f, pp2) == 3 * 8192  # V2: one more batch than the stages
    v1_pp2 = settings("0.26.0", pipeline_parallel_size=2)
    assert max_in_flight_tokens(facts("gpt-oss-120b"), v1_pp2) == 2 * 8192  # V1: one per stage
    sliding = [g for g in kv_layout(f, new).groups if g.kind == "sliding"]
    assert sliding and sliding[0].blocks_per_request(65536, 2 * 8192, 0) == -(-(1023 + 16384) // 16) + 1


@pytest.mark.parametrize(("flags", "on"), [([], True), (["--no-async-scheduling"], False)])
def test_async_scheduling_is_read_from_the_flags(flags: list[str], on: bool) -> None:
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.plan.planner import PlanRequest, make_plan

    req = PlanRequest(
        model=str(CONFIGS / "gemma-3-4b-it"), machine="h200", engine="venv", vllm_version="0.26.0",
        vllm_args=["--max-model-len", "65536", *flags],
    )  # fmt: skip
    plan = make_plan(req, catalog=load_catalog(), raise_if_impossible=False)
    assert plan.settings.async_scheduling is on
    assert plan.memory.layout.in_flight_tokens == (2 if on else 1) * 8192


def test_ngram_speculation_leaves_async_scheduling_off() -> None:
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.plan.planner import PlanRequest, make_plan

    spec = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
    req = PlanRequest(
        model=str(CONFIGS / "gemma-3-4b-it"), machine="h200", engine="venv", vllm_version="0.26.0",
        vllm_args=["--max-model-len", "65536", "--speculative-config", spec],
    )  # fmt: skip
    assert (
        make_plan(req, catalog=load_catalog(), raise_if_impossible=False).settings.async_scheduling is False
    )


@pytest.mark.parametrize(
    ("method", "version", "on"),
    [
        ("ngram", "0.26.0", False),
        ("draft_model", "0.27.0", False),
        ("draft_model", "0.28.0", True),
        ("ngram", "0.31.0", False),
        ("ngram", "0.33.0", True),  # off only on the V1 model runner, which no model takes there
        ("ngram", "0.34.0", True),
        ("eagle3", "0.22.0", True),
    ],
)
def test_speculation_turns_async_scheduling_off_as_each_release_does(
    method: str, version: str, on: bool
) -> None:
    """Each wheel's VllmConfig.__post_init__: the methods under which async scheduling stays off by
    default shrink (draft_model from 0.28, V1 runner only from 0.33, none from 0.34)."""
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.plan.planner import PlanRequest, make_plan

    spec = f'{{"method": "{method}", "num_speculative_tokens": 3, "model": "x"}}'
    req = PlanRequest(
        model=str(CONFIGS / "gemma-3-4b-it"), machine="h200", engine="venv", vllm_version=version,
        vllm_args=["--max-model-len", "65536", "--speculative-config", spec],
    )  # fmt: skip
    assert make_plan(req, catalog=load_catalog(), raise_if_impossible=False).settings.async_scheduling is on
