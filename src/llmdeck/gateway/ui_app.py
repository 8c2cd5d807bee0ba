"""The dashboard's HTTP side: ``/ui`` (one static page), ``/ui/api/state`` (its JSON), the actions.

Who may see it: a loopback client (whose ``Host`` is a loopback name or address: a page of another site
rebound to 127.0.0.1 by DNS gets 403), or any client with a valid key — as a Bearer/``x-api-key``
header, or as the password of HTTP Basic auth (the browser asks for it on ``/ui``, then sends it with
the page's requests; the page itself never sees it). Without keys, only loopback clients (401 else).

The actions (``POST /ui/api/models/{name}/{start|stop|sleep|wake}``) change state, so they also need
a JSON object body, the header ``X-Llmdeck-UI: 1`` (a form or an ``<img>`` from another site cannot
send it, and a script of another origin would need CORS preflight, which these paths never grant) and
an ``Origin``, when the browser sends one, equal to the gateway's own. A key limited to some models
may act only on those. GET never changes anything.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from llmdeck.gateway.proxy import openai_error

if TYPE_CHECKING:
    from llmdeck.gateway.app import Caller, GatewayState

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
STATIC = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
ACTION_HEADER = "x-llmdeck-ui"
BASIC_REALM = 'Basic realm="llmdeck gateway (user: anything, password: an API key)", charset="UTF-8"'


def ui_routes() -> list[Route]:
    return [
        Route("/ui", _page, methods=["GET"]),
        Route("/ui/", lambda r: RedirectResponse("/ui", 308), methods=["GET"]),
        Route("/ui/static/{name}", _static, methods=["GET"]),
        Route("/ui/api/state", _api_state, methods=["GET"]),
        Route("/ui/api/models/{name}/{action}", _api_action, methods=["POST"]),
        Route("/ui/results/{path:path}", _result, methods=["GET"]),
    ]


@cache
def _asset(name: str) -> bytes:
    return (files("llmdeck.gateway") / "ui" / name).read_bytes()


def _headers(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        **(extra or {}),
    }


def _token(request: Request) -> str | None:
    from llmdeck.gateway.app import _tokens

    auth = request.headers.get("authorization", "")
    if auth[:6].lower() == "basic ":
        try:
            decoded = base64.b64decode(auth[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return next(iter(_tokens(request).values()), None)


def _loopback_host(request: Request) -> bool:
    host = request.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def authorize(request: Request, *, page: bool = False) -> Caller | Response:
    """The caller (a key's name and models, or loopback's "-"), or the 401/403 to send."""
    from llmdeck.gateway.app import Caller, _is_loopback, _state

    st = _state(request)
    token = _token(request)
    if _is_loopback(request) and _loopback_host(request):
        return Caller()  # as /gateway/status: this machine's own users
    if token is None and _is_loopback(request):
        return _deny(
            403, "From this machine, open the dashboard at http://127.0.0.1:PORT/ui (or send a key)."
        )
    if not st.keys.enabled or token is None:
        text = "The dashboard needs an API key from another host (keys: `llmdeck keys create NAME`)."
        return _deny(401, text, page=page and st.keys.enabled)
    record = st.keys.lookup(token)
    if record is None:
        return _deny(401, "The API key is not valid (unknown or revoked).", page=page)
    limits = st.loaded.config.limits.get(record.name)
    models = limits.models if limits is not None and limits.models is not None else record.models
    return Caller(name=record.name, models=models)


def _deny(status: int, text: str, *, page: bool = False) -> Response:
    extra = {"WWW-Authenticate": BASIC_REALM} if page and status == 401 else {}
    resp = openai_error(
        status, text, "invalid_request_error", "invalid_api_key" if status == 401 else "forbidden"
    )
    resp.headers.update(_headers(extra))
    return resp


async def _page(request: Request) -> Response:
    from llmdeck.gateway.app import _logged

    caller = authorize(request, page=True)
    if isinstance(caller, Response):
        return _logged(request, caller)
    headers = _headers({"Content-Security-Policy": PAGE_CSP})
    return _logged(
        request, Response(_asset("index.html"), media_type="text/html", headers=headers), caller.name
    )


async def _static(request: Request) -> Response:
    from llmdeck.gateway.app import _logged

    name = request.path_params["name"]
    caller = authorize(request)
    if isinstance(caller, Response):
        return _logged(request, caller)
    if name not in STATIC:
        missing = {"message": f"The dashboard has no file {name[:100]!r}.", "type": "invalid_request_error"}
        return _logged(
            request, JSONResponse({"error": {**missing, "code": "not_found"}}, 404, headers=_headers())
        )
    headers = _headers({"Cache-Control": "no-cache"})
    return _logged(request, Response(_asset(name), media_type=STATIC[name], headers=headers), caller.name)


async def _api_state(request: Request) -> Response:
    from llmdeck.gateway.app import _logged, _state
    from llmdeck.gateway.ui_state import state_json

    caller = authorize(request)
    if isinstance(caller, Response):
        return _logged(request, caller)
    st = _state(request)
    body = await state_json(st, _context(st))
    return _logged(request, Response(body, media_type="application/json", headers=_headers()), caller.name)


def _context(st: GatewayState) -> Any:
    if st.ui is None:
        from llmdeck.gateway.ui_state import make_context
        from llmdeck.settings import Settings

        st.ui = make_context(st, st.settings if st.settings is not None else Settings())
    return st.ui


def _csrf(request: Request, body: bytes) -> str | None:
    """Why this POST may not come from the dashboard's page, or None."""
    if request.headers.get(ACTION_HEADER) != "1":
        return "Actions need the header `X-Llmdeck-UI: 1` (the dashboard sends it)."
    if "application/json" not in request.headers.get("content-type", ""):
        return "Actions need a JSON body (Content-Type: application/json)."
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        return f"Actions are taken only from the gateway's own page (Origin {origin[:100]!r} is another)."
    from llmdeck.util.jsonsafe import loads

    try:
        parsed = loads(body) if body else None
    except ValueError:
        parsed = None
    return None if isinstance(parsed, dict) else "The body must be a JSON object, e.g. {}."


async def _api_action(request: Request) -> Response:
    from llmdeck.gateway.app import _logged, _state
    from llmdeck.gateway.request_body import read_body
    from llmdeck.gateway.ui_actions import ActionRefused, begin, find

    caller = authorize(request)
    if isinstance(caller, Response):
        return _logged(request, caller)
    st = _state(request)
    raw = await read_body(request, idle_s=st.loaded.config.timeouts.idle_s, limit=64 << 10)
    if isinstance(raw, Response):
        return _logged(request, raw, caller.name)
    why = _csrf(request, raw)
    if why is not None:
        return _logged(request, _error(403, why, "csrf"), caller.name)
    name, action = request.path_params["name"], request.path_params["action"]
    if action not in {"start", "stop", "sleep", "wake"}:
        return _logged(
            request, _error(404, f"No action {action[:40]!r} (start, stop, sleep, wake).", "not_found")
        )
    model = find(st.manager, name) if st.manager is not None else None
    aliases = [r.alias for r in st.loaded.routes if model and any(b.url == model.url for b in r.backends)]
    if model is None or not any(caller.may_use(a) for a in aliases):
        return _logged(request, _error(404, f"No model on demand named {name[:80]!r} here.", "not_found"))
    try:
        begin(st.manager, model, action, _context(st).tasks)  # type: ignore[arg-type]
    except ActionRefused as exc:
        return _logged(request, _error(409, str(exc), "conflict"), caller.name)
    body = {"accepted": True, "model": model.name, "action": action, "state": model.state}
    return _logged(request, JSONResponse(body, 202, headers=_headers()), caller.name)


def _error(status: int, text: str, code: str) -> JSONResponse:
    resp = openai_error(status, text, "invalid_request_error", code)
    resp.headers.update(_headers())
    return resp


async def _result(request: Request) -> Response:
    from llmdeck.gateway.app import _logged, _state
    from llmdeck.gateway.ui_reports import REPORT_CSP, report_path

    caller = authorize(request)
    if isinstance(caller, Response):
        return _logged(request, caller)
    ctx = _context(_state(request))
    path = report_path(ctx.results_dir, request.path_params["path"])
    if path is None:
        return _logged(
            request, _error(404, "No such report in the results folder.", "not_found"), caller.name
        )
    headers = _headers({"Content-Security-Policy": REPORT_CSP})
    return _logged(request, FileResponse(path, media_type="text/html", headers=headers), caller.name)
