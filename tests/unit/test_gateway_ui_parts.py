"""The dashboard's parts that read the machine and the results folder, on data that had broken them."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest


def test_an_ollama_model_with_more_vram_than_size_does_not_break_the_memory_pool() -> None:
    """Ollama has reported size_vram > size (ollama#17251): the negative host share had failed the
    pool's validation, a 500 on every /ui/api/state poll."""
    from llmdeck.gateway.ui_state import host_pool

    mem = SimpleNamespace(total=64 << 30, free=32 << 30, page_cache=4 << 30)
    pool = host_pool(mem, [], [], [("llama3:8b", 1_000_000, 2_000_000), ("qwen:7b", 5 << 30, 1 << 30)], False)
    ollama = [s for s in pool.segments if s.kind == "ollama"]
    assert [(s.name, s.bytes) for s in ollama] == [("ollama:qwen:7b", 4 << 30)]


def test_a_report_whose_name_is_no_utf8_is_skipped_not_every_report(tmp_path: Path) -> None:
    """One file named with bytes that are no UTF-8 had raised in the scan, and the page listed none."""
    from llmdeck.gateway.ui_reports import scan_reports

    (tmp_path / "good.html").write_text("<html></html>")
    bad = os.fsencode(str(tmp_path)) + b"/bad\xff.html"
    with open(bad, "w") as fh:
        fh.write("<html></html>")
    assert [r.name for r in scan_reports(tmp_path)] == ["good.html"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fake", ["fake_trickle_server", "fake_trickle_headers_server"])
def test_the_ollama_reader_is_bounded_as_a_whole_against_a_trickling_peer(fake: str) -> None:
    """Something on Ollama's port that sends a byte every 0.5 s (its body, or its headers) never let a
    socket read time out: the worker thread was held for ever (a frozen panel, and a gateway whose
    shutdown waited on it). Now the exchange ends by OLLAMA_LIMIT_S, as "no Ollama"."""
    from fake_servers import running
    from llmdeck.gateway.ui_sources import read_ollama

    with running(fake) as url:
        port = int(url.rsplit(":", 1)[1])
        out: list[Any] = []
        worker = threading.Thread(target=lambda: out.append(read_ollama(port=port)), daemon=True)
        t0 = time.monotonic()
        worker.start()
        worker.join(15)
    assert out == [[]] and time.monotonic() - t0 < 10  # OLLAMA_LIMIT_S, 3 s


def test_the_ollama_reader_reads_a_well_behaved_api_ps() -> None:
    """fake_ollama_ps: the reader still reads a real answer (the timer is cancelled, nothing hangs up)."""
    from http.server import ThreadingHTTPServer

    from http_fakes import JsonHandler
    from llmdeck.gateway.ui_sources import read_ollama

    class FakeOllamaPs(JsonHandler):
        def do_GET(self) -> None:
            self._json(200, {"models": [{"name": "qwen:7b", "size": 5 << 30, "size_vram": 4 << 30}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOllamaPs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert read_ollama(port=server.server_address[1]) == [("qwen:7b", 5 << 30, 4 << 30)]
    finally:
        server.shutdown()
        server.server_close()
