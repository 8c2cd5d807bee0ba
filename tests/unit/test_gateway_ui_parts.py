"""The dashboard's parts that read the machine and the results folder, on data that had broken them."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace


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
