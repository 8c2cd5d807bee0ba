"""Per-GPU memory under tensor/pipeline parallelism, on real public configs, against vLLM 0.32's rules
(cited in plan/parallel.py): KV heads per GPU, weight shards, pipeline stages and the smallest-stage
KV block count every worker takes."""

from __future__ import annotations

import json

import pytest

from llmdeck.plan.kvlayout import kv_layout
from llmdeck.plan.machine import dgx_spark, h200
from llmdeck.plan.memory import plan_memory
from llmdeck.plan.modelinfo import ModelFacts, facts_from_config, facts_from_dir
from llmdeck.plan.parallel import plan_stages, pp_partition
from llmdeck.plan.settings import ServeSettings
from llmdeck.util.units import GIB
from repo_paths import ROOT

FAMILIES = ROOT / "evidence" / "plan" / "families" / "configs"
SHARED = ROOT.parent / "shared" / "fixtures" / "configs"


def facts(name: str) -> ModelFacts:
    return facts_from_dir(FAMILIES / name)


def settings(tp: int = 1, pp: int = 1, **kw: object) -> ServeSettings:
    return ServeSettings(
        max_model_len=8192,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        vllm_version="0.32.0",
        **kw,  # type: ignore[arg-type]
    )


def test_pp_partition_is_get_pp_indices() -> None:
    # vllm/distributed/utils.py get_pp_indices: remainder over all but the last stage, middle first
    assert pp_partition(32, 2) == [16, 16]
    assert pp_partition(47, 2) == [24, 23]
    assert pp_partition(30, 4) == [7, 8, 8, 7]
    assert pp_partition(26, 3) == [9, 9, 8]
    assert sum(pp_partition(61, 8)) == 61


@pytest.mark.parametrize("pp", [29, 10_000_000, 99_999_999_999])
def test_more_stages_than_layers_is_a_plan_error(pp: int) -> None:
    """Qwen3-0.6B has 28 layers: -pp 29 had divided by zero, 10^7 hung, 10^11 ran out of memory."""
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.errors import PlanError
    from llmdeck.plan.planner import PlanRequest, make_plan

    req = PlanRequest(model="Qwen3-0.6B", machine="h200", vllm_args=["-pp", str(pp)])
    with pytest.raises(PlanError, match="more than the model's 28 layers"):
        make_plan(req, catalog=load_catalog(), machine=h200(), raise_if_impossible=False)


def test_kv_heads_shard_then_replicate() -> None:
    llama = facts("llama-3.1-8b-instruct")  # 32 heads, 8 KV heads
    for tp, kv in [(1, 8), (2, 4), (8, 1), (16, 1)]:
        par = plan_stages(llama, settings(tp), kv_layout(llama, settings(tp)))
        assert par.kv_heads_per_gpu == kv
        assert par.kv_heads_replicated == (tp > 8)
        lay = kv_layout(llama, settings(tp))
        assert lay.attn_bytes_per_token_per_layer == 2 * kv * 128 * 2  # K and V, bf16
    mla = facts("deepseek-v2-lite-chat")  # MLA: the latent cache is whole on every GPU
    one, two = kv_layout(mla, settings(1)), kv_layout(mla, settings(2))
    assert one.bytes_per_block == two.bytes_per_block == 16 * 27 * (512 + 64) * 2


def test_tensor_parallel_weights_per_gpu() -> None:
    llama = facts("llama-3.1-8b-instruct")
    total = llama.weight_bytes()
    rotary = llama.rotary_cache_bytes()
    (st,) = plan_stages(llama, settings(2), kv_layout(llama, settings(2))).stages
    # half of everything but the replicated norms (and the rotary cache, whole on each GPU)
    assert st.weights_gib * GIB == pytest.approx((total - rotary) / 2 + rotary, rel=1e-4)
    (st8,) = plan_stages(llama, settings(8), kv_layout(llama, settings(8))).stages
    assert st8.weights_gib * GIB > (total - rotary) / 8 + rotary  # KV projections: 1 head of 8 each, not 1/8
    (st16,) = plan_stages(llama, settings(16), kv_layout(llama, settings(16))).stages
    kv_proj_copy = 32 * 2 * 4096 * 128 * 2  # each of 16 GPUs holds one whole KV head's k/v projection
    ideal = (total - rotary) / 16 + rotary
    assert st16.weights_gib * GIB == pytest.approx(
        ideal + kv_proj_copy - 32 * 2 * 4096 * 128 * 8 * 2 / 16, rel=1e-3
    )


def test_pipeline_stages_hold_embedding_and_head() -> None:
    llama = facts("llama-3.1-8b-instruct")  # untied: embedding on stage 0, lm_head on the last
    s = settings(pp=2)
    par = plan_stages(llama, s, kv_layout(llama, s))
    first, last = par.stages
    assert (first.layers, first.embedding, first.lm_head) == ([0, 16], True, False)
    assert (last.layers, last.embedding, last.lm_head) == ([16, 32], False, True)
    rotary = llama.rotary_cache_bytes()
    both = (first.weights_gib + last.weights_gib) * GIB - 2 * rotary
    assert both == pytest.approx(llama.weight_bytes() - rotary, rel=1e-4)  # every weight on one stage
    tied = facts("gemma-3-1b-it")  # tied: the last stage keeps its own copy of the embedding
    par = plan_stages(tied, settings(pp=2), kv_layout(tied, settings(pp=2)))
    assert [x.embedding for x in par.stages] == [True, True]
    # a stage's block covers its own layers only (vllm kv_cache_utils.py _project_kv_cache_groups_to_worker)
    assert first.kv_bytes_per_block == 16 * 16 * (2 * 8 * 128 * 2)


def test_pipeline_blocks_of_a_hybrid_follow_the_largest_group() -> None:
    f = facts("gpt-oss-120b")  # sliding/full alternate, groups of 18 layers
    s = settings(pp=3, max_num_batched_tokens=2048)
    par = plan_stages(f, s, kv_layout(f, s))
    assert [x.layers for x in par.stages] == [[0, 12], [12, 24], [24, 36]]
    assert {x.kv_bytes_per_block for x in par.stages} == {16 * 2048 * 6}  # 6 of each kind a stage
    nxt = facts("qwen3-next-80b-a3b")  # 36 GDN + 12 full layers, groups of 12: stage 0 holds one whole group
    s = settings(pp=2)
    lay = kv_layout(nxt, s)
    assert [x.kv_bytes_per_block for x in plan_stages(nxt, s, lay).stages] == [lay.bytes_per_block] * 2


def test_memory_plan_takes_the_smallest_stage() -> None:
    f = facts("llama-3.1-8b-instruct")
    one = plan_memory(f, settings(), h200())
    assert one.parallel is None  # one GPU: the single-GPU path, unchanged
    pp = plan_memory(f, settings(pp=2), h200())
    assert pp.parallel is not None
    blocks = [x.num_blocks for x in pp.parallel.stages]
    assert pp.capacity.num_blocks == min(blocks)
    assert (
        pp.capacity.kv_cache_tokens > 1.9 * one.capacity.kv_cache_tokens
    )  # half the layers, half the weights
    tp = plan_memory(f, settings(tp=2), dgx_spark())
    assert tp.weights_gib == pytest.approx(tp.parallel.stages[0].weights_gib) if tp.parallel else False


def test_qwen3_moe_tp2_on_two_sparks() -> None:

    cfg = json.loads((SHARED / "Qwen3-30B-A3B.config.json").read_text())
    f = facts_from_config(cfg, source="shared/fixtures/configs/Qwen3-30B-A3B.config.json")
    s = settings(tp=2, nodes=2, gpus_per_node=1, gpu_memory_utilization=0.85)
    mem = plan_memory(f, s, dgx_spark())
    assert mem.parallel is not None and mem.parallel.kv_heads_per_gpu == 2
    assert mem.weights_gib == pytest.approx(f.weight_bytes() / 2 / GIB, rel=0.01)  # experts split by TP
    assert mem.layout.attn_bytes_per_token_per_layer == 2 * 2 * 128 * 2


def test_two_node_plan_renders_ray_then_vllm_on_it() -> None:
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.plan.planner import PlanRequest, make_plan

    req = PlanRequest(model="Qwen3-30B-A3B", machine="dgx-spark", nodes=2, vllm_args=["-tp", "2"])
    p = make_plan(req, catalog=load_catalog(), machine=dgx_spark(), raise_if_impossible=False)
    assert p.commands["cluster_up"] == [
        "llmdeck",
        "cluster",
        "up",
        "--head",
        "HEAD",
        "--worker",
        "WORKER1",
        "--netcheck",
        "nccl",
    ]
    serve = p.commands["up_on_cluster"]
    assert serve[:3] == ["llmdeck", "up", "--model"] and "--ray-cluster" in serve
    assert serve[serve.index("--tensor-parallel-size") + 1] == "2"
    assert (
        "cluster_up"
        not in make_plan(
            req.model_copy(update={"nodes": 1}), machine=dgx_spark(), raise_if_impossible=False
        ).commands
    )
