"""The memory plan, computed the way vLLM computes it at start-up.

Two halves:

1. **KV math (exact).** Given the bytes vLLM makes available for the KV cache, the block size,
   groups, block count, KV-cache tokens and maximum concurrency follow vLLM's own code for every
   layer kind (full, MLA, sliding window, chunked local, Mamba/GDN): see ``kvspec.py`` and
   ``kvlayout.py`` for the source lines followed.

2. **Available KV memory (modelled).** vLLM 0.22 ``gpu_worker.determine_available_memory``:
   ``available = ceil(total * utilization) - weights - transient_peak - non_torch -
   cuda_graph_estimate``. The non-weight terms come from profiling and cannot be read from a
   config; llmdeck models each with an explicit term (``OverheadModel``) calibrated on the real
   vLLM 0.22.0 H200 logs in ``shared/fixtures/vllm-0.22.0-h200/``. Pass a known budget with
   ``kv_cache_memory_gib`` (``--kv-cache-memory-gib``) to skip the model entirely.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from llmdeck.plan.kvlayout import kv_layout
from llmdeck.plan.kvspec import KERNEL_BLOCK_ALIGN, KVLayout, cdiv, kv_dtype_bytes
from llmdeck.plan.machine import MachineProfile
from llmdeck.plan.modelinfo import ModelFacts
from llmdeck.plan.parallel import ParallelPlan, plan_stages
from llmdeck.plan.params import mxfp4_kernel_extra_bytes
from llmdeck.plan.runner import uses_v2_model_runner
from llmdeck.plan.settings import DEFAULT_GPU_MEMORY_UTILIZATION, ServeSettings
from llmdeck.util.units import GIB, MIB

__all__ = ["DEFAULT_GPU_MEMORY_UTILIZATION", "KERNEL_BLOCK_ALIGN", "KVLayout", "MemoryPlan", "ServeSettings"]
__all__ += ["cdiv", "kv_capacity", "kv_dtype_bytes", "kv_layout", "plan_memory"]


class OverheadModel(BaseModel):
    """Non-weight memory vLLM subtracts before the KV cache (GiB); each term is documented.

    * ``non_torch``: memory the process gains outside PyTorch after the start-up snapshot
      (cuBLAS/cuDNN workspaces, attention-backend buffers, NCCL); a constant, larger on unified
      memory where host-side growth counts as well.
    * ``activation``: the transient peak of the profiling forward pass over
      ``max_num_batched_tokens`` tokens: ``tokens * 2 B * (8*hidden + ffn_per_token)`` where
      ``ffn_per_token`` is ``2*intermediate_size`` (dense) or ``top_k * (3*moe_intermediate +
      hidden)`` (MoE: fused-MoE intermediate caches), plus for Gated-DeltaNet hybrids the fp32
      chunked-prefill scratch ``tokens * 6 B * nv * (dk + dv)`` (1.5 fp32 copies) and chunk states
      ``tokens/64 * nv * dk * dv * 4 B`` (and a constant when compiled); for MLA models the
      multi-head prefill's q, k, v, kv_b_proj output and attention output per head.
    * ``sampler``: the dummy sampler pass over ``max_num_seqs`` rows of the vocabulary. The V2 model
      runner (which models run on it depends on the vLLM release: plan/runner.py) keeps one fp32 logits
      row per sequence: ``max_num_seqs * vocab * 4 B``. The V1 runner (every other model) warms the
      PyTorch-native sampler too, whose peak holds the bf16 logits, their fp32 copy, the softmax
      probabilities and the exponential noise at once (14 B an element) plus the Triton top-k/top-p
      buffer (a row per SM): see :func:`sampler_bytes`.
    * ``cuda_graph``: vLLM ≥ 0.21 subtracts its CUDA-graph estimate on the V1 model runner, whatever
      the model (gpu_worker.py determine_available_memory calls the runner's
      profile_cudagraph_memory; the V2 runner's returns 0; see :func:`cudagraph_estimate_bytes`); zero
      with ``--enforce-eager``. (The plan used to apply it to hybrids only, which left out every other V1
      model in compiled mode: Llama and Mistral on 0.22, the MoEs on every release.)

    Calibration (vLLM 0.22.0, H200): 11 eager runs of Qwen3-0.6B, Qwen3-30B-A3B and Qwen3.6-35B-A3B
    at two contexts and two utilizations (evidence/plan/results: every predicted KV size within 1%);
    compiled: Qwen3-0.6B, defaults, 8192 context → log 126.35 GiB available; Qwen3.6-35B-A3B with
    seed 000's flags → 52.73 GiB (see tests/unit/test_plan_memory.py); vLLM 0.26.0 compiled at 1,024
    sequences, two MoEs, a dense V2 model, two hybrids (evidence/plan/families/results-v0.26-compiled).
    """

    non_torch_gib: float
    activation_gib: float
    sampler_gib: float
    cuda_graph_gib: float
    model_runner: str = Field("V1", description="the GPU model runner vLLM picks: V1 | V2 (plan/runner.py)")
    held_gib: float = Field(
        0.0,
        description="forward-pass memory still held while the dummy sampler runs (see HELD_BY_THE_FORWARD)",
    )

    @property
    def total_gib(self) -> float:
        """The forward pass and the sampler run one after the other (0.22.0 gpu_model_runner.py:6164-6175
        profile_run: the dummy forward's intermediates are freed before the dummy sampler run), so the
        profile's peak is the larger of the forward pass and the sampler on top of what the forward
        left held (``held_gib``)."""
        forward_and_sampler = max(self.activation_gib, self.sampler_gib + self.held_gib)
        return self.non_torch_gib + forward_and_sampler + self.cuda_graph_gib


# HELD_BY_THE_FORWARD: what of the dummy forward pass is still allocated when the dummy sampler runs. At
# vLLM's default 1,024 sequences (the sampler at 1.8-2.8 GiB) the torch peak sat 0.09-0.13 GiB above the
# sampler for the dense models and gpt-oss-120b (0.22.0: Llama-3.1-8B 1.89, Mistral-Small 1.94, gpt-oss
# 2.87; 0.26.0: gpt-oss 2.87), but 0.58 GiB above it for Qwen3-30B-A3B (0.26.0: 2.68 against a sampler
# of 2.10) and 1.45 above it for the hybrid Nemotron-3-Nano (3.26 against 1.81); evidence/plan/families/
# results-v0.22-compiled and results-v0.26-compiled. A fused-MoE layer keeps its workspaces between calls
# (vLLM's workspace manager grows them and never frees them): the plan's fused-MoE caches, top_k x
# (3 x moe_intermediate + hidden) a token, are 0.53 GiB on Qwen3-30B-A3B at 8,192 tokens. gpt-oss's MXFP4
# experts run on other kernels and kept nothing. Compiled, the hybrid kept about its whole forward (1.45
# of 1.51 GiB: the compiled Mamba path's buffers too); eager at 1,024 sequences (results-round2, 1.31 GiB
# less KV memory than at 8) about its fused-MoE workspace (0.60 against 0.76). Most rounds ran at
# --max-num-seqs 8, where the sampler is too small for any of this to show.
HELD_NO_WORKSPACE_SCHEMES = frozenset({"mxfp4"})
# Non-torch memory on a discrete GPU: ~0.25 GiB in eager mode; torch.compile + CUDA-graph mode keeps
# ~0.1 GiB more (Triton/Inductor runtime). Fitted on 11 eager H200 runs (evidence/plan/results) and the
# two compiled fixture runs (shared/fixtures/vllm-0.22.0-h200).
NON_TORCH_GIB = 0.25
NON_TORCH_COMPILED_GIB = 0.35
# Compiled hybrids (Gated DeltaNet) keep more during profiling than the eager formula: vLLM 0.22 logs
# of Qwen3.6-35B-A3B with seed 000's flags show 1.41 GiB of overhead at max_num_batched_tokens 4096
# (shared/fixtures/vllm-0.22.0-h200) and 1.39 GiB at 2048 (evidence/lifecycle/results/logs; the eager
# slope would give 0.33 GiB less): a constant for the compiled GDN path, the middle of the two.
COMPILED_HYBRID_EXTRA_GIB = 0.43
# On unified memory (GB10) vLLM's "free memory" is MemAvailable, so host-side growth after the
# start-up snapshot (Python heap, torch.compile, tokenizer) counts too. Calibrated on seed 004
# §5.1 (Qwen3.6-35B-A3B-FP8, 74.67 GiB KV) and §5.3 (Qwen3.5-35B-A3B, 3.91 GiB): ±0.6 GiB.
NON_TORCH_UNIFIED_GIB = 2.5
# Live bf16 intermediates per token at the activation peak, in elements: ~8 x hidden (residual,
# normed input, attention in/out) plus the MLP's: dense gate_up + act output (2 x intermediate at
# the peak), MoE the fused-MoE caches of the top-k experts (top_k x (3 x moe_intermediate + hidden)).
# Fitted on the eager H200 runs: Qwen3-0.6B 0.46 GiB, Qwen3-30B-A3B 1.06 GiB of overhead at 8192 tokens.
DENSE_FFN_FACTOR = 2
MOE_FFN_FACTOR = 1


# The V1 runner's dummy sampler (vllm 0.22.0 v1/worker/gpu_model_runner.py:5910-5973) calls the
# sampler twice, the second time on forward_native; at its peak these [max_num_seqs, vocab] tensors
# live together: compute_logits' bf16 output (2 B, held by the caller), Sampler.forward's fp32 copy
# (v1/sample/sampler.py:91, 4 B), the softmax probabilities (ops/topk_topp_sampler.py forward_native,
# 4 B) and random_sample's exponential noise (empty_like(probs), 4 B).
V1_SAMPLER_BYTES_PER_ELEMENT = 2 + 4 + 4 + 4
# apply_top_k_top_p_triton (ops/topk_topp_triton.py:1019-1026, batches of 8 or more): a cached fp32
# buffer of min(next_pow2(programs), SMs) vocabulary rows; H200 and H100 have 132 SMs.
TRITON_TOPK_BUFFER_ROWS = 132


def sampler_bytes(facts: ModelFacts, s: ServeSettings) -> int:
    """The dummy sampler's transient peak during vLLM's memory profiling (see OverheadModel), on the
    model runner vLLM ``s.vllm_version`` picks (plan/runner.py)."""
    max_num_seqs = s.max_num_seqs
    elements = max_num_seqs * facts.vocab_size
    if uses_v2_model_runner(facts, s):
        return elements * 4
    buffer = min(max_num_seqs, TRITON_TOPK_BUFFER_ROWS) * facts.vocab_size * 4 if max_num_seqs >= 8 else 0
    return elements * V1_SAMPLER_BYTES_PER_ELEMENT + buffer


# vLLM's CUDA-graph estimate (V1 runner, profile_cudagraph_memory in 0.22.0 and 0.26.0): per cudagraph
# mode it captures the largest and the second-largest graph into one shared pool and takes
# max(first captures) + (n - 1) x the second capture, summed over PIECEWISE and FULL. Fitted on the
# DEBUG lines of round 4 (evidence/plan/families/results-v0.26-compiled: Qwen3-30B-A3B, gpt-oss-120b,
# Qwen3.6-35B-A3B, Nemotron-3-Nano, FlashAttention 3 on the H200): a piecewise first capture of
# 80 MiB + 0.1 MiB a token (82 at 16 tokens, 102-110 at 512, 182 at 1024), a full one of 0.5 MiB a token
# (256-258 at 512), then 6 MiB a piecewise graph and 2 MiB a full one. Four estimates of 0.12-0.66 GiB
# come out within 0.02 GiB, gpt-oss-120b's 0.23 GiB high (its full first capture fit in the piecewise
# pool: 2 MiB; its piecewise graphs took 4 MiB).
PIECEWISE_FIRST_BASE_BYTES = 80 * MIB
PIECEWISE_FIRST_BYTES_PER_TOKEN = MIB // 10
FULL_FIRST_BYTES_PER_TOKEN = MIB // 2
FULL_FIRST_BYTES_PER_TOKEN_MLA = MIB  # DeepSeek-V2-Lite: 516 MiB at 512 (0.22.0, results-v0.22-compiled)
PIECEWISE_GRAPH_BYTES = 6 * MIB  # fused-MoE models (Qwen3-30B-A3B, Nemotron, Qwen3.6 on 0.22.0 and 0.26.0)
PIECEWISE_GRAPH_BYTES_OTHER = 4 * MIB  # dense Llama, Mistral (0.22.0) and gpt-oss's MXFP4 experts (both)
FULL_GRAPH_BYTES = 2 * MIB
# Architectures whose vLLM model config sets the largest capture size to 1024 when the user set no sizes
# (model_executor/models/config.py GptOssForCausalLMConfig, 0.22.0-0.33.0: `max_cudagraph_capture_size =
# 1024`, an explicit value, so config/vllm.py skips its `2 x max_num_seqs` cap for it)
CAPTURE_1024_ARCHITECTURES = frozenset({"GptOssForCausalLM"})


def cudagraph_capture_sizes(
    max_num_seqs: int, max_num_batched_tokens: int, *, largest: int = 512, explicit_max: int | None = None
) -> list[int]:
    """vLLM's default capture list (config/vllm.py): [1, 2, 4] + range(8, 256, 8) + range(256, max+1, 16),
    max = min(the user's largest size, else min(largest, 2 x max_num_seqs x decode length),
    max_num_batched_tokens), plus max_num_batched_tokens itself when it is below that cap."""
    cap = explicit_max if explicit_max is not None else min(largest, 2 * max_num_seqs)
    max_size = min(cap, max_num_batched_tokens)
    sizes = {x for x in [1, 2, 4, *range(8, 256, 8), *range(256, max_size + 1, 16)] if x <= max_size}
    if max_num_batched_tokens <= cap:
        sizes.add(max_num_batched_tokens)
    return sorted(sizes)


def cudagraph_captures(facts: ModelFacts, s: ServeSettings) -> tuple[list[int], list[int]]:
    """The sizes vLLM captures under FULL_AND_PIECEWISE (the default): piecewise graphs at every
    capture size (the user's list, else vLLM's), full decode graphs at the sizes from the decode length
    (1 + speculative tokens) up to max_num_seqs x that (v1/cudagraph_dispatcher.py); vLLM logs them
    as "Profiling CUDA graph memory: PIECEWISE=n (largest=..), FULL=m (largest=..)". None with
    --enforce-eager, cudagraph_mode NONE or -O0."""
    if s.enforce_eager or not s.cudagraphs:
        return [], []
    decode = 1 + s.num_speculative_tokens
    if s.cudagraph_capture_sizes:
        sizes = sorted({x for x in s.cudagraph_capture_sizes if x <= s.max_num_batched_tokens})
    else:
        explicit = s.max_cudagraph_capture_size
        if explicit is None and facts.architecture in CAPTURE_1024_ARCHITECTURES:
            explicit = 1024
        sizes = cudagraph_capture_sizes(
            s.max_num_seqs * decode, s.max_num_batched_tokens, explicit_max=explicit
        )
    return sizes, [x for x in sizes if decode <= x <= s.max_num_seqs * decode]


def cudagraph_estimate_bytes(facts: ModelFacts, s: ServeSettings) -> int:
    """What vLLM's V1 runner subtracts for the graphs of :func:`cudagraph_captures` (0 for none)."""
    sizes, full = cudagraph_captures(facts, s)
    if not sizes:
        return 0
    first = PIECEWISE_FIRST_BASE_BYTES + PIECEWISE_FIRST_BYTES_PER_TOKEN * sizes[-1]
    if full:
        per_token = FULL_FIRST_BYTES_PER_TOKEN_MLA if facts.use_mla else FULL_FIRST_BYTES_PER_TOKEN
        first = max(first, per_token * min(full[-1], 512))
    piecewise = PIECEWISE_GRAPH_BYTES if has_fused_moe(facts) else PIECEWISE_GRAPH_BYTES_OTHER
    return first + (len(sizes) - 1) * piecewise + max(0, len(full) - 1) * FULL_GRAPH_BYTES


def has_fused_moe(facts: ModelFacts) -> bool:
    """Whether the experts run through vLLM's fused-MoE kernels (every MoE but MXFP4 checkpoints)."""
    q = facts.quantization
    return facts.is_moe and (q is None or q.scheme not in HELD_NO_WORKSPACE_SCHEMES)


def estimate_overhead(facts: ModelFacts, s: ServeSettings, *, unified_memory: bool = False) -> OverheadModel:
    tokens = s.max_num_batched_tokens
    h = facts.hidden_size
    tp = max(1, s.tensor_parallel_size)
    if facts.is_moe:
        ffn = MOE_FFN_FACTOR * facts.num_experts_per_tok * (3 * facts.moe_intermediate_size + h)
    else:
        ffn = DENSE_FFN_FACTOR * facts.intermediate_size
    activation = tokens * 2 * (8 * h + ffn) / tp
    held = tokens * 2 * ffn / tp if has_fused_moe(facts) else 0.0
    if facts.use_mla:
        # MLA prefill runs as multi-head attention over the decompressed latent (vllm 0.22.0
        # model_executor/layers/attention/mla_attention.py, forward_mha): per token and head, bf16
        # q and k (qk_nope + qk_rope), kv_b_proj's output (qk_nope + v), v and the output (v)
        qk = facts.qk_nope_head_dim + facts.qk_rope_head_dim
        per_head = 2 * qk + facts.qk_nope_head_dim + 3 * facts.v_head_dim
        activation += tokens * 2 * facts.num_attention_heads * per_head / tp
    if facts.is_hybrid:
        nv, dk, dv = facts.linear_num_value_heads, facts.linear_key_head_dim, facts.linear_value_head_dim
        activation += tokens * 6 * nv * (dk + dv) / tp
        activation += cdiv(tokens, 64) * nv * dk * dv * 4 / tp
        if not s.enforce_eager:
            activation += COMPILED_HYBRID_EXTRA_GIB * GIB
            held = activation  # compiled, a hybrid's whole forward: see HELD_BY_THE_FORWARD
    sampler = sampler_bytes(facts, s)
    v2 = uses_v2_model_runner(facts, s)
    graphs = 0
    if not s.enforce_eager and not v2:  # the V2 runner estimates nothing (profile_cudagraph_memory: 0)
        graphs = cudagraph_estimate_bytes(facts, s)
    if unified_memory:
        non_torch = NON_TORCH_UNIFIED_GIB
    else:
        non_torch = NON_TORCH_GIB if s.enforce_eager else NON_TORCH_COMPILED_GIB
    return OverheadModel(
        non_torch_gib=non_torch,
        activation_gib=activation / GIB,
        sampler_gib=sampler / GIB,
        cuda_graph_gib=graphs / GIB,
        model_runner="V2" if v2 else "V1",
        held_gib=held / GIB,
    )


class KVCapacity(BaseModel):
    """What vLLM prints after ``Available KV cache memory``."""

    available_kv_bytes: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_cache_tokens: int
    max_model_len: int

    @property
    def fits_one_request(self) -> bool:
        return self.max_concurrency >= 1.0


def kv_capacity(layout: KVLayout, available_kv_bytes: int, max_model_len: int) -> KVCapacity:
    num_blocks = max(0, available_kv_bytes) // layout.bytes_per_block
    per_req = layout.blocks_per_request(max_model_len)
    conc = num_blocks / per_req
    return KVCapacity(
        available_kv_bytes=available_kv_bytes,
        num_blocks=num_blocks,
        blocks_per_request=per_req,
        max_concurrency=conc,
        kv_cache_tokens=int(conc * max_model_len),
        max_model_len=max_model_len,
    )


class MemoryPlan(BaseModel):
    """Everything the memory plan says, in GiB and tokens."""

    machine: str
    total_gib: float
    gpu_memory_utilization: float
    requested_gib: float
    weights_gib: float
    overhead: OverheadModel
    kv_source: str = Field(..., description="predicted (overhead model) | given (--kv-cache-memory-gib)")
    available_kv_gib: float
    layout: KVLayout
    capacity: KVCapacity
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_prefix_caching: bool
    mamba_cache_mode: str
    max_context_one_request: int = Field(..., description="Longest context one request could have.")
    utilization_for_context: float | None = Field(
        None, description="--gpu-memory-utilization that holds `target_concurrency` requests at context."
    )
    target_concurrency: int = 1
    free_budget_gib: float | None = None
    parallel: ParallelPlan | None = Field(
        None, description="per-GPU shares under tensor/pipeline parallelism"
    )

    @property
    def fits(self) -> bool:
        return self.capacity.max_concurrency >= 1.0


def _parallel(
    facts: ModelFacts, s: ServeSettings, layout: KVLayout, requested: int, overhead: OverheadModel
) -> tuple[ParallelPlan, int, int]:
    """Per stage: weights, available KV memory and blocks; (plan, binding stage's weights and
    available bytes, num_blocks every worker takes)."""
    par = plan_stages(facts, s, layout)
    for st in par.stages:
        # the dummy sampler pass runs on the last stage only (vllm 0.32.0 gpu_model_runner.py:6196-6201)
        over = overhead.total_gib - (0.0 if st.lm_head else overhead.sampler_gib)
        if s.kv_cache_memory_gib is not None:
            avail = int(s.kv_cache_memory_gib * GIB)
        else:
            avail = int(requested - st.weights_gib * GIB - over * GIB)
        st.available_kv_gib = avail / GIB
        st.num_blocks = max(0, avail) // st.kv_bytes_per_block if st.kv_bytes_per_block else 0
    binding = min(par.stages, key=lambda st: st.num_blocks)
    par.binding_stage = binding.rank
    return par, int(binding.weights_gib * GIB), int(binding.available_kv_gib * GIB)


def plan_memory(
    facts: ModelFacts, s: ServeSettings, machine: MachineProfile, *, target_concurrency: int = 1
) -> MemoryPlan:
    tp = max(1, s.tensor_parallel_size)
    weights = facts.weight_bytes(language_model_only=s.language_model_only) / tp
    weights += mxfp4_kernel_extra_bytes(facts, s.compute_capability_major, s.vllm_version) / tp
    overhead = estimate_overhead(facts, s, unified_memory=machine.unified_memory)
    requested = math.ceil(machine.total_gib * GIB * s.gpu_memory_utilization)
    if s.kv_cache_memory_gib is not None:
        available = int(s.kv_cache_memory_gib * GIB)
        source = "given"
    else:
        available = int(requested - weights - overhead.total_gib * GIB)
        source = "predicted"
    layout = kv_layout(facts, s)
    parallel: ParallelPlan | None = None
    if tp > 1 or s.pipeline_parallel_size > 1:
        parallel, weights_i, available = _parallel(facts, s, layout, requested, overhead)
        weights = float(weights_i)
        stage = parallel.stages[parallel.binding_stage]
        layout = layout.model_copy(update={"bytes_per_block": stage.kv_bytes_per_block})
    cap = kv_capacity(layout, available, s.max_model_len)
    need_blocks = target_concurrency * layout.blocks_per_request(s.max_model_len)
    need_bytes = need_blocks * layout.bytes_per_block + weights + overhead.total_gib * GIB
    util_needed = math.ceil(need_bytes / (machine.total_gib * GIB) * 1000) / 1000
    return MemoryPlan(
        machine=machine.name,
        total_gib=machine.total_gib,
        gpu_memory_utilization=s.gpu_memory_utilization,
        requested_gib=requested / GIB,
        weights_gib=weights / GIB,
        overhead=overhead,
        kv_source=source,
        available_kv_gib=available / GIB,
        layout=layout,
        capacity=cap,
        max_model_len=s.max_model_len,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        enable_prefix_caching=s.enable_prefix_caching,
        mamba_cache_mode=s.mamba_cache_mode if facts.is_hybrid else "n/a",
        max_context_one_request=layout.max_model_len_for_blocks(
            cap.num_blocks, limit=max(facts.derived_max_len, facts.max_position_embeddings)
        ),
        utilization_for_context=util_needed if util_needed <= 1.0 else None,
        target_concurrency=target_concurrency,
        free_budget_gib=machine.free_budget_gib,
        parallel=parallel,
    )
