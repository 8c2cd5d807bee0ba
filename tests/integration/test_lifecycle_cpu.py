"""The lifecycle end to end on the real CPU engine (venv path), one keyed server ("life"), in order:

1. `up -- --api-key KEY` in the background: ready (readiness sends the key), vLLM enforces the key it
   got through VLLM_API_KEY, and the key is in no argv (`ps`), log, record or `status --json`; status
   lists it next to the session's other named servers.
2. Ctrl-C to a real `llmdeck bench` against it leaves the promised partial result, which `report` reads.
3. The server dies (SIGKILL to its process group, as an OOM kill would) while a bench and a gateway
   stream run on it: the bench exits 1 within 10 s keeping what finished, the stream ends with an error
   event and the gateway sends the next request to the other backend; status says dead with the log
   tail; restart brings it back on the same port with the key it was started with; `down --drain` lets a
   running stream end whole. The logs survive.

(One server for what had been three: the security module's keyed server and the bench's and the
gateway's victims, each a CPU vLLM start of its own.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from cli_helpers import run_cli as cli
from gateway_fakes import UvicornThread
from llmdeck.util.net import free_port
from repo_paths import ROOT
from security_helpers import SECRET, llmdeck_cmd, run_llmdeck

pytestmark = pytest.mark.integration
KEY = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture(scope="module")
def life(
    cpu_server: Any, cpu_server_plain: Any, tiny_model_dir: Path, session_settings: Any
) -> Iterator[dict[str, Any]]:
    """`llmdeck up -- --api-key SECRET` in the session's state dir (one server for this module)."""
    env = {
        **os.environ,
        "LLMDECK_STATE_DIR": str(session_settings.state_dir),
        "LLMDECK_CACHE_DIR": str(session_settings.cache_dir),
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    env.pop("LLMDECK_API_KEY", None)
    port = free_port()
    args = ["up", "--model", str(tiny_model_dir), "--engine", "cpu", "--name", "life", "--port", str(port)]
    args += ["--served-model-name", "life-tiny", "--json"]
    args += ["--", "--max-model-len", "2048", "--api-key", SECRET]
    try:  # an up that runs past its timeout may have started the server: the finally stops it too
        proc = subprocess.run(llmdeck_cmd(*args), env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr
        yield {"env": env, "port": port, "record": json.loads(proc.stdout), "out": proc.stdout + proc.stderr}
    finally:
        subprocess.run(llmdeck_cmd("down", "life"), env=env, capture_output=True, timeout=120)


def test_up_with_a_key_keeps_it_out_of_argv_log_record_and_status(life: dict[str, Any]) -> None:
    port, record, env = life["port"], life["record"], life["env"]
    assert record["name"] == "life" and record["spec"]["port"] == port
    assert "loading" in life["out"].lower() or "api" in life["out"].lower(), "startup phases were not shown"
    base = f"http://127.0.0.1:{port}"
    assert httpx.get(f"{base}/v1/models", timeout=10).status_code == 401  # vLLM enforces the key
    models = httpx.get(f"{base}/v1/models", headers=KEY, timeout=10).json()
    assert models["data"][0]["id"] == "life-tiny"
    assert SECRET not in life["out"]
    assert SECRET not in " ".join(psutil.Process(record["pid"]).cmdline())  # not in `ps`
    assert SECRET not in Path(record["log_path"]).read_text()  # vLLM's own arg dump has no key either
    assert SECRET not in (Path(env["LLMDECK_STATE_DIR"]) / "servers" / "life.json").read_text()

    # a second named server at the same time: the session's servers are in the same state dir
    status = subprocess.run(llmdeck_cmd("status", "--json"), env=env, capture_output=True, text=True)
    assert status.returncode == 0 and SECRET not in status.stdout
    states = {s["name"]: s for s in json.loads(status.stdout)}
    assert {"life", "ci-tools", "ci-plain"} <= set(states)
    assert states["life"]["state"] == "ready" and states["ci-tools"]["state"] == "ready"
    assert states["life"]["port"] != states["ci-tools"]["port"]
    assert states["life"]["metrics"] is not None and "kv_usage" in states["life"]["metrics"]


def test_ctrl_c_mid_bench_on_the_real_engine(life: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cli_ = _bench(life, out, "--output-len", "48", "--metrics-interval", "0.5")
    _until_two_finished(out, cli_)
    cli_.send_signal(signal.SIGINT)
    _, stderr = cli_.communicate(timeout=60)
    assert cli_.returncode == 130, stderr
    assert f"is in {out}" in stderr.replace("\n", "") and "Traceback" not in stderr
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted"
    reqs = data["scenarios"][0]["requests"]
    assert len(reqs) == 40 and sum(r["ok"] for r in reqs) >= 2
    assert SECRET not in out.read_text()
    report = run_llmdeck(tmp_path, "report", str(out), "--json")
    assert report.returncode == 0, report.stderr


def test_killed_mid_work_then_status_restart_and_down(
    life: dict[str, Any],
    cpu_server: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("LLMDECK_STATE_DIR", "LLMDECK_CACHE_DIR"):
        monkeypatch.setenv(name, life["env"][name])
    _killed_mid_work(life, cpu_server, tmp_path)

    # status says dead and shows its log tail
    for _ in range(50):
        code, out, _ = cli(["status", "life", "--json"], capsys)
        if json.loads(out)[0]["state"] == "dead":
            break
        time.sleep(0.2)
    dead = json.loads(out)[0]
    assert dead["state"] == "dead"
    last_line = Path(dead["log_path"]).read_text().strip().splitlines()[-1]
    assert dead["log_tail"] and last_line.strip()[-30:] in dead["log_tail"]  # the tail drops log prefixes

    _restart_keeps_port_model_and_key(life, capsys)
    code, out, _ = cli(["logs", "life", "-n", "5"], capsys)
    assert code == 0 and out.strip() and SECRET not in out

    # down --drain: a stream the server is running ends whole (vLLM's own stop had cut it mid-answer)
    port = life["port"]
    stream = _Stream(port)
    code, out, err = cli(["down", "life", "--drain", "120", "--json"], capsys)
    assert code == 0 and json.loads(out)["life"] in {"stopped", "killed"}
    assert "1 request(s) running" in err and "all finished after" in err, err
    assert stream.finished(), stream.lines[-3:]
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    code, _, err = cli(["down", "life"], capsys)
    assert code == 2 and "life" in err


def _bench(life: dict[str, Any], out: Path, *extra: str) -> subprocess.Popen[str]:
    args = ["bench", "life", "--out", str(out), "--num-prompts", "40", "--max-concurrency", "2"]
    args += ["--input-len", "16", *extra]
    env = {**life["env"], "LLMDECK_API_KEY": SECRET}
    pipe = subprocess.PIPE
    return subprocess.Popen(llmdeck_cmd(*args), env=env, stdout=pipe, stderr=pipe, text=True)


def _until_two_finished(out: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists():
            data = json.loads(out.read_text())
            if data["scenarios"] and sum(r["ok"] for r in data["scenarios"][0]["requests"]) >= 2:
                return
        time.sleep(0.2)
    pytest.fail(f"no two requests finished on the server: {proc.poll()=}")


def _killed_mid_work(life: dict[str, Any], cpu_server: Any, tmp_path: Path) -> None:
    """SIGKILL while a bench runs on it and a gateway streams from it (route `pair`: life, then
    ci-tools): the bench exits 1 within 10 s with the finished requests kept and the rest marked
    failed; the stream ends with an error event; the next request is served by the other backend."""
    from llmdeck.gateway.app import build_app
    from llmdeck.gateway.config import parse_config

    out = tmp_path / "victim.json"
    bench = _bench(life, out, "--output-len", "64")
    _until_two_finished(out, bench)
    text = f"routes:\n  - model: pair\n    backends: [life, {cpu_server.name}]\n"
    loaded = parse_config(text, source=tmp_path / "gw.yaml", settings=cpu_server.settings)
    with UvicornThread(build_app(loaded)) as server:
        body = {"model": "pair", "prompt": "one two", "max_tokens": 1500, "stream": True, "ignore_eos": True}
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=60) as r:
            chunks = r.iter_raw()
            seen = next(chunks)
            os.killpg(os.getpgid(life["record"]["pid"]), signal.SIGKILL)  # the whole engine dies
            killed = time.monotonic()
            for chunk in chunks:
                seen += chunk
        _, stderr = bench.communicate(timeout=60)
        assert time.monotonic() - killed < 10 and bench.returncode == 1, stderr
        last = seen.strip().split(b"\n\n")[-1]
        assert b'"error"' in last and b"stream_broken" in last
        reply = httpx.post(
            f"{server.url}/v1/completions", json={**body, "stream": False, "max_tokens": 4}, timeout=60
        )
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4
        backends = httpx.get(f"{server.url}/gateway/status").json()["routes"][0]["backends"]
        assert [b["healthy"] for b in backends] == [False, True]
    data = json.loads(out.read_text())
    assert data["status"] == "aborted"
    reqs = data["scenarios"][0]["requests"]
    assert len(reqs) == 40 and sum(r["ok"] for r in reqs) >= 2
    assert all(r["error_kind"] for r in reqs if not r["ok"])


def _restart_keeps_port_model_and_key(life: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """restart: the same port and model, the flag given after `--` in place of the recorded one, the
    key it was started with (from its 0600 secrets file, in no argv); the old log is kept."""
    code, out, err = cli(["restart", "life", "--json", "--", "--max-model-len", "1024"], capsys)
    assert code == 0, err
    again = json.loads(out)
    assert again["spec"]["port"] == life["port"] and again["pid"] != life["record"]["pid"]
    args = again["spec"]["vllm_args"]  # and the KV size unified memory sizing set, once
    assert args.count("--max-model-len") == 1 and args[args.index("--max-model-len") + 1] == "1024"
    assert args.count("--kv-cache-memory-bytes") <= 1 and SECRET not in out + err
    base = f"http://127.0.0.1:{life['port']}"
    assert httpx.get(f"{base}/v1/models", timeout=10).status_code == 401
    models = httpx.get(f"{base}/v1/models", headers=KEY, timeout=10).json()
    assert models["data"][0]["id"] == "life-tiny" and models["data"][0]["max_model_len"] == 1024
    log_path = Path(again["log_path"])
    assert log_path.with_name(log_path.name + ".1").exists(), "the crashed run's log must survive"


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
        url = f"http://127.0.0.1:{port}/v1/completions"
        try:
            with httpx.stream("POST", url, json=body, headers=KEY, timeout=120) as r:
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
