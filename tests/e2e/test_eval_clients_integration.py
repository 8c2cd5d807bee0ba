"""`llmdeck eval --client claude-code` and `--client codex` end to end on the real CPU engine: the real
clients (npm, the pinned versions, installed into .cache/clients/<client> if absent) run one task
headless against a named llmdeck server, then the hidden tests run.

The server is the session's capped_server (conftest): the tiny model at --max-model-len 32768 (Claude
Code's base prompt and tools are ~12k tokens; codex's ~9k), replies capped at 48 tokens (conftest says
why). The random weights score 0; what is proven is that each client ran under the eval's limits,
its events were parsed into turns, tokens and a transcript, every request it made was answered 200
(the server's own access log), and the result file was written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llmdeck.evals.agents import PINNED
from real_clients import npm_pinned
from repo_paths import ROOT

# integration (the real CPU engine) and e2e (the real agent binaries): tests/e2e
pytestmark = [pytest.mark.integration, pytest.mark.e2e]
ROUTES = {"claude-code": "/v1/messages", "codex": "/v1/responses"}


def llmdeck(*args: str, state: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(state), COLUMNS="150")
    return subprocess.run(
        [sys.executable, "-m", "llmdeck", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


@pytest.mark.parametrize("client", ["claude-code", "codex"])
def test_the_real_client_through_the_eval(
    client: str, capped_server: Any, session_settings: Any, tmp_path: Path
) -> None:
    exe = npm_pinned(client)
    log = Path(capped_server.log_path)
    offset = len(log.read_text(errors="replace"))
    out, page = tmp_path / "eval.json", tmp_path / "eval.html"
    res = llmdeck(
        "eval", "--client", client, "--task", "fix-intervals", "--server", capped_server.name,
        "--agent-bin", str(exe), "--max-turns", "3", "--timeout", "300", "--out", str(out),
        "--html", str(page), "--keep", str(tmp_path / "kept"),
        state=session_settings.state_dir,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "llmdeck.eval.result" and doc["status"] == "complete"
    assert doc["client"] == client and doc["client_version"] == PINNED[client]
    (run,) = doc["runs"]
    assert run["status"] == "done", run.get("error")
    agent = run["agent"]
    assert agent["unreached"] is None and agent["session_id"], agent["transcript"]
    assert 1 <= len(agent["turns"]) <= 3 and agent["wall_s"] < 300, agent["turns"]  # the eval's limits
    assert agent["tokens"]["input"] > 5000  # the client's own base prompt and tools reached the server
    kinds = [e["kind"] for e in agent["transcript"]]
    assert kinds[0] == "prompt" and len(kinds) > 1 and "merge.py" in agent["transcript"][0]["text"]
    assert any(t["server_ttft_ms"] is not None for t in agent["turns"]), agent["turns"]
    tests = run["tests"]
    assert tests["total"] == 8 and not run["passed"] and run["score"] == 0.0
    assert doc["summary"]["random_weights"] is True and doc["summary"]["runs_unreachable"] == 0
    assert client in page.read_text()
    # every request the client made went to the API it speaks and was answered 200
    access = log.read_text(errors="replace")[offset:]
    served = re.findall(r'"(?:POST|GET|HEAD) (\S+) HTTP/1\.1" (\d{3})', access)
    posts = [(path.split("?")[0], code) for path, code in served if path.startswith(ROUTES[client])]
    assert posts and all(code == "200" for _, code in posts), served
    raw = (tmp_path / "kept" / "fix-intervals-1" / "logs" / "agent-stdout-1.txt").read_text()
    assert raw.strip() and all(line.startswith("{") for line in raw.splitlines() if line.strip())
