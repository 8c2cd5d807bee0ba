"""`llmdeck plan` under tensor/pipeline parallelism: the per-GPU table."""

from __future__ import annotations

from typing import Any


def gib(x: float) -> str:
    return f"{x:,.2f} GiB"


def parallel_table(par: Any) -> Any:
    """Per pipeline stage: layers, what one GPU of it holds, its KV blocks (the smallest binds)."""
    from rich.table import Table

    t = Table(
        title=f"Per GPU: TP {par.tensor_parallel_size} x PP {par.pipeline_parallel_size} on "
        f"{par.nodes} node(s) "
        f"x {par.gpus_per_node} GPU(s); {par.attention_heads_per_gpu} attention / {par.kv_heads_per_gpu} KV "
        "heads a GPU" + (" (KV heads replicated)" if par.kv_heads_replicated else ""),
        header_style="bold",
    )
    for col in ("stage", "layers", "holds", "weights", "available KV", "KV blocks"):
        t.add_column(col, justify="left" if col in ("holds", "layers") else "right")
    for st in par.stages:
        holds = ", ".join(x for x, on in (("embedding", st.embedding), ("lm_head", st.lm_head)) if on) or "-"
        mark = " <- binds" if st.rank == par.binding_stage and len(par.stages) > 1 else ""
        t.add_row(
            str(st.rank),
            f"{st.layers[0]}-{st.layers[1] - 1}",
            holds,
            gib(st.weights_gib),
            gib(st.available_kv_gib),
            f"{st.num_blocks:,}{mark}",
        )
    return t
