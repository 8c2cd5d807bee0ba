"""bench's is-the-server-gone check (bench/load.py ScenarioRun._health) against a TINY FAKE /health."""

from __future__ import annotations

import asyncio

import httpx
import pytest


@pytest.mark.parametrize(("status", "alive"), [(200, True), (404, True), (401, True), (503, False)])
def test_bench_calls_a_server_gone_only_when_health_fails_for_real(status: int, alive: bool) -> None:
    """A server with no /health route (404: Ollama-like) had been called "stopped answering /health" and
    the run aborted while it answered every request."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from types import SimpleNamespace

    from llmdeck.bench.load import ScenarioRun

    class Health(BaseHTTPRequestHandler):  # a TINY FAKE answering /health with ``status``
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def ask() -> bool:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.server_address[1]}") as http:
            return await ScenarioRun._health(SimpleNamespace(client=SimpleNamespace(_http=http)))  # type: ignore[arg-type]

    try:
        assert asyncio.run(ask()) is alive
    finally:
        server.shutdown()
