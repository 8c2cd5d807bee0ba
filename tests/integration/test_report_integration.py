"""`llmdeck bench … --html` against the real CPU vLLM server: the page is written at the end of the run,
and after Ctrl-C from the partial result; its numbers are the result file's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llmdeck.bench.html.view import FORMATS, json_value
from repo_paths import ROOT
from test_report_html import _parse

pytestmark = pytest.mark.integration


def _env(settings: Any) -> dict[str, str]:
    e = dict(os.environ)
    e["LLMDECK_STATE_DIR"] = str(settings.state_dir)
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def _bench(server: Any, out: Path, html: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llmdeck",
        "bench",
        server.name,
        "--input-len",
        "32",
        "--output-len",
        "8",
        "--metrics-interval",
        "0.5",
        "--out",
        str(out),
        "--html",
        str(html),
        *extra,
    ]


def _same_numbers(html: Path, result: Path) -> int:
    data = json.loads(result.read_text(encoding="utf-8"))
    page = _parse(html.read_text(encoding="utf-8"))
    for n in page.nums:
        value = json_value(data, n["data-src"].split(":", 1)[1])
        assert float(n["data-value"]) == value and n["text"] == FORMATS[n["data-fmt"]](value)
    assert page.figures and all(int(f["points"]) > 0 for f in page.figures)
    return len(page.nums)


def test_bench_html_at_the_end_of_a_run(cpu_server: Any, tmp_path: Path) -> None:
    out, html = tmp_path / "r.json", tmp_path / "pages" / "r.html"
    args = _bench(cpu_server, out, html, "--num-prompts", "4", "--max-concurrency", "1,2")
    proc = subprocess.run(args, env=_env(cpu_server.settings), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "HTML report written to" in proc.stderr and html.is_file()
    data = json.loads(out.read_text())
    # every scenario keeps the monitor's samples
    assert all(s["timeline"] and s["timeline"]["server_t"] for s in data["scenarios"])
    assert _same_numbers(html, out) > 30
    text = html.read_text(encoding="utf-8")
    assert "Sweep over max concurrency" in text and "Over the run" in text


def test_bench_html_refuses_an_unwritable_path_before_running(cpu_server: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = tmp_path / "r.json"
    args = _bench(cpu_server, out, blocker / "r.html", "--num-prompts", "2")
    proc = subprocess.run(args, env=_env(cpu_server.settings), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "not a folder" in proc.stderr and not out.exists()


def test_bench_html_after_ctrl_c_from_the_partial_result(cpu_server: Any, tmp_path: Path) -> None:
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    args = _bench(cpu_server, out, html, "--num-prompts", "200", "--max-concurrency", "1")
    cli = subprocess.Popen(args, env=_env(cpu_server.settings), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if out.exists():
            data = json.loads(out.read_text())
            if data["scenarios"] and sum(r["ok"] for r in data["scenarios"][0]["requests"]) >= 3:
                break
        time.sleep(0.2)
    else:
        cli.kill()
        pytest.fail("no request finished")
    cli.send_signal(signal.SIGINT)
    _, stderr = cli.communicate(timeout=60)
    assert cli.returncode == 130, stderr
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted" and html.is_file(), stderr
    _same_numbers(html, out)
    assert "interrupted" in html.read_text(encoding="utf-8")
