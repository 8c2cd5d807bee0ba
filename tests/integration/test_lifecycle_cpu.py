"""The lifecycle end to end on the real CPU engine (venv path), through the CLI.

up in the background -> status (next to the session's other named servers) -> the server is
killed -> status reports it dead with its log tail -> restart -> down. The logs survive.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from cli_helpers import run_cli as cli
from llmdeck.util.net import free_port

pytestmark = pytest.mark.integration


def test_up_status_kill_restart_down(
    cpu_server: object,
    cpu_server_plain: object,
    tiny_model_dir: Path,
    session_settings: object,
    stop_at_end: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state_dir = session_settings.state_dir  # type: ignore[attr-defined]
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(state_dir))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(session_settings.cache_dir))  # type: ignore[attr-defined]
    port = free_port()
    stop_at_end("life")

    code, out, err = cli(
        [
            "up",
            "--model",
            str(tiny_model_dir),
            "--engine",
            "cpu",
            "--name",
            "life",
            "--port",
            str(port),
            "--served-model-name",
            "life-tiny",
            "--json",
            "--",
            "--max-model-len",
            "2048",
        ],
        capsys,
    )
    assert code == 0, err
    record = json.loads(out)
    assert record["name"] == "life" and record["spec"]["port"] == port
    assert "loading" in err.lower() or "api" in err.lower(), "startup phases were not shown"
    models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    assert models["data"][0]["id"] == "life-tiny"

    # a second named server at the same time: the session's servers are in the same state dir
    code, out, _ = cli(["status", "--json"], capsys)
    assert code == 0
    states = {s["name"]: s for s in json.loads(out)}
    assert {"life", "ci-tools", "ci-plain"} <= set(states)
    assert states["life"]["state"] == "ready" and states["ci-tools"]["state"] == "ready"
    assert states["life"]["port"] != states["ci-tools"]["port"]
    assert states["life"]["metrics"] is not None and "kv_usage" in states["life"]["metrics"]

    # the server dies (as if OOM-killed): status says dead and shows its log tail
    os.killpg(os.getpgid(record["pid"]), signal.SIGKILL)
    for _ in range(50):
        code, out, _ = cli(["status", "life", "--json"], capsys)
        if json.loads(out)[0]["state"] == "dead":
            break
        time.sleep(0.2)
    dead = json.loads(out)[0]
    assert dead["state"] == "dead"
    last_line = Path(dead["log_path"]).read_text().strip().splitlines()[-1]
    assert dead["log_tail"] and last_line.strip()[-30:] in dead["log_tail"]  # the tail drops log prefixes

    # restart brings it back on the same port with the same model, the flag given after `--` in
    # place of the recorded one; the old log is kept
    code, out, err = cli(["restart", "life", "--json", "--", "--max-model-len", "1024"], capsys)
    assert code == 0, err
    again = json.loads(out)
    assert again["spec"]["port"] == port and again["pid"] != record["pid"]
    args = again["spec"]["vllm_args"]  # and the KV size unified memory sizing set, once
    assert args.count("--max-model-len") == 1 and args[args.index("--max-model-len") + 1] == "1024"
    assert args.count("--kv-cache-memory-bytes") <= 1
    models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    assert models["data"][0]["id"] == "life-tiny" and models["data"][0]["max_model_len"] == 1024
    log_path = Path(again["log_path"])
    assert log_path.with_name(log_path.name + ".1").exists(), "the crashed run's log must survive"

    code, out, _ = cli(["logs", "life", "-n", "5"], capsys)
    assert code == 0 and out.strip()

    # down --drain: a stream the server is running ends whole (vLLM's own stop had cut it mid-answer)
    stream = _Stream(port)
    code, out, err = cli(["down", "life", "--drain", "120", "--json"], capsys)
    assert code == 0 and json.loads(out)["life"] in {"stopped", "killed"}
    assert "1 request(s) running" in err and "all finished after" in err, err
    assert stream.finished(), stream.lines[-3:]
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    code, _, err = cli(["down", "life"], capsys)
    assert code == 2 and "life" in err


class _Stream:
    """A long streamed completion, running (its first chunk came) once this is made."""

    def __init__(self, port: int) -> None:
        self.lines: list[str] = []
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(port,), daemon=True)
        self._thread.start()
        assert self._first.wait(60), "the stream never began"

    def _read(self, port: int) -> None:
        body = {"model": "life-tiny", "prompt": "hi", "max_tokens": 400, "ignore_eos": True, "stream": True}
        try:
            with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=120) as r:
                for line in r.iter_lines():
                    self.lines.append(line)
                    self._first.set()
        except httpx.HTTPError as exc:  # cut off: what the test reports
            self.lines.append(f"cut off: {exc!r}")
        self._first.set()

    def finished(self) -> bool:
        self._thread.join(120)
        said = [x for x in self.lines if x]
        return said[-1:] == ["data: [DONE]"] and any('"finish_reason":"length"' in x for x in said)
