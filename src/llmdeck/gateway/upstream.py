"""What the gateway sends a backend for one request, and the sending: the body per backend (its served
model name), the headers (the backend's key, no compression asked), the first-byte timeout; a backend
that gives no reply, or a web page for one, is an ``UpstreamFailure`` (proxy.forward tries the next).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from llmdeck.errors import InternalError
from llmdeck.gateway.outcap import Lowered, lowered, note
from llmdeck.gateway.roomcap import count_first, countable
from llmdeck.gateway.routing import BackendState

OFF_LOOP_BYTES = 1 << 20  # a body parsed and encoded again in a thread, not on the event loop
TOO_DEEP = "The request body nests too deeply to pass on (JSON arrays or objects inside each other)."


class UpstreamFailure(InternalError):
    """A backend that gave no reply (the gateway tries the next one, or answers ``status``).

    ``reason`` is a metrics label; ``detail`` says it in words (no exception class names); ``refused``:
    the connection was refused (nothing listens there now: nothing was sent, a retry is safe)."""

    def __init__(self, status: int, reason: str, detail: str, *, refused: bool = False) -> None:
        super().__init__(detail)
        self.status, self.reason, self.detail, self.refused = status, reason, detail, refused


@dataclass
class Upstream:
    """What to send: method, path (with query), headers and body, and the timeouts."""

    method: str
    path: str
    headers: list[tuple[bytes, bytes]]  # as the client sent them: a header value need not be ASCII
    body: bytes
    first_byte_s: float
    json_body: dict[str, Any] | None = None  # re-serialised per backend: its served model name
    whole_s: float | None = None  # a reply that is no stream asked for: complete within this long of the send
    stream: bool = False  # the client asked for a stream (``"stream": true``)
    api: str = "other"  # surfaces.api_of(path): where the output cap is (outcap)
    lowered: Lowered | None = None  # the output cap as the last backend tried was sent it, if lowered
    tries: int = 0  # sent again for a 400 about its output cap (outcap.retry, roomcap.fit)
    fit: int | None = None  # the cap fitted to the prompt's room (roomcap.fit; AS_SENT: the client's)
    counted: tuple[str, float] | None = None  # roomcap's count of the prompt: outcome, milliseconds
    counted_on: str | None = None  # the backend (URL) whose count ``fit`` and ``counted`` are
    # each backend URL's served model as this route's config names it: two routes on one server (a base
    # model and its LoRA adapter) share its state, not its name (the first route's had been sent for both)
    served: dict[str, str | None] = field(default_factory=dict)

    def model_for(self, state: BackendState) -> str | None:
        """The model name this request goes to ``state`` with: the route's (None: the one the server
        lists first), else the backend's."""
        if self.served and state.url in self.served:
            return state.name_for(self.served[state.url])
        return state.model_name()

    def cap_note(self) -> tuple[str, str | None]:
        """What the access log adds about the output cap (`` lowered=32000->16373 count=fits:4.2ms``)
        and how it was lowered (a metrics label: context, room; None when it was not)."""
        note, how = "", None
        if self.lowered is not None:
            how = "context" if self.fit is None else "room"
            note = f" lowered={self.lowered.asked}->{self.lowered.to}"
        if self.counted is not None:
            note += f" count={self.counted[0]}:{self.counted[1]:.1f}ms"
        return note, how

    def content_for(self, state: BackendState) -> bytes:
        """The body for this backend (its served model name; an output cap over its context lowered to
        it, outcap); UnsendableBody when the client's body cannot be encoded again (nested past the
        encoder's depth, or a lone surrogate in a string)."""
        if self.json_body is None:
            return self.body
        served = self.model_for(state)
        if served:
            self.json_body["model"] = served
        body, self.lowered = self.json_body, None
        limit = state.max_model_len if self.fit is None else self.fit or None  # AS_SENT: none
        if state.reserves_cap and not countable(state, self.api, body):  # it refuses the lowered cap: as sent
            limit = None
        if (low := lowered(self.api, body, limit)) is not None:
            body, self.lowered = low
            if self.fit is None:  # a cap fitted to one prompt's room: roomcap's log line said it
                note(state.noted, state.backend.label, self.api, self.lowered)
        try:
            return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        except RecursionError:
            raise UnsendableBody(TOO_DEEP) from None
        except UnicodeEncodeError:
            raise UnsendableBody(
                "The request body holds a lone UTF-16 surrogate (such as \\ud800), which is no text; "
                "send valid Unicode."
            ) from None


class UnsendableBody(InternalError):
    """A client's JSON body the gateway cannot send on: the client's mistake (a 400), not the backend's."""


async def open_upstream(client: httpx.AsyncClient, state: BackendState, up: Upstream) -> httpx.Response:
    headers = list(up.headers)  # the client's credentials are dropped already (DROP_REQUEST)
    # and its Accept-Encoding: without one httpx asks for gzip, relayed to a client that never asked
    headers.append((b"accept-encoding", b"identity"))
    if state.backend.api_key:
        headers.append((b"authorization", f"Bearer {state.backend.api_key}".encode()))
    await count_first(client, state, up)  # a cap sure to be refused for the prompt's room: fitted first
    big = len(up.body) > OFF_LOOP_BYTES  # 30 MB took 1.6 s to encode: every other client waited
    content = await asyncio.to_thread(up.content_for, state) if big else up.content_for(state)
    request = client.build_request(
        up.method, state.url + up.path, headers=headers, content=content, timeout=_timeout(client, up)
    )
    late = UpstreamFailure(504, "first_byte_timeout", f"no answer within {up.first_byte_s:g} s")
    try:
        async with asyncio.timeout(up.first_byte_s):
            resp = await client.send(request, stream=True)
    except TimeoutError as exc:
        raise late from exc
    except httpx.ConnectTimeout as exc:
        raise UpstreamFailure(504, "connect_timeout", "the connection timed out") from exc
    except httpx.TimeoutException as exc:
        raise late from exc
    except httpx.HTTPError as exc:  # in words (the 502, the status's last_error): no exception class names
        what = "cannot connect" if isinstance(exc, httpx.ConnectError) else "the connection broke"
        refused = isinstance(exc, httpx.ConnectError) and isinstance(exc.__cause__, ConnectionRefusedError)
        words = (f"{what} ({exc})" if str(exc) else what)[:200]
        raise UpstreamFailure(502, "connect_error", words, refused=refused) from exc
    await _refuse_web_page(resp)
    return resp


def _timeout(client: httpx.AsyncClient, up: Upstream) -> httpx.Timeout:
    """The client's timeouts; a reply that is no stream is silent until it is whole, so its read timeout
    is the whole answer's (``response_s``), not the idle one between chunks (it had cut such a reply
    at ``idle_s`` and marked the backend down)."""
    t = client.timeout
    if up.stream or up.whole_s is None:
        return t
    return httpx.Timeout(connect=t.connect, read=max(t.read or 0.0, up.whole_s), write=t.write, pool=t.pool)


async def _refuse_web_page(resp: httpx.Response) -> None:
    """A success (or redirect) that is an HTML page is no model's reply: a login page, a captive portal,
    a URL that points at a website. Relayed, a client would take it for a reply (or fail to parse it);
    treated as a failed backend instead: marked down, the next replica tried, else a 502 that says so.
    (An HTML 4xx/5xx is relayed as any error is; other types pass: /v1/audio answers audio.)"""
    kind = resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if resp.status_code < 400 and kind in {"text/html", "application/xhtml+xml"}:
        await resp.aclose()
        raise UpstreamFailure(
            502,
            "not_an_api_reply",
            f"it answered HTTP {resp.status_code} with a web page ({kind}), not JSON or an event stream: "
            "is the URL that of an OpenAI-compatible server (not a login page or a website)?",
        )
