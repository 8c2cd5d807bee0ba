"""An output cap fitted to the prompt's room on a backend that counts the cap against its context (vLLM
0.20-0.31): the prompt counted as the backend counts it, the request sent once more with the cap lowered
to what is left.

Those versions let a prompt have only ``max_model_len - cap`` tokens (renderers/params.py,
``max_input_tokens = max_total_tokens - max_output_tokens``) and say so in the words of a context
overflow: "This model's maximum context length is 16384 tokens. However, you requested 8000 output tokens
and your prompt contains at least 8385 input tokens ..." (they tokenize only to ``max_input_tokens + 1``:
the number is a lower bound), or before tokenizing "... your prompt contains 57 characters (more than 0
characters ...)". Claude Code asks ``max_tokens: 32000``: on a 65k context it was refused as soon as its
prompt passed 33.5k tokens, and compacted on those words, half the context unused.

* Such a 400 for a request that carries a cap (the client's, or outcap's lowered one; its number is the
  cap sent) marks the backend (``reserves_cap``; the log says it once) and the prompt is counted: on
  /v1/messages by vLLM's own ``POST /v1/messages/count_tokens``, on chat by ``POST /tokenize`` with the
  request's messages, tools and template arguments (both render the same chat template as the request;
  the template arguments the request would add, ``reasoning_effort`` and ``enable_thinking``, are added),
  on /v1/completions with one string prompt by ``POST /tokenize`` with the prompt and
  ``add_special_tokens`` (the same number as the completion's ``usage.prompt_tokens`` on vLLM 0.32:
  evidence/gateway/count_completions.py). Other prompts and /v1/responses are not counted: on such a
  backend their cap is passed on as sent (its 400 relayed, as before).
* A backend without the count endpoint (404/405: a proxy in between) is said once in the log and asked
  no more (``no_count``); its caps are passed on as sent. What was learnt of a backend is learnt again
  when it is another server (BackendState.server_is: started again, upgraded).
* A prompt of P tokens under the context: the request is sent once more with the cap ``max_model_len - P``
  (and a thinking budget under it), saying so in ``x-llmdeck-max-tokens-lowered`` as outcap does. P at or
  over the context: the overflow 400 is relayed (the prompt itself is too long; Claude Code compacts).
* vLLM's count_tokens refuses a prompt over the context in the same words ("you requested 0 output
  tokens and your prompt contains at least 16385 input tokens"): that prompt is over it.
* A count that fails (no answer within the gateway's timeouts, an error, no number): the 400 is relayed;
  for a cap the gateway lowered itself the request is sent as the client wrote it instead (the cap's own
  refusal, not an overflow that is none).
* Counted first (``count_first``): on a backend known to count the cap (``reserves_cap``, its
  ``max_model_len`` known) a request whose cap is sure to be refused is counted before its first send and
  sent once, fitted, not refused first (Claude Code sends its 32000 on every request: each paid the
  refused send, +61 ms of TTFT on an H100, evidence/device/outcap). Sure: the cap to send (a cap over the
  context is sent as the context, outcap) leaves the prompt no room; or the prompt's tokens are at least
  the request body's bytes over the most bytes per token this backend's counts have shown
  (``bytes_per_token``) and the cap leaves fewer. A body of more bytes per token than any counted (JSON
  the template drops) gets a floor over its tokens: one count it did not need, which raises the ratio
  for the next; a body with media inline (base64, audio data) is counted so too but teaches no ratio (a
  screenshot's hundreds of kB for some hundreds of tokens had lowered every later text prompt's floor
  to a few tokens). A request whose cap fits is sent once, uncounted; a count that fails sends the
  request as the client wrote it (vLLM's own answer relayed); a prompt over the context is sent as today
  (the cap as the context) and vLLM's overflow 400 relayed, not counted again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any

import httpx

from llmdeck.gateway.outcap import CONTEXT, cap_field, message_of
from llmdeck.gateway.surfaces import lacks_surface

if TYPE_CHECKING:
    from llmdeck.gateway.routing import BackendState
    from llmdeck.gateway.upstream import Upstream

log = logging.getLogger("llmdeck.gateway")

# vLLM 0.20-0.31's words for a cap counted against the prompt's room (renderers/params.py); the earlier
# renderer's "You passed 57 input characters and requested 16384 output tokens" too
RESERVED = re.compile(r"\brequested (\d{1,18}) output tokens\b")
OFF_LOOP_BYTES = 1 << 20  # upstream.py's
AS_SENT = 0  # Upstream.fit: the request as the client wrote it (a count failed)
# what the count is asked, per API: vLLM's endpoint, the request's fields it takes, the reply's number
_COUNTS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "messages": (
        "/v1/messages/count_tokens",
        ("model", "messages", "system", "tools", "tool_choice", "chat_template_kwargs"),
        "input_tokens",
    ),
    "chat": (
        "/tokenize",
        (
            "model", "messages", "tools", "chat_template", "chat_template_kwargs", "add_generation_prompt",
            "continue_final_message", "add_special_tokens", "mm_processor_kwargs", "media_io_kwargs",
        ),
        "count",
    ),
    "completions": ("/tokenize", ("model", "prompt", "add_special_tokens"), "count"),
}  # fmt: skip
# a completion's fields that change its prompt's tokens past what /tokenize is told: not counted
_COMPLETION_OTHERS = ("prompt_embeds", "truncate_prompt_tokens", "suffix")


def reserved_context(api: str, body: dict[str, Any] | None, sent: int | None, reply: bytes) -> int | None:
    """The context (``max_model_len``) a backend's 400 names when it refused the cap sent (``sent``, or
    the body's own) counted against the prompt's room; None for any other reply."""
    name = cap_field(api, body) if body is not None else None
    cap = sent if sent is not None else body.get(name) if body is not None and name is not None else None
    text = message_of(reply) or ""
    m, ctx = RESERVED.search(text), CONTEXT.search(text)
    if m is None or ctx is None or not isinstance(cap, int) or int(m.group(1)) != cap:
        return None
    return int(ctx.group(1)) if int(ctx.group(1)) > 0 else None


def countable(state: BackendState, api: str, body: dict[str, Any] | None) -> bool:
    """Whether this request's prompt can be counted exactly on this backend (else its cap is passed on
    as sent): a way to count it, and the backend has the endpoint for it."""
    asked = count_request(api, body) if body is not None else None
    return asked is not None and asked[0] not in state.no_count


def count_request(api: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The path and body that count this request's prompt as the backend will (None: no exact way)."""
    if api not in _COUNTS:
        return None
    if api == "completions":  # one string prompt, as the completion tokenizes it (count_completions.py)
        plain = isinstance(body.get("prompt"), str) and body["prompt"]
        if not plain or any(body.get(k) is not None for k in _COMPLETION_OTHERS):
            return None
    path, fields, _ = _COUNTS[api]
    out = {k: body[k] for k in fields if body.get(k) is not None}
    kwargs = dict(body["chat_template_kwargs"]) if isinstance(body.get("chat_template_kwargs"), dict) else {}
    effort = body.get("reasoning_effort") if api == "chat" else _messages_effort(body)
    if api == "chat" and body.get("documents") is not None:
        kwargs["documents"] = body["documents"]
    if isinstance(effort, str) and effort != "auto":  # vLLM's ChatCompletionRequest.build_chat_params
        kwargs["reasoning_effort"] = effort
        kwargs.setdefault("enable_thinking", effort != "none")
    if kwargs:
        out["chat_template_kwargs"] = kwargs
    return path, out


def _messages_effort(body: dict[str, Any]) -> Any:
    """The ``reasoning_effort`` vLLM gives a /v1/messages request (its count_tokens sets none): "none"
    for thinking disabled (the server's default), else ``output_config.effort``."""
    thinking, config = body.get("thinking"), body.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    return "none" if isinstance(thinking, dict) and thinking.get("type") == "disabled" else effort


def _encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


async def count_prompt(client: httpx.AsyncClient, state: BackendState, up: Upstream) -> int | None:
    """The prompt's tokens as the backend counts them; None when there is no exact way or it failed."""
    asked = count_request(up.api, up.json_body) if up.json_body is not None else None
    if asked is None:
        return None
    path, body = asked
    if path in state.no_count:
        return None
    if served := up.model_for(state):  # the backend's name (the request has the client's alias before
        body["model"] = served  # content_for sets it: count_first counts before that)
    headers = {"content-type": "application/json"}
    if state.backend.api_key:
        headers["authorization"] = f"Bearer {state.backend.api_key}"
    limit = min(up.first_byte_s, up.whole_s or up.first_byte_s)
    try:
        big = len(up.body) > OFF_LOOP_BYTES  # as upstream.py: a long history is encoded off the loop
        data = await asyncio.to_thread(_encoded, body) if big else _encoded(body)
        async with asyncio.timeout(limit):
            r = await client.post(state.url + path, content=data, headers=headers)
        refused = r.status_code == 400 or r.status_code == 500  # vLLM 0.22's count_tokens: a 500
        if refused and (over := reserved_context(up.api, None, 0, r.content)) is not None:
            return over  # count_tokens itself refuses a prompt over the context ("requested 0 output")
        number = r.json().get(_COUNTS[up.api][2]) if r.status_code == 200 else None
    except (httpx.HTTPError, TimeoutError, ValueError, AttributeError, RecursionError) as exc:
        log.warning("counting a prompt on %s failed: %s", state.backend.label, str(exc)[:200] or "timed out")
        return None
    if lacks_surface(r.status_code, r.content):  # no such endpoint (a proxy in between): asked no more
        state.no_count.add(path)
        log.warning(
            "backend %s has no %s (HTTP %d): its prompts are not counted, and a cap it refuses for the "
            "prompt's room is passed on as the client sent it",
            state.backend.label,
            path,
            r.status_code,
        )
        return None
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        log.warning("counting a prompt on %s failed: HTTP %d", state.backend.label, r.status_code)
        return None
    if number > 0 and not _inline_media(up.body):  # count_first's floor divides by the most bytes a
        state.bytes_per_token = max(state.bytes_per_token, len(up.body) / number)  # text token took
    return number


def _inline_media(body: bytes) -> bool:
    """A body with media inline (an image or a file as base64, audio data): hundreds of kB for some
    hundreds of tokens. Its ratio would teach a floor of a few tokens for every text prompt after it."""
    return b"base64" in body or b'"input_audio"' in body


async def fit(client: httpx.AsyncClient, state: BackendState, up: Upstream, reply: bytes) -> bool:
    """Whether a backend's 400 calls for the request once more with its cap fitted to the prompt's room
    (``up.fit`` says the cap to send, or ``AS_SENT``); False: the 400 is relayed."""
    sent = up.lowered.to if up.lowered is not None else None
    fresh = up.fit is None and up.counted is None  # counted first (count_first): its 400 is relayed
    context = reserved_context(up.api, up.json_body, sent, reply) if fresh else None
    if context is None:
        return False
    if not state.reserves_cap:
        state.reserves_cap = True
        log.warning(
            "backend %s counts the output cap against the prompt's room (vLLM < 0.32 does): on a request "
            "refused for it, the prompt is counted and the cap lowered to the room left (%s); from now on a "
            "cap sure to be refused is counted before it is sent",
            state.backend.label,
            "x-llmdeck-max-tokens-lowered",
        )
    prompt = await _counted(client, state, up, context)
    if prompt is None:
        up.fit = AS_SENT if up.lowered is not None else None
        return up.fit is not None
    if prompt >= context:
        return False
    up.fit = context - prompt
    return True


async def _counted(client: httpx.AsyncClient, state: BackendState, up: Upstream, context: int) -> int | None:
    """count_prompt, its outcome and time kept for the access log and metrics (``up.counted``)."""
    t0 = time.perf_counter()
    prompt = await count_prompt(client, state, up)
    outcome = "failed" if prompt is None else "over" if prompt >= context else "fits"
    up.counted, up.counted_on = (outcome, (time.perf_counter() - t0) * 1000), state.url
    return prompt


def refused_for_room(state: BackendState, up: Upstream) -> bool:
    """Whether this request's cap is sure to be refused for the prompt's room on this backend, before it
    is sent (count_first): the cap to send leaves no room, or less than the prompt's floor of tokens."""
    context, body = state.max_model_len, up.json_body
    if not state.reserves_cap or context is None or body is None or up.fit is not None:
        return False
    name = cap_field(up.api, body)
    cap = body.get(name) if name is not None else None
    if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0 or not countable(state, up.api, body):
        return False
    sent = min(cap, context)  # outcap sends a cap over the context as the context
    floor = int(len(up.body) / state.bytes_per_token) if state.bytes_per_token > 0 else 0
    return sent >= context or sent + floor > context


async def count_first(client: httpx.AsyncClient, state: BackendState, up: Upstream) -> None:
    """A request whose cap this backend is sure to refuse for the prompt's room, counted before its first
    send: ``up.fit`` the room left (or ``AS_SENT``: the count failed); a prompt over the context keeps
    no fit (sent as before: vLLM answers its overflow). What was counted on another backend (the one
    tried first failed) is counted again here."""
    if up.counted_on is not None and up.counted_on != state.url:
        up.fit, up.counted, up.counted_on = None, None, None
    if up.counted is not None or not refused_for_room(state, up):
        return
    context = state.max_model_len
    assert context is not None  # refused_for_room: known
    prompt = await _counted(client, state, up, context)
    if prompt is None:
        up.fit = AS_SENT
    elif prompt < context:
        up.fit = context - prompt
