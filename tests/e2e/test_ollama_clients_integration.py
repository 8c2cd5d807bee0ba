"""A coding agent that speaks Ollama's own API (the cline CLI's `ollama` provider: `/api/tags`, then
`/api/chat` streamed as newline-delimited JSON) through the gateway to the real CPU engine (conftest's
``capped_server``: 32,768 tokens of context, replies capped at 48 tokens).

The random-weight model never calls cline's tools, so cline's turn cannot complete: each reply runs into the
48-token cap, and cline says so ("maximum output token limit"), which it can only say from the stream's
last line (``done_reason: "length"``). What is proven: every request cline sends is answered 200, and
cline reads the text and the end of each stream.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from real_clients import npm_recorded

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@contextlib.contextmanager
def _stop_hub(project: Path) -> Iterator[None]:
    """cline leaves a hub daemon running for the project it ran in: stop that one (its --cwd)."""
    try:
        yield
    finally:
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "--cline-hub-daemon" in cmd and str(project) in cmd:
                with contextlib.suppress(psutil.Error):
                    proc.kill()


def test_cline_speaks_ollamas_api_through_the_gateway(
    capped_server: Any, session_settings: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cline = npm_recorded("cline")
    text = f"routes:\n  - model: qwen3:8b\n    backends: [{capped_server.base_url}]\n"
    loaded = parse_config(text, source=tmp_path / "gateway.yaml", settings=session_settings)
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (project / "hello.py").write_text('print("hi")\n')
    env = dict(os.environ, HOME=str(home))
    config = home / ".cline"
    caplog.set_level(logging.INFO, logger="llmdeck.gateway.access")
    with UvicornThread(build_app(loaded)) as gw, _stop_hub(project):
        auth = [str(cline), "auth", "-p", "ollama", "-k", "none", "-m", "qwen3:8b", "--config", str(config)]
        subprocess.run(auth, env=env, cwd=project, capture_output=True, text=True, timeout=120)
        # `cline auth` takes no base URL for ollama (it assumes localhost:11434): its settings file does
        providers = config / "data" / "settings" / "providers.json"
        settings = json.loads(providers.read_text())
        settings["providers"]["ollama"]["settings"]["baseUrl"] = gw.url
        providers.write_text(json.dumps(settings))
        run = subprocess.run(
            [str(cline), "--config", str(config), "-P", "ollama", "-m", "qwen3:8b", "-t", "240", "Say hi."],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
        )
    said = run.stdout + run.stderr
    access = [r.getMessage() for r in caplog.records if r.name == "llmdeck.gateway.access"]
    chats = [line for line in access if line.startswith("POST /api/chat ")]
    assert chats and all("status=200" in line for line in chats), "\n".join(access) + said[-2000:]
    assert any(line.startswith("GET /api/tags ") for line in access)  # cline lists the models first
    assert "maximum output token limit" in said, said[-3000:]  # the last line's done_reason, read
