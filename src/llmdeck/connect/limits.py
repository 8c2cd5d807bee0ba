"""The context and output limits `llmdeck connect` writes, from the client's recorded base prompt.

The numbers are :func:`llmdeck.checks.traffic.budget`'s, the same that `llmdeck check --client`
judges: the client gets ``context = max_model_len - margin`` and ``output`` (what it sends as
``max_tokens``), so that it compacts (opencode: once usage reaches context - output) before the
server refuses (prompt + max_tokens > max_model_len). A server that cannot hold the client's base
prompt with room for one tool-loop turn gets no config: connect fails with the fix.
"""

from __future__ import annotations

import httpx

from llmdeck.checks.http import Http
from llmdeck.checks.traffic import (
    budget,
    budget_words,
    load_recording,
    recommend_max_model_len,
    tokenize_body,
)
from llmdeck.connect.configs import ServeInfo
from llmdeck.errors import OperationError


def base_prompt_tokens(info: ServeInfo, client: str, timeout: float = 60.0) -> tuple[int, str] | None:
    """(tokens, how counted) of ``client``'s recorded base prompt on this server; None: no recording."""
    rec = load_recording(client)
    if rec is None:
        return None
    http = Http(info.base_url, info.api_key, timeout=timeout)
    try:
        reply = http.request("POST", "/tokenize", tokenize_body(rec, info.model))
    except httpx.HTTPError:  # timed out, cut off mid-reply: count as without /tokenize
        return rec.agent.prompt_tokens, "the recording's Qwen3 count"
    finally:
        http.close()
    if reply.ok and isinstance(reply.data, dict) and isinstance(reply.data.get("count"), int):
        return int(reply.data["count"]), "counted by the server"
    return rec.agent.prompt_tokens, "the recording's Qwen3 count"


def apply_client_limits(client: str, info: ServeInfo) -> ServeInfo:
    """``info`` with the limits ``client`` must get; raises OperationError (exit 1) when it cannot work."""
    rec = load_recording(client)
    if rec is None or not info.max_model_len:
        return info
    measured = base_prompt_tokens(info, client)
    assert measured is not None
    tokens, how = measured
    b = budget(info.max_model_len, tokens)
    if not b.usable:
        need = recommend_max_model_len(tokens)
        raise OperationError(
            f"{info.base_url} cannot hold {rec.label}'s base prompt: {budget_words(b)} ({how}). "
            f"{rec.client} would be refused with HTTP 400 and retry; no configuration was written.",
            hint=f"Restart the server with --max-model-len {need} or more (an llmdeck server: "
            f"`llmdeck restart NAME -- --max-model-len {need}`), then run `llmdeck connect {client}` (or "
            f"`llmdeck launch {client}`) again.",  # both read the server's limits here
        )
    words = f"{rec.label}: context {b.context}, output {b.output} written; {budget_words(b)} ({how})."
    if not b.ok:
        words += (
            f" Few turns: restart the server with --max-model-len {recommend_max_model_len(tokens)} "
            "for more room."
        )
    return info.model_copy(
        update={"client_context": b.context, "client_output": b.output, "client_budget": words}
    )
