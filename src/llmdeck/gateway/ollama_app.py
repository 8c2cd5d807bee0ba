"""Ollama's native API on the gateway, so a client written for Ollama needs only the new address.

``/api/chat`` and ``/api/generate`` (streamed as Ollama streams, newline-delimited JSON, unless
``"stream": false``), ``/api/embed`` and ``/api/embeddings`` go through the same path as the OpenAI API's
``/v1/chat/completions`` and ``/v1/embeddings``: keys, aliases (in any case;
``NAME:latest`` is ``NAME``), rate limits, models started on demand, retries, metrics, the access log.
``/api/tags`` and ``/api/ps`` list the aliases a key may use (``ps``: those running now),
``/api/show`` one alias (its context length, what it can do), ``/api/version`` the Ollama API level
these shapes follow. What manages Ollama's own model store (``pull``, ``push``, ``create``, ``copy``,
``delete``) answer 501 with what to do instead. Errors are Ollama's ``{"error": "…"}``.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from llmdeck.gateway.capabilities import route_capabilities
from llmdeck.gateway.ollama_keepalive import keep_alive_s
from llmdeck.gateway.ollama_replies import NdjsonStream, error_reply, whole
from llmdeck.gateway.ollama_shapes import (
    Kind,
    OllamaRequestError,
    chat_body,
    embed_body,
    error_message,
    generate_body,
    now_iso,
)
from llmdeck.gateway.proxy import GONE, RequestCtx
from llmdeck.gateway.relay import RelayResponse
from llmdeck.gateway.request_body import parse_json_object, read_body
from llmdeck.runtime.tenants import GATEWAY_MARK

if TYPE_CHECKING:
    from llmdeck.gateway.app import Caller, GatewayState

# The Ollama release whose API these shapes follow (its clients gate features on it: tools, thinking)
OLLAMA_API_VERSION = "0.13.0"
_UNSERVED = {  # Ollama's model store: what to do instead
    "pull": "models are vLLM builds: fetch one with `llmdeck fetch MODEL` and name it in the gateway config",
    "push": "llmdeck serves models; it does not publish them",
    "create": "a model is a launch spec in the gateway config (`llmdeck migrate ollama` writes them)",
    "copy": "a second name for a model is an alias in the gateway config",
    "delete": "remove the alias from the gateway config; the weights are in the Hugging Face cache",
    "blobs": "models are vLLM builds: fetch one with `llmdeck fetch MODEL`",
}


_SERVED = {"chat": "POST it", "generate": "POST it", "show": "POST it", "embed": "POST it",
           "embeddings": "POST it", "tags": "GET it", "ps": "GET it", "version": "GET it"}  # fmt: skip


def ollama_routes() -> list[Route]:
    return [
        Route("/api/version", _version, methods=["GET"]),
        Route("/api/tags", _tags, methods=["GET"]),
        Route("/api/ps", _ps, methods=["GET"]),
        Route("/api/show", _show, methods=["POST"]),
        Route("/api/chat", _chat, methods=["POST"]),
        Route("/api/generate", _generate, methods=["POST"]),
        Route("/api/embed", _embed, methods=["POST"]),
        Route("/api/embeddings", _embeddings, methods=["POST"]),
        Route("/api/{path:path}", _unserved, methods=["GET", "POST", "PUT", "DELETE", "HEAD"]),
    ]


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _reshaped(resp: JSONResponse) -> JSONResponse:
    """The gateway's own error (OpenAI's shape) in Ollama's."""
    return error(resp.status_code, error_message(bytes(resp.body), resp.status_code))


def _caller(request: Request) -> tuple[GatewayState, Caller | JSONResponse]:
    from llmdeck.gateway.app import _authenticate, _state

    st = _state(request)
    caller = _authenticate(request, st)
    return st, _reshaped(caller) if isinstance(caller, JSONResponse) else caller


def _logged(request: Request, resp: Response, key: str = "-") -> Response:
    from llmdeck.gateway.app import _logged as logged

    return logged(request, resp, key)


async def _version(request: Request) -> Response:
    return _logged(request, JSONResponse({"version": OLLAMA_API_VERSION, GATEWAY_MARK: True}))


def _details() -> dict[str, Any]:
    return {"parent_model": "", "format": "safetensors", "family": "", "families": None,
            "parameter_size": "", "quantization_level": ""}  # fmt: skip


def _entry(st: GatewayState, alias: str, modified: str) -> dict[str, Any]:
    entry = {"name": alias, "model": alias, "modified_at": modified, "size": 0, "digest": "",
             "details": _details()}  # fmt: skip
    if (max_len := st.router.max_model_len(alias)) is not None:
        entry["context_length"] = max_len
    return entry


async def _tags(request: Request) -> Response:
    st, caller = _caller(request)
    if isinstance(caller, JSONResponse):
        return _logged(request, caller)
    since = now_iso(st.started_at)
    models = [_entry(st, a, since) for a in st.router.routes if caller.may_use(a)]
    return _logged(request, JSONResponse({"models": models, GATEWAY_MARK: True}), caller.name)


async def _ps(request: Request) -> Response:
    st, caller = _caller(request)
    if isinstance(caller, JSONResponse):
        return _logged(request, caller)
    found = (ps_entry(st, alias) for alias in st.router.routes if caller.may_use(alias))
    models = [e for e in found if e is not None]
    return _logged(request, JSONResponse({"models": models, GATEWAY_MARK: True}), caller.name)


def ps_entry(st: GatewayState, alias: str) -> dict[str, Any] | None:
    """``/api/ps``'s entry for an alias with a backend running now (None: none is): a model on demand
    adds the memory it holds (``size``, ``size_vram``: the budget's one pool) and, with a ``ttl_s``, when
    it will be stopped if idle (``expires_at``); a server it does not start counts when healthy."""
    running, held, expires = False, 0, 0.0
    for backend in st.router.routes[alias].backends:
        model = st.manager.get(backend.url) if st.manager is not None else None
        if model is None:
            running = running or (backend.healthy is True and backend.checked_at is not None)
        elif model.state == "running":
            running, held = True, held + model.held(st.manager.budget.kind)  # type: ignore[union-attr]
            limit = model.idle_limit()
            if limit is not None and not math.isinf(limit) and model.last_used:
                expires = max(expires, model.last_used + limit)
    if not running:
        return None
    entry = _entry(st, alias, now_iso(st.started_at)) | {"size": held, "size_vram": held}
    return entry | ({"expires_at": now_iso(expires)} if expires else {})


async def _show(request: Request) -> Response:
    st, caller = _caller(request)
    if isinstance(caller, JSONResponse):
        return _logged(request, caller)
    body = await _body(request, st)
    if isinstance(body, JSONResponse):
        return _logged(request, body, caller.name)
    asked = body.get("model") or body.get("name")  # older clients send `name`
    alias = _alias(st, asked, caller)
    if isinstance(alias, JSONResponse):
        return _logged(request, alias, caller.name)
    info: dict[str, Any] = {"general.architecture": "llmdeck"}
    if (max_len := st.router.max_model_len(alias)) is not None:
        info["llmdeck.context_length"] = max_len
    can = route_capabilities(st.router.routes[alias].route.backends)  # its own: a URL may serve two
    reply = {"modelfile": "", "parameters": "", "template": "", "details": _details(), "model_info": info,
             "capabilities": can, "modified_at": now_iso(st.started_at)}  # fmt: skip
    return _logged(request, JSONResponse(reply), caller.name)


def _alias(st: GatewayState, asked: Any, caller: Caller) -> str | JSONResponse:
    """The route a client's model name names (any case; ``NAME:latest`` is ``NAME``), or Ollama's 404."""
    if not isinstance(asked, str) or not asked:
        return error(400, "Say which model in the body's `model`.")
    route = st.router.get(asked)
    if route is None and asked.endswith(":latest"):
        route = st.router.get(asked.removesuffix(":latest"))
    if route is None or not caller.may_use(route.route.alias):
        shown = asked if len(asked) <= 200 else asked[:200] + "…"
        models = ", ".join(a for a in st.router.routes if caller.may_use(a)) or "none"
        return error(404, f"model {shown!r} not found (models here: {models})")
    return route.route.alias


async def _body(request: Request, st: GatewayState) -> dict[str, Any] | JSONResponse:
    t = st.loaded.config.timeouts
    raw = await read_body(request, idle_s=t.idle_s, whole_s=t.response_s)
    parsed = await parse_json_object(raw) if isinstance(raw, bytes) else raw
    return _reshaped(parsed) if isinstance(parsed, JSONResponse) else parsed


async def _chat(request: Request) -> Response:
    return await _serve(request, "chat")


async def _generate(request: Request) -> Response:
    return await _serve(request, "generate")


async def _embed(request: Request) -> Response:
    return await _serve(request, "embed")


async def _embeddings(request: Request) -> Response:
    return await _serve(request, "embeddings")


async def _serve(request: Request, endpoint: str) -> Response:
    started = time.perf_counter()
    st, caller = _caller(request)
    ctx = RequestCtx(st.metrics, request.method, request.url.path, api="chat")
    if isinstance(caller, JSONResponse):
        ctx.finish(caller.status_code, "unauthorized")
        return caller
    ctx.key = caller.name
    asked = await _translated(request, st, caller, endpoint)
    if isinstance(asked, JSONResponse):
        status = asked.status_code
        ctx.finish(status, {GONE: "client_disconnected", 404: "refused"}.get(status, "bad_request"))
        return asked
    kind, alias, req, body = asked
    ctx.route = alias
    keep = keep_alive_s(req.get("keep_alive"))  # checked by _translated
    _hold(st, alias, keep)
    if _loads_only(kind, body):  # Ollama's "load this model" (no prompt; keep_alive 0: unload it)
        loaded = _load(st, kind, alias, unload=keep == 0)
        ctx.finish(loaded.status_code, "" if loaded.status_code == 200 else "refused")
        return loaded
    ctx.api, path = _ENDPOINTS[kind]
    from llmdeck.gateway.app import dispatch

    raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()  # what roomcap measures
    resp = await dispatch(request, ctx, caller, body, raw, path)
    return _reply(resp, kind, alias, bool(body.get("stream")), started)


# the API (its route defaults, metrics label) and the endpoint each kind of Ollama request is sent to
_ENDPOINTS = {
    "chat": ("chat", "/v1/chat/completions"),
    "generate": ("chat", "/v1/chat/completions"),
    "raw": ("completions", "/v1/completions"),
    "embed": ("embeddings", "/v1/embeddings"),
    "embeddings": ("embeddings", "/v1/embeddings"),
}


async def _translated(
    request: Request, st: GatewayState, caller: Caller, endpoint: str
) -> tuple[Kind, str, dict[str, Any], dict[str, Any]] | JSONResponse:
    """The client's request read, its model's alias found, rewritten as OpenAI's; or the error to answer."""
    req = await _body(request, st)
    if isinstance(req, JSONResponse):
        return req
    alias = _alias(st, req.get("model"), caller)
    if isinstance(alias, JSONResponse):
        return alias
    try:
        keep_alive_s(req.get("keep_alive"))
        if endpoint == "chat":
            return "chat", alias, req, chat_body(req | {"model": alias})
        if endpoint in ("embed", "embeddings"):
            kind: Kind = "embed" if endpoint == "embed" else "embeddings"
            return kind, alias, req, embed_body(req | {"model": alias}, kind)
        kind, body = generate_body(req | {"model": alias})
    except OllamaRequestError as exc:
        return error(400, str(exc))
    return kind, alias, req, body


def _loads_only(kind: Kind, body: dict[str, Any]) -> bool:
    if kind in ("embed", "embeddings"):
        return body["input"] in ("", [])
    if kind == "raw":
        return not body.get("prompt")
    messages = body.get("messages") or []
    return not messages or (kind == "generate" and messages[-1].get("content") == "")


def _load(st: GatewayState, kind: Kind, alias: str, *, unload: bool) -> JSONResponse:
    """Load (wake or start) or unload (sleep or stop) the alias's models on demand; answered at once, as
    the dashboard's actions are (a request for the model waits for its start as any request does)."""
    route = st.router.routes[alias]
    manager = st.manager
    models = [m for b in route.backends if manager is not None and (m := manager.get(b.url)) is not None]
    if unload and not models:
        return error(
            400,
            f"{alias!r} is served by a server this gateway does not start (a URL or `server:` backend), so "
            "it cannot unload it: stop it with `llmdeck down NAME`. The gateway loads and unloads models "
            "on demand (launch-spec backends).",
        )
    if models:
        from llmdeck.gateway.ui_actions import keep_alive
        from llmdeck.gateway.ui_app import _context

        for model in models:
            keep_alive(manager, model, unload, _context(st).tasks, _WHY)  # type: ignore[arg-type]
    head = {
        "model": alias,
        "created_at": now_iso(),
        "done": True,
        "done_reason": "unload" if unload else "load",
    }
    return JSONResponse(head | _EMPTY[kind])


def _hold(st: GatewayState, alias: str, seconds: float | None) -> None:
    """The request's ``keep_alive`` on the alias's models on demand: their idle limit till the next
    Ollama request or their stop (None: their route's ``ttl_s`` again)."""
    for backend in st.router.routes[alias].backends:
        if st.manager is not None and (model := st.manager.get(backend.url)) is not None:
            model.keep_alive_s = seconds
            model.touch()  # its request is on its way: idle from now (0: stopped after the reply)


_EMPTY: dict[str, dict[str, Any]] = {  # what a load's reply carries, as Ollama's does for each endpoint
    "chat": {"message": {"role": "assistant", "content": ""}},
    "generate": {"response": ""},
    "raw": {"response": ""},
    "embed": {"embeddings": []},
    "embeddings": {"embedding": []},
}


_WHY = "on an Ollama client's request (keep_alive)"


def _reply(resp: Response, kind: Kind, model: str, stream: bool, started: float) -> Response:
    """The backend's (or the gateway's) answer in Ollama's shape."""
    if not isinstance(resp, RelayResponse):
        body = bytes(resp.body) if resp.status_code >= 400 else b""
        return error(resp.status_code, error_message(body, resp.status_code)) if body else resp
    status = resp.relay.resp.status_code
    if status >= 400:
        return OllamaRelay(resp, lambda chunks: error_reply(status, chunks), "application/json")
    if stream:
        ndjson = NdjsonStream(kind, model, started)
        return OllamaRelay(resp, ndjson.translate, "application/x-ndjson")
    return OllamaRelay(resp, lambda chunks: whole(kind, model, started, chunks), "application/json")


class OllamaRelay(RelayResponse):
    """The relay of a backend's reply (its disconnect watch, its bookkeeping), the bytes rewritten."""

    def __init__(
        self,
        relayed: RelayResponse,
        rewrite: Callable[[AsyncIterator[bytes]], AsyncIterator[bytes]],
        media_type: str,
    ) -> None:
        self.relay = relay = relayed.relay
        headers = {k: v for k, v in relay.headers().items() if k.lower() not in _REWRITTEN}
        StreamingResponse.__init__(
            self, _closing(rewrite, relay.chunks()), relay.resp.status_code, headers, media_type
        )


_REWRITTEN = frozenset({"content-length", "content-type", "content-encoding"})


async def _closing(
    rewrite: Callable[[AsyncIterator[bytes]], AsyncIterator[bytes]], chunks: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    async with contextlib.aclosing(chunks):  # type: ignore[type-var]
        async for out in rewrite(chunks):
            yield out


async def _unserved(request: Request) -> Response:
    what = request.url.path.removeprefix("/api/").split("/", 1)[0]
    why = _UNSERVED.get(what)
    if what in _SERVED:
        said = f"{request.method} is not allowed on /api/{what}; {_SERVED[what]}."
        return _logged(request, error(405, said))
    if why is None:
        return _logged(request, error(404, f"No endpoint {request.url.path[:200]} here."))
    return _logged(request, error(501, f"llmdeck's gateway does not serve Ollama's /api/{what}: {why}."))
