"""`llmdeck bench` when things go wrong: the server dies mid-run, the user presses Ctrl-C, the
server answers errors. The server here is a named fake (``FakeSlowSSEServer``) run as a separate
process so it can be killed like a real one; the same scenario against real vLLM is in
tests/integration/test_bench_integration.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmdeck.util.net import free_port
from repo_paths import ROOT

FAKE_SERVER = r'''
"""FakeSlowSSEServer: an OpenAI-ish server that streams CHUNKS chunks, DELAY s apart."""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, CHUNKS, DELAY, STATUS = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def _json(self, obj, code=200):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/v1/models":
            self._json({"data": [{"id": "fake", "max_model_len": 4096, "root": "/nonexistent"}]})
        elif self.path == "/health":
            self._json({})
        elif self.path == "/version":
            self._json({"version": "fake-1"})
        elif self.path == "/metrics":
            body = b"vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"
            self.send_response(200); self.send_header("content-length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        else:
            self._json({"error": "nope"}, 404)
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        req = json.loads(self.rfile.read(n))
        if STATUS != 200:
            self._json({"error": {"message": "overloaded, try later"}}, STATUS)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        def send(obj):
            data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data)); self.wfile.flush()
        for i in range(CHUNKS):
            time.sleep(DELAY)
            fin = "length" if i == CHUNKS - 1 else None
            send({"choices": [{"index": 0, "text": "x", "finish_reason": fin}]})
        usage = {"prompt_tokens": 8, "completion_tokens": CHUNKS, "total_tokens": 8 + CHUNKS}
        send({"choices": [], "usage": usage})
        send(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n"); self.wfile.flush()

ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
'''


class FakeSlowSSEServer:
    """The fake above, in its own process (so it can be SIGKILLed mid-stream)."""

    def __init__(self, tmp: Path, chunks: int = 20, delay: float = 0.05, status: int = 200) -> None:
        self.port = free_port()
        script = tmp / "fake_sse_server.py"
        script.write_text(FAKE_SERVER)
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(self.port), str(chunks), str(delay), str(status)]
        )
        deadline = time.monotonic() + 15
        import httpx

        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError("fake server did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def bench_cmd(url: str, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llmdeck",
        "bench",
        url,
        "--out",
        str(out),
        "--metrics-interval",
        "0.5",
        *extra,
    ]


def env(tmp: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["LLMDECK_STATE_DIR"] = str(tmp / "state")
    src = str(ROOT / "src")
    e["PYTHONPATH"] = src + os.pathsep + e.get("PYTHONPATH", "")
    return e


def test_server_killed_mid_run_exits_1_fast_and_keeps_finished_requests(tmp_path: Path) -> None:
    srv = FakeSlowSSEServer(tmp_path, chunks=20, delay=0.05)  # 1 s per request
    out = tmp_path / "r.json"
    try:
        args = ("--num-prompts", "12", "--max-concurrency", "2", "--input-len", "8", "--output-len", "20")
        cli = subprocess.Popen(
            bench_cmd(srv.url, out, *args),
            env=env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # wait until some requests have finished (the file is written as they finish)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists():
                data = json.loads(out.read_text())
                if data["scenarios"] and sum(r["ok"] for r in data["scenarios"][0]["requests"]) >= 3:
                    break
            time.sleep(0.1)
        else:
            pytest.fail("no request finished in time")
        srv.kill()
        killed_at = time.monotonic()
        _, stderr = cli.communicate(timeout=30)
        elapsed = time.monotonic() - killed_at
    finally:
        srv.kill()
    assert cli.returncode == 1, stderr
    assert elapsed < 10
    assert "Traceback" not in stderr and "stopped answering" in stderr
    data = json.loads(out.read_text())
    assert data["status"] == "aborted"
    sc = data["scenarios"][0]
    reqs = sc["requests"]
    assert len(reqs) == 12 and sorted(r["index"] for r in reqs) == list(range(12))
    ok = [r for r in reqs if r["ok"]]
    assert len(ok) >= 3 and all(r["output_tokens"] == 20 and r["ttft"] > 0 for r in ok)
    failed = [r for r in reqs if not r["ok"]]
    assert failed and all(r["error_kind"] in {"dropped", "unreachable", "aborted", "not_run"} for r in failed)
    assert sc["metrics"]["completed"] == len(ok) and sc["metrics"]["failed"] == len(failed)


def test_ctrl_c_leaves_a_valid_partial_file(tmp_path: Path) -> None:
    srv = FakeSlowSSEServer(tmp_path, chunks=20, delay=0.05)
    out = tmp_path / "r.json"
    try:
        args = ("--num-prompts", "12", "--max-concurrency", "2", "--input-len", "8", "--output-len", "20")
        cli = subprocess.Popen(
            bench_cmd(srv.url, out, *args),
            env=env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and any(
                r["ok"] for s in json.loads(out.read_text())["scenarios"] for r in s["requests"]
            ):
                break
            time.sleep(0.1)
        cli.send_signal(signal.SIGINT)
        _, stderr = cli.communicate(timeout=20)
    finally:
        srv.kill()
    assert cli.returncode == 130, stderr
    assert "Traceback" not in stderr
    data = json.loads(out.read_text())
    assert data["status"] == "interrupted"
    reqs = data["scenarios"][0]["requests"]
    assert len(reqs) == 12
    assert any(r["ok"] for r in reqs)
    assert {r["error_kind"] for r in reqs if not r["ok"]} <= {"interrupted", "not_run"}


def test_http_errors_are_failed_requests_with_verdict(tmp_path: Path) -> None:
    srv = FakeSlowSSEServer(tmp_path, status=503)
    out = tmp_path / "r.json"
    try:
        proc = subprocess.run(
            bench_cmd(srv.url, out, "--num-prompts", "3", "--input-len", "8", "--output-len", "4", "--json"),
            env=env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        srv.kill()
    # nothing measured: the command failed (exit 1, the first failure named), the data still printed
    assert proc.returncode == 1, proc.stderr
    assert "Every request failed (3 of them)" in proc.stderr and "503" in proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    sc = data["scenarios"][0]
    assert sc["metrics"]["failed"] == 3 and sc["metrics"]["completed"] == 0
    assert all(r["error_kind"] == "http" and "503" in r["error"] for r in sc["requests"])
    assert "3 of 3 requests failed" in sc["verdict"]["label"]
    assert json.loads(out.read_text())["status"] == "complete"


def test_full_run_against_fake_server_and_report(tmp_path: Path) -> None:
    srv = FakeSlowSSEServer(tmp_path, chunks=5, delay=0.02)
    out = tmp_path / "r.json"
    try:
        proc = subprocess.run(
            bench_cmd(
                srv.url,
                out,
                "--num-prompts",
                "4",
                "--request-rate",
                "20",
                "--output-len",
                "5",
                "--slo",
                "ttft_p99=1ms",
            ),
            env=env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        srv.kill()
    assert proc.returncode == 0, proc.stderr
    assert "TTFT" in proc.stdout and "ttft_p99" in proc.stdout and "<= 1ms FAIL" in proc.stdout
    data = json.loads(out.read_text())
    assert data["schema_version"] == 1 and data["target"]["server_version"] == "fake-1"
    assert data["target"]["max_model_len"] == 4096 and data["host"]["hostname"]
    sc = data["scenarios"][0]
    assert sc["metrics"]["completed"] == 4 and sc["metrics"]["total_output_tokens"] == 20
    assert sc["verdict"]["label"].startswith("not for multi-user (P99 TTFT") and not sc["verdict"]["passed"]
    assert sc["server_metrics"]["engine"] == "vllm" and sc["server_metrics"]["running_max"] == 1.0
    rep = subprocess.run(
        [sys.executable, "-m", "llmdeck", "report", str(out), "--json"],
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rep.returncode == 0 and json.loads(rep.stdout)["scenarios"][0]["metrics"]["completed"] == 4
    bad = subprocess.run(
        [sys.executable, "-m", "llmdeck", "report", str(tmp_path / "missing.json")],
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_unreachable_server_is_exit_1_with_hint(tmp_path: Path) -> None:
    proc = subprocess.run(
        bench_cmd(f"http://127.0.0.1:{free_port()}", tmp_path / "r.json", "--num-prompts", "1"),
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "Cannot bench" in proc.stderr and "Traceback" not in proc.stderr


def test_bad_flags_are_usage_errors(tmp_path: Path) -> None:
    bad = (
        ["--slo", "bogus"],
        ["--request-rate", "fast"],
        ["--workload", "weird"],
        ["--temperature", "-1"],
        ["--top-p", "1.5"],
        ["--suite", "smoke", "--top-k", "-5"],
        ["--repeat", "0"],
    )
    for extra in bad:
        proc = subprocess.run(
            bench_cmd("http://127.0.0.1:9", tmp_path / "r.json", *extra),
            env=env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (extra, proc.stderr)
