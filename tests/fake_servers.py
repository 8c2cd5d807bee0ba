"""Misbehaving servers on 127.0.0.1 for the fuzz suite: tiny fakes, each named for what it fakes.

Each fake is a raw threaded TCP server (not an HTTP library), so it can also be silent, trickle,
speak something that is not HTTP, or hang up. ``FAKES`` maps the name to its behaviour; use
``running(name)`` as a context manager that yields the base URL.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from repo_paths import TEST_FIXTURES

MODELS_OK = {"object": "list", "data": [{"id": "fake", "object": "model", "max_model_len": 4096}]}
LLAMACPP_PAGES = {"/props": "props.json", "/v1/models": "models.json"}
CHAT_OK = {
    "id": "x",
    "object": "chat.completion",
    "model": "fake",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}
STREAM_MARK = "#stream"  # appended to the path of a request whose JSON body asks for a stream
HOSTILE_ID = "x$(touch /tmp/llmdeck-pwned);y\x1b[31m`id`"


def _reply(conn: socket.socket, status: int, body: bytes | str, ctype: str = "application/json") -> None:
    data = body.encode() if isinstance(body, str) else body
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    )
    conn.sendall(head.encode() + data)


def _json(conn: socket.socket, status: int, obj: Any) -> None:
    _reply(conn, status, json.dumps(obj))


@functools.cache
def gzip_bomb() -> bytes:
    """64 MiB of zeros, gzipped twice: about 300 bytes that inflate, in one piece, to 64 MiB."""
    return gzip.compress(gzip.compress(bytes(64 << 20)))


def _gzip_bomb(conn: socket.socket, path: str) -> None:
    """Every reply a 200 whose body is ``gzip_bomb()``, sent as ``Content-Encoding: gzip, gzip``."""
    body = gzip_bomb()
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip, gzip\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    conn.sendall(head.encode() + body)


def _bad_usage(conn: socket.socket, path: str) -> None:
    """/version answers a JSON list; every chat reply, streamed or not, reports -5 prompt tokens."""
    usage = {"prompt_tokens": -5, "completion_tokens": 1, "total_tokens": -4}
    if path == "/version":
        _json(conn, 200, [1, 2])
    elif not path.endswith(STREAM_MARK):
        _json(conn, 200, {**CHAT_OK, "usage": usage})
    else:
        delta = {"id": "x", "choices": [{"index": 0, "delta": {"content": "Hi"}}]}
        end = {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
        events = "".join(f"data: {json.dumps(e)}\n\n" for e in (delta, end))
        _reply(conn, 200, events + "data: [DONE]\n\n", "text/event-stream")


def _health_ok_else(fn: Callable[[socket.socket, str], None]) -> Callable[[socket.socket, str], None]:
    """Like vLLM: /health answers 200 without a key; everything else goes to ``fn``."""

    def handle(conn: socket.socket, path: str) -> None:
        if path == "/health":
            _reply(conn, 200, b"")
        else:
            fn(conn, path)

    return handle


def _status(code: int, body: str) -> Callable[[socket.socket, str], None]:
    return lambda conn, path: _reply(conn, code, body)


def _models(obj: Any) -> Callable[[socket.socket, str], None]:
    def handle(conn: socket.socket, path: str) -> None:
        if path.startswith("/v1/models"):
            _json(conn, 200, obj)
        else:
            _json(conn, 404, {"detail": "Not Found"})

    return handle


def _trickle(conn: socket.socket, path: str) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
    while True:  # a byte every 0.5 s: never a read timeout, never an end
        conn.sendall(b" ")
        time.sleep(0.5)


def _trickle_stream(conn: socket.socket, path: str) -> None:
    if path.startswith("/v1/models"):
        _json(conn, 200, MODELS_OK)
        return
    if path in ("/health", "/version", "/metrics"):
        _json(conn, 404, {})
        return
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    while True:  # SSE comments only: bytes keep coming, no token ever does
        conn.sendall(b": keep-alive\n\n")
        time.sleep(0.5)


def _sse_cut(conn: socket.socket, path: str) -> None:
    """/v1/models answers; every other reply is a chunked SSE stream cut after its first event (no
    [DONE], no final chunk): the peer died mid-stream."""
    if path.startswith("/v1/models"):
        _json(conn, 200, MODELS_OK)
        return
    event = b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    conn.sendall(f"{len(event):x}\r\n".encode() + event + b"\r\n")
    conn.shutdown(socket.SHUT_RDWR)


def _sse_stall(conn: socket.socket, path: str) -> None:
    """Like a healthy server until a stream: its first event comes, then nothing (the socket stays
    open): an engine stuck mid-generation."""
    if path.startswith("/v1/models"):
        _json(conn, 200, MODELS_OK)
        return
    if not path.startswith("/v1/chat/completions"):
        _json(conn, 404, {})
        return
    if not path.endswith(STREAM_MARK):  # a plain chat request is answered, as a healthy engine does
        _json(conn, 200, CHAT_OK)
        return
    event = b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + event)
    time.sleep(3600)


def _trickle_headers(conn: socket.socket, path: str) -> None:
    """Accepts, then sends its status line and headers a byte every 0.5 s, then nothing: every read
    returns in time, so only a deadline over the whole exchange ends the wait."""
    for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"y" * 200:
        conn.sendall(bytes([byte]))
        time.sleep(0.5)
    time.sleep(3600)


def _status_line_only(conn: socket.socket, path: str) -> None:
    """The status line, then silence (the headers never end)."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    time.sleep(3600)


def _models_then_trickle_headers(conn: socket.socket, path: str) -> None:
    """/v1/models answers; every request after it gets its headers trickled (a stuck engine behind a
    proxy that keeps the connection warm)."""
    if path.startswith("/v1/models"):
        _json(conn, 200, MODELS_OK)
    elif path in ("/health", "/version", "/metrics"):
        _json(conn, 404, {})
    else:
        _trickle_headers(conn, path)


def _silent(conn: socket.socket, path: str) -> None:
    time.sleep(3600)


DEEP_ARGS = "[" * 5000 + "]" * 5000  # nested past Python's JSON decoder: RecursionError, no ValueError


def _deep_tool_args(conn: socket.socket, path: str) -> None:
    """Every chat request answered with a tool call whose arguments nest past the decoder (streamed
    when asked); /v1/messages likewise, as a tool_use whose streamed input is that string."""
    if path.startswith("/v1/models"):
        _json(conn, 200, MODELS_OK)
        return
    fn = {"name": "get_weather", "arguments": DEEP_ARGS}
    if path.startswith("/v1/messages"):
        events = [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t"}},
            {"type": "content_block_delta", "index": 0, "delta": {"partial_json": DEEP_ARGS}},
            {"type": "content_block_stop", "index": 0},
        ]
        _reply(conn, 200, "".join(f"data: {json.dumps(e)}\n\n" for e in events), "text/event-stream")
    elif path.endswith(STREAM_MARK):
        call = {"index": 0, "id": "c1", "type": "function", "function": fn}
        delta = {"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
        end = {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        events = "".join(f"data: {json.dumps(e)}\n\n" for e in (delta, end))
        _reply(conn, 200, events + "data: [DONE]\n\n", "text/event-stream")
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": fn}],
        }
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        _json(conn, 200, {**CHAT_OK, "choices": [choice]})


def _non_http(conn: socket.socket, path: str) -> None:
    conn.sendall(b"\x00\xff\xfeSSH-2.0-OpenSSH_9.6 definitely not HTTP\r\n\r\n")


def _close(conn: socket.socket, path: str) -> None:
    pass  # hang up without a word


FAKES: dict[str, Callable[[socket.socket, str], None]] = {
    "fake_401_server": _health_ok_else(_status(401, '{"error": "Unauthorized"}')),
    "fake_403_server": _health_ok_else(_status(403, '{"error": "Forbidden"}')),
    "fake_404_server": _status(404, '{"detail": "Not Found"}'),
    "fake_500_server": _status(500, "Internal Server Error"),
    "fake_html_server": lambda c, p: _reply(c, 200, "<html><body>router login</body></html>", "text/html"),
    "fake_garbage_server": lambda c, p: _reply(c, 200, b"\x89\x00\xffgarbage{{{", "application/json"),
    "fake_wrong_shape_dict_server": _health_ok_else(_models({"data": {}})),
    "fake_wrong_shape_list_server": _health_ok_else(_models([])),
    "fake_wrong_shape_no_id_server": _health_ok_else(_models({"data": [{"no_id": 1}]})),
    "fake_wrong_shape_items_server": _health_ok_else(_models({"data": [1, "two", None]})),
    "fake_empty_body_server": lambda c, p: _reply(c, 200, b""),
    # JSON nested deeper than Python's decoder follows (RecursionError, not ValueError): 400 kB
    "fake_deep_json_server": lambda c, p: _reply(c, 200, b"[" * 200_000 + b"]" * 200_000, "application/json"),
    "fake_non_http_server": _non_http,
    "fake_gzip_bomb_server": _gzip_bomb,
    "fake_bad_usage_server": _bad_usage,
    "fake_closing_server": _close,
    "fake_silent_server": _silent,
    "fake_trickle_server": _trickle,
    "fake_trickle_stream_server": _trickle_stream,
    "fake_trickle_headers_server": _trickle_headers,
    "fake_status_line_only_server": _status_line_only,
    "fake_models_then_trickle_headers_server": _models_then_trickle_headers,
    "fake_sse_cut_server": _health_ok_else(_sse_cut),
    "fake_sse_stall_server": _health_ok_else(_sse_stall),
    # a 200 to every chat request that is no chat completion (a proxy rewriting replies)
    "fake_chat_not_a_completion_server": _health_ok_else(
        lambda c, p: _json(c, 200, MODELS_OK if p.startswith("/v1/models") else {"choices": "nope"})
    ),
    # a stuck engine: /health and /v1/models answer, a generation request gets no reply at all
    "fake_models_then_silent_server": _health_ok_else(
        lambda c, p: _json(c, 200, MODELS_OK) if p.startswith("/v1/models") else _silent(c, p)
    ),
    "fake_hostile_strings_server": _health_ok_else(
        lambda c, p: (
            _json(c, 200, {"data": [{"id": HOSTILE_ID, "max_model_len": 32768}]})  # a bad one: below
            if p.startswith("/v1/models")
            else _reply(c, 500, "\x1b[2J\x1b]0;owned\x07 $(reboot)")
        )
    ),
    # a context length no server has: -5 tokens
    "fake_bad_context_server": _health_ok_else(_models({"data": [{"id": "fake", "max_model_len": -5}]})),
    # llama-server's /props (tests/fixtures/llamacpp/props.json, real) and its 404 for vLLM's /version
    "fake_llamacpp_props_server": lambda c, p: (
        _reply(c, 200, (TEST_FIXTURES / "llamacpp" / LLAMACPP_PAGES[p]).read_bytes())
        if p in LLAMACPP_PAGES
        else _json(c, 404, {"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}})
    ),
    # model ids that are not UTF-8 (decoded with replacement characters, a name nothing serves); the
    # second fake lists a good one beside it
    "fake_non_utf8_id_server": _health_ok_else(
        lambda c, p: (
            _reply(c, 200, b'{"data": [{"id": "q\xff\xfe", "max_model_len": 4096}]}')
            if p.startswith("/v1/models")
            else _json(c, 500, {})
        )
    ),
    "fake_some_non_utf8_ids_server": _health_ok_else(
        lambda c, p: (
            _reply(c, 200, b'{"data": [{"id": "q\xff"}, {"id": "fake", "max_model_len": 4096}]}')
            if p.startswith("/v1/models")
            else _json(c, 500, {})
        )
    ),
    # tool calls whose arguments nest past the JSON decoder
    "fake_deep_tool_args_server": _health_ok_else(_deep_tool_args),
    # answers /v1/models well, fails everything else: for input errors found after the first question
    "fake_models_only_server": _health_ok_else(
        lambda c, p: _json(c, 200, MODELS_OK) if p.startswith("/v1/models") else _json(c, 500, {})
    ),
}


def _read_request(conn: socket.socket) -> str:
    """The request path ('' when the peer sent nothing parseable); the body is read and dropped."""
    conn.settimeout(5)
    data = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for line in lines[1:]:
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1].strip() or 0)
    with contextlib.suppress(OSError):
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
    parts = lines[0].split(" ")
    path = parts[1] if len(parts) > 1 else ""
    with contextlib.suppress(ValueError, AttributeError):
        if json.loads(rest).get("stream") is True:
            path += STREAM_MARK
    return path


class FakeServer:
    """One fake on a free 127.0.0.1 port, serving each connection in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.handler = FAKES[name]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self._conns.append(conn)
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            path = "" if self.name in {"fake_non_http_server", "fake_closing_server"} else _read_request(conn)
            self.handler(conn, path)
        with contextlib.suppress(OSError):
            conn.close()

    def close(self) -> None:
        self._stop.set()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        self.sock.close()
        self._thread.join(timeout=2)


@contextlib.contextmanager
def running(name: str) -> Iterator[str]:
    """``with running("fake_silent_server") as url: ...``"""
    server = FakeServer(name)
    try:
        yield server.url
    finally:
        server.close()
