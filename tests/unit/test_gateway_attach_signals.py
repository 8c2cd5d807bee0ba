"""`llmdeck gateway up --attach` (the real CLI, a subprocess) stopped by Ctrl-C or SIGTERM exits 130 / 143
as `up --attach` does (uvicorn.run had swallowed the interrupt it raises again after its shutdown: exit 0),
and a port in use is llmdeck's exit 2 before anything starts (uvicorn's own exit had been 3)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from llmdeck.util.net import free_port
from repo_paths import ROOT


def _gateway(tmp: Path, port: int) -> subprocess.Popen[str]:
    config = tmp / "gateway.yaml"
    config.write_text("routes:\n  - model: fast\n    backends: [http://127.0.0.1:9]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMDECK_")}
    env.update(LLMDECK_STATE_DIR=str(tmp / "state"), PYTHONPATH=str(ROOT / "src"))
    argv = [sys.executable, "-m", "llmdeck", "gateway", "up", "--attach", "-c", str(config), "-p", str(port)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("sig", "code", "says"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")]
)
def test_an_attached_gateway_exits_with_the_signal(
    tmp_path: Path, sig: signal.Signals, code: int, says: str
) -> None:
    port = free_port()
    proc = _gateway(tmp_path, port)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code < 500:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err[-2000:]
    assert says in err and "Traceback" not in err, err[-2000:]


def test_an_attached_gateway_on_a_port_in_use_is_refused_before_it_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        proc = _gateway(tmp_path, busy.getsockname()[1])
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err[-2000:]
    assert "is in use" in err, err[-2000:]
