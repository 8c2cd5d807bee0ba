"""Probes of the basics: health, API key, models, chat, completions, streaming usage."""

from __future__ import annotations

from typing import Any

import httpx

from llmdeck.checks.clients import suggest_parsers
from llmdeck.checks.http import Reply
from llmdeck.checks.probe_base import (
    REASONING_FIELDS,
    Outcome,
    ProbeContext,
    _content,
    _finish,
    _http_fail,
    _message,
    _reasoning,
)
from llmdeck.client.errors import MalformedStreamError, reported_max_model_len
from llmdeck.util.shellquote import quote


def probe_health(ctx: ProbeContext) -> Outcome:
    reply = ctx.get("/health", api_key=False, timeout=min(10.0, ctx.http.timeout))
    try:
        version: Reply | None = ctx.http.request(
            "GET", "/version", api_key=False, timeout=min(10.0, ctx.http.timeout)
        )
    except httpx.HTTPError:
        version = None
    if version is not None and version.ok and isinstance(version.data, dict) and version.data.get("version"):
        ctx.facts.server_version = str(version.data["version"])
        ctx.evidence.append(version.exchange)
    if reply.ok:
        where = f" (vLLM {ctx.facts.server_version})" if ctx.facts.server_version else ""
        return Outcome("pass", f"GET /health answered {reply.status_code}{where}.")
    if reply.status_code in (401, 403, 429):  # a proxy in front of the server, not the engine's state
        why = "it wants an API key even there" if reply.status_code != 429 else "it is rate-limiting"
        return Outcome(
            "fail",
            f"GET /health answered HTTP {reply.status_code}: {why} (a proxy or gateway in front of the "
            "server; vLLM answers /health without a key).",
            fix="Give the key the proxy expects (--api-key)" if reply.status_code != 429 else
            "Wait and run again, or check the proxy's limits.",
        )  # fmt: skip
    return Outcome(
        "fail",
        f"GET /health answered HTTP {reply.status_code}: the server is up but not healthy (still loading, "
        "or its engine died).",
        fix="Wait for `Application startup complete.` in the server log, or read the log for the error "
        "(`llmdeck logs <name>`).",
    )


def probe_api_key(ctx: ProbeContext) -> Outcome:
    bare = ctx.get("/v1/models", api_key=False)
    if bare.ok:
        ctx.facts.api_key_required = False
        if ctx.http.api_key:
            return Outcome("pass", "The server needs no API key; the key you gave is accepted and ignored.")
        return Outcome("pass", "The server needs no API key (clients may send any placeholder key).")
    if bare.status_code not in (401, 403):
        return _http_fail(bare, "GET /v1/models")
    ctx.facts.api_key_required = True
    if not ctx.http.api_key:
        ctx.blocked = "the server wants an API key and none was given"
        return Outcome(
            "fail",
            "The server answers 401 Unauthorized without an API key (it was started with --api-key).",
            fix="Pass the key: `llmdeck check --api-key KEY` or set LLMDECK_API_KEY; configure the same "
            "key in your client (`llmdeck connect` writes it).",
        )
    keyed = ctx.get("/v1/models")
    if keyed.ok:
        return Outcome("pass", "The server requires an API key (401 without it) and accepts yours.")
    ctx.blocked = "the server rejected the API key"
    return Outcome(
        "fail",
        f"The server rejects the given API key (HTTP {keyed.status_code}).",
        fix="Use the key the server was started with (--api-key / VLLM_API_KEY).",
    )


def _not_served_fix(wanted: str, ids: list[str], entries: list[Any]) -> str:
    """What to do when /v1/models lacks ``wanted``: a vLLM names its --served-model-name; an llmdeck
    gateway (its entries are ``owned_by: llmdeck``) lists only the aliases the caller's key may use."""
    use = f"Use --model {quote(ids[0])}"
    if all(isinstance(e, dict) and e.get("owned_by") == "llmdeck" for e in entries):
        return (
            f"{use}. This is an llmdeck gateway: it lists the aliases your key may use, so {wanted!r} is "
            f"another alias your key may not use, or no alias of its config: use a key allowed it "
            f"(`llmdeck keys create NAME --models {quote(wanted)}`) or add the alias to the gateway's config."
        )
    return (
        f"{use} (requests must name the --served-model-name), or restart the server with "
        f"--served-model-name {quote(wanted)}."
    )


REPLACED = "\ufffd"  # what a byte that is not UTF-8 decodes to


def probe_models(ctx: ProbeContext) -> Outcome:
    reply = ctx.get("/v1/models")
    if not reply.ok:
        return _http_fail(reply, "GET /v1/models")
    entries = reply.data.get("data") if isinstance(reply.data, dict) else None
    if not isinstance(entries, list):  # a web page, a router's login, another API: not a model list
        return Outcome(
            "fail",
            f"GET /v1/models answered no OpenAI model list: {reply.text[:120]!r}.",
            fix="Point at an OpenAI-compatible server (vLLM serves /v1/models), with its port and /v1.",
        )
    if not entries:
        return Outcome("fail", "GET /v1/models returned no models.", fix="Check the server's --model.")
    ids = [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"]]
    garbled = [i for i in ids if REPLACED in i]  # not UTF-8: the server's real name is lost
    ids = [i for i in ids if REPLACED not in i]
    if not ids:
        what = "ids that are not valid UTF-8" if garbled else "entries without a string id"
        return Outcome(
            "fail",
            f"GET /v1/models lists {what}: {str(garbled or entries)[:200]!r}.",
            fix="Point the check at an OpenAI-compatible server (e.g. vLLM); its models carry an id.",
        )
    ctx.facts.models = ids
    wanted = ctx.requested_model or ctx.facts.model
    if ctx.requested_model and ctx.requested_model not in ids:
        ctx.facts.model = ids[0]
        ctx.blocked = f"the server does not serve {ctx.requested_model!r}"  # each request would be a 404
        return Outcome(
            "fail",
            f"The server does not serve {ctx.requested_model!r}; it serves {', '.join(map(quote, ids))}.",
            fix=_not_served_fix(ctx.requested_model, ids, entries),
            data={"models": ids, "model_not_served": ctx.requested_model},
        )
    chosen = wanted if wanted in ids else ids[0]
    entry = next(e for e in entries if isinstance(e, dict) and e.get("id") == chosen)
    ctx.facts.model = chosen
    ctx.facts.model_root = str(entry.get("root")) if entry.get("root") else None
    try:  # an impossible one fails the probe, so `connect` writes no config sized by it
        ctx.facts.max_model_len = reported_max_model_len(entry, "GET /v1/models")
    except MalformedStreamError as exc:
        return Outcome("fail", exc.message, fix=exc.hint, data={"models": ids})
    tool, reasoning = suggest_parsers(chosen, ctx.facts.model_root)
    ctx.facts.suggested_tool_parser = tool
    ctx.facts.suggested_reasoning_parser = reasoning
    length = f"max_model_len {ctx.facts.max_model_len}" if ctx.facts.max_model_len else "no max_model_len"
    skipped = f"; skipped {len(garbled)} id(s) that are not valid UTF-8" if garbled else ""
    return Outcome(
        "pass",
        f"Serves {chosen!r} ({length}{skipped}).",
        data={"models": ids, "max_model_len": ctx.facts.max_model_len, "root": ctx.facts.model_root},
    )


MAX_TOKENS_COUNT = 10**9  # more than any context a server holds


def bad_count(usage: Any, key: str = "completion_tokens") -> str | None:
    """Why ``usage[key]`` is no token count (present but negative, huge, not an integer), else None."""
    if not isinstance(usage, dict) or usage.get(key) is None:
        return None
    value = usage[key]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS_COUNT:
        return None
    return f"usage.{key} is {str(value)[:40]!r}, not a token count"


def _bad_usage(why: str, data: dict[str, Any] | None = None) -> Outcome:
    return Outcome(
        "fail",
        f"The reply's {why}: clients that count tokens (context left, cost) would count wrong.",
        fix="Check a proxy between client and server, or the server's version.",
        data=data or {},
    )


def probe_chat(ctx: ProbeContext) -> Outcome:
    reply = ctx.post("/v1/chat/completions", ctx.chat_body([{"role": "user", "content": "Say hello."}]))
    if not reply.ok:
        return _http_fail(reply, "POST /v1/chat/completions")
    msg = _message(reply)
    if not msg:
        return Outcome("fail", "The chat reply has no choices[0].message.")
    content = _content(msg)
    _, reasoning = _reasoning(msg)
    usage = reply.data.get("usage")
    if why := bad_count(usage):
        return _bad_usage(why)
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return Outcome(
        "pass",
        f"Answered: {len(content or '')} chars of content, {len(reasoning)} of reasoning, finish_reason "
        f"{_finish(reply)}, {tokens} tokens.",
    )


def probe_completions(ctx: ProbeContext) -> Outcome:
    body = {"model": ctx.facts.model, "prompt": "def fibonacci(n):", "max_tokens": 8, "temperature": 0}
    reply = ctx.post("/v1/completions", body)
    if not reply.ok:
        return _http_fail(reply, "POST /v1/completions")
    try:
        text = reply.data["choices"][0]["text"]
    except (KeyError, IndexError, TypeError):
        return Outcome("fail", "The completion reply has no choices[0].text.")
    return Outcome("pass", f"Answered {len(str(text))} chars, finish_reason {_finish(reply)}.")


def probe_streaming_usage(ctx: ProbeContext) -> Outcome:
    body = ctx.chat_body(
        [{"role": "user", "content": "Count to five."}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    reply = ctx.stream("/v1/chat/completions", body)
    if not reply.ok:
        return _http_fail(reply, "streaming POST /v1/chat/completions")
    deltas = 0
    for delta in reply.deltas():
        if delta.get("content") or any(delta.get(f) for f in REASONING_FIELDS) or delta.get("tool_calls"):
            deltas += 1
    usage = reply.stream_usage()
    data = {"chunks": len(reply.chunks), "content_chunks": deltas, "usage": usage, "done": reply.done}
    if reply.stalled_s is not None:
        return Outcome(
            "fail",
            f"The stream stalled: {len(reply.chunks)} chunk(s), then nothing more until the request's limit "
            f"({reply.stalled_s:g} s), no `data: [DONE]`; an agent reading it waits as long.",
            fix="Check the server's log (`llmdeck logs`) for a stuck engine, and any proxy in between.",
            data=data,
        )
    if not reply.done:
        return Outcome(
            "fail",
            "The stream ended without `data: [DONE]`.",
            fix="Check a proxy between client and server.",
            data=data,
        )
    if why := bad_count(usage):
        return _bad_usage(why, data)
    if not usage or usage.get("completion_tokens") is None:
        return Outcome(
            "fail",
            "The stream carried no usage chunk although stream_options.include_usage was true.",
            fix="Upgrade vLLM, or remove a proxy that strips the final usage chunk.",
            data=data,
        )
    if deltas == 0 and int(usage.get("completion_tokens") or 0) <= 1:
        return Outcome(
            "inconclusive",
            "The model ended its reply at once (no text, end of sequence first); the stream itself was "
            "whole (usage, then [DONE]).",
            data=data,
        )
    if deltas == 0:
        return Outcome("fail", "The stream carried no generated text.", data=data)
    return Outcome(
        "pass",
        f"{len(reply.chunks)} chunks, {deltas} with text, usage {usage.get('completion_tokens')} completion "
        "tokens, then [DONE].",
        data=data,
    )
