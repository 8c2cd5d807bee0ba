"""The HTML report in a real headless browser (Debian's chromium): the page loads with no console
message and no network request of its own, every chart is drawn with data, and the numbers the browser
shows are the JSON's. A control page (an image from the network, a console.error) proves the harness
sees both. Skipped where chromium is not installed (`apt-get install chromium`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from llmdeck.bench.html.page import render_html
from llmdeck.bench.html.view import FORMATS, json_value
from llmdeck.bench.result_file import load_result
from test_report_html import CMP_A, CMP_B, H200_SEEDS, OVERLOAD, SEEDS, SWEEP, _parse

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# a real chromium: an integration test (tests/integration, `make integration` installs it)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
    pytest.mark.integration,
]
QUIET = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--enable-logging=stderr",
    "--v=0",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _load(page: Path, tmp: Path) -> tuple[str, list[str], list[str]]:
    """(the DOM after load, console lines, URLs the page itself requested) from chromium's own logs:
    ``--dump-dom`` and the NetLog, where the page's requests carry the file:// isolation key (the
    browser's own update/account pings do not)."""
    netlog = tmp / f"{page.stem}.netlog.json"
    proc = subprocess.run(
        [str(CHROMIUM), *QUIET, f"--log-net-log={netlog}", "--dump-dom", page.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    log = json.loads(netlog.read_text(encoding="utf-8"))
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = [
        e["params"]["url"]
        for e in log["events"]
        if e["type"] == start_job and "file://" in str(e.get("params", {}).get("network_isolation_key", ""))
    ]
    return proc.stdout, console, urls


def test_the_harness_sees_a_network_request_and_a_console_error(tmp_path: Path) -> None:
    bad = tmp_path / "control.html"
    bad.write_text('<img src="http://example.invalid/x.png"><script>console.error("boom")</script>')
    _, console, urls = _load(bad, tmp_path)
    assert urls == ["http://example.invalid/x.png"] and any('"boom"' in c for c in console)


@pytest.mark.parametrize(
    "files",
    [[SEEDS], [SWEEP], [OVERLOAD], [CMP_A, CMP_B], [H200_SEEDS], [SEEDS, H200_SEEDS]],
    ids=["seeds", "sweep", "overload", "compare", "h200-seeds", "cpu-vs-h200"],
)
def test_page_in_chromium(files: list[Path], tmp_path: Path) -> None:
    results = [load_result(f) for f in files]
    page = tmp_path / "report.html"
    page.write_text(render_html(results, [str(f) for f in files]), encoding="utf-8")
    dom, console, urls = _load(page, tmp_path)
    assert console == [] and urls == []
    parsed = _parse(dom)
    assert parsed.figures and all(f["svgs"] == 1 and int(f["points"]) > 0 for f in parsed.figures)
    # every chart's SVG in the browser's DOM has a drawn data line (a path of 3+ points) or markers
    svgs = re.findall(r"<svg.*?</svg>", dom, flags=re.S)
    assert len(svgs) == len(parsed.figures)
    for svg in svgs:
        lines = [d for d in re.findall(r'<path[^>]* d="([^"]*)"', svg) if d.count("L") >= 2]
        assert lines or "<use " in svg
    data = [r.model_dump(mode="json") for r in results]
    assert parsed.nums
    for n in parsed.nums:
        file_no, path = n["data-src"].split(":", 1)
        value = json_value(data[int(file_no)], path)
        assert float(n["data-value"]) == value and n["text"] == FORMATS[n["data-fmt"]](value)


def test_hostile_strings_do_not_run_in_chromium(tmp_path: Path) -> None:
    res = load_result(OVERLOAD)
    res.target.model = "<script>console.error('xss-model')</script>"
    res.target.server_args = ["vllm", "<img src=http://example.invalid/flag.png>"]
    res.scenarios[0].spec.description = "<svg onload=console.error('xss-svg')>"
    page = tmp_path / "evil.html"
    page.write_text(render_html([res], ["evil.json"]), encoding="utf-8")
    dom, console, urls = _load(page, tmp_path)
    assert console == [] and urls == []
    assert "&lt;script&gt;console.error('xss-model')&lt;/script&gt;" in dom
