"""The eval harness without a model: a tiny fake agent (``fake_agent``, speaking aider's output) and a tiny
fake OpenAI server (``fake_vllm_server``: /v1/models, /version and real vLLM /metrics pages from the H200
fixtures) drive the real runner — limits, the result file, interruption, per-turn server TTFT — and the CLI's
answers to bad input. The real agent on the real engine: test_eval_integration.py."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from http_fakes import JsonHandler
from llmdeck.bench.result_schema import TargetInfo
from llmdeck.evals.results import is_eval_file, load_eval_result
from llmdeck.evals.runner import EvalOptions, run_eval
from llmdeck.evals.spec import find_task
from llmdeck.settings import Settings
from repo_paths import ROOT

FIX = Path("/work/shared/fixtures/vllm-0.22.0-h200")

FAKE_AGENT = r'''#!PYTHON
"""fake_agent: prints what aider prints; FAKE_AGENT says how it behaves."""
import os, shutil, subprocess, sys, time
if "--version" in sys.argv:
    print("aider 0.86.2"); sys.exit(0)
mode = os.environ["FAKE_AGENT"]
print("Aider v0.86.2\nModel: openai/fake with whole edit format", flush=True)
if mode == "solve":
    shutil.copytree(os.environ["FAKE_SOLUTION"], ".", dirs_exist_ok=True)
    print("I fixed intervals/merge.py.\nTokens: 1.2k sent, 30 received.", flush=True)
elif mode == "loop":
    while True:
        print("Tokens: 2.5k sent, 12 received.", flush=True); time.sleep(0.1)
elif mode == "slow":
    for _ in range(600):
        print("Tokens: 1k sent, 5 received.", flush=True); time.sleep(1.0)
elif mode == "replay":  # a real client's output (FAKE_REPLAY), then it lingers FAKE_SLEEP seconds
    print(open(os.environ["FAKE_REPLAY"]).read(), flush=True)
    time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
elif mode == "leak":  # a tool call that echoes the environment: the key, and a token in KEY=VALUE form
    print("$ env\nARGV=" + " ".join(sys.argv[1:]) + "\nHF_TOKEN=hf_abcdefghijklmnopqrstuvwx", flush=True)
    print("key in use: " + sys.argv[sys.argv.index("--openai-api-key") + 1], file=sys.stderr, flush=True)
elif mode == "idle":  # a client that starts, talks to no model and exits 0
    pass
elif mode == "hang":
    child = subprocess.Popen(["sleep", "300"])
    open(os.environ["FAKE_PIDFILE"], "w").write(str(child.pid))
    time.sleep(300)
elif mode == "daemon":  # leaves a background process (a dev server, a watcher) running and exits 0
    child = subprocess.Popen(["sleep", "300"], start_new_session=False)
    open(os.environ["FAKE_PIDFILE"], "w").write(str(child.pid))
'''


class _Metrics(JsonHandler):
    """fake_vllm_server: the H200 run's /metrics before its bench for the first four scrapes (the start time,
    the cache config, the monitor's first sample, the turn meter's start), after it from the first turn on."""

    scrapes = 0

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "fake", "max_model_len": 32768}]})
        elif self.path == "/version":
            self._json(200, {"version": "0.22.0"})
        elif self.path == "/metrics":
            type(self).scrapes += 1
            page = "before" if type(self).scrapes <= 4 else "after"
            data = (FIX / f"metrics-qwen3-0.6b-{page}.txt").read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(404, {})


@pytest.fixture
def fake_vllm_server() -> Iterator[str]:
    _Metrics.scrapes = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


@pytest.fixture
def fake_agent(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "aider"
    path.parent.mkdir()
    path.write_text(FAKE_AGENT.replace("PYTHON", sys.executable))
    path.chmod(0o755)
    return path


def _run(url: str, agent: Path, tmp_path: Path, **kw: Any) -> Any:
    out = tmp_path / "eval.json"
    options = EvalOptions(client="aider", binary=agent, out_path=out, **kw)
    tasks = [find_task("fix-intervals")]
    target = TargetInfo(base_url=url, model="")
    return asyncio.run(run_eval(tasks, target, options, Settings(state_dir=tmp_path / "state"))), out


def test_a_solving_agent_scores_1_and_everything_is_recorded(
    fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT", "solve")
    monkeypatch.setenv("FAKE_SOLUTION", str(find_task("fix-intervals").solution_dir))
    result, out = _run(fake_vllm_server, fake_agent, tmp_path, keep_dir=tmp_path / "keep")
    (run,) = result.runs
    assert run.status == "done" and run.passed and run.score == 1.0 and run.tests.total == 8
    agent = run.agent
    assert agent.client_version == "0.86.2" and agent.exit_codes == [0] and agent.limit_hit is None
    assert [(t.tokens.input, t.tokens.output) for t in agent.turns] == [(1200, 30)]
    assert agent.turns[0].server_ttft_ms == pytest.approx(
        1000 * (0.785158634185791 - 0.14227557182312012) / 20, rel=1e-3
    )
    assert agent.transcript[0].kind == "prompt" and "I fixed" in agent.transcript[1].text
    assert "merge.py" in agent.diff_stat and "--openai-api-key" in agent.argv
    assert run.server_metrics is not None and run.server_metrics.samples >= 2
    assert result.target.model == "fake" and result.target.server_version == "0.22.0"
    assert result.server_cache_config == {
        "cache_dtype": "auto",
        "block_size": "16",
        "enable_prefix_caching": "True",
        "gpu_memory_utilization": "0.92",
        "num_gpu_blocks": "73932",
    }
    assert result.summary.score == 1.0 and result.summary.verdict.startswith("score 1.00")
    assert result.tasks[0].reference_ok and len(result.tasks[0].hidden_tests) == 8
    saved = load_eval_result(out)
    assert is_eval_file(out) and saved.status == "complete" and saved.runs[0].passed
    kept = tmp_path / "keep" / "fix-intervals-1"
    assert (kept / "workspace" / "intervals" / "merge.py").is_file()
    assert "Tokens: 1.2k sent" in (kept / "logs" / "agent-stdout-1.txt").read_text()


def test_secrets_the_agent_prints_are_not_kept(
    fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent runs with the server's key in its argv or environment: what it prints (a `printenv`, an
    error quoting its config) went into the result file and its page as it came."""
    monkeypatch.setenv("FAKE_AGENT", "leak")
    key = "sk-llmdeck-0123456789abcdef"
    result, out = _run(fake_vllm_server, fake_agent, tmp_path, api_key=key)
    agent = result.runs[0].agent
    shown = " ".join(e.text for e in agent.transcript) + agent.stderr_tail
    assert "ARGV=" in shown and "key in use: <redacted>" in agent.stderr_tail, shown
    saved = out.read_text(encoding="utf-8")
    for secret in (key, "hf_abcdefghijklmnopqrstuvwx"):
        assert secret not in shown and secret not in saved


def test_the_key_in_the_clients_words_on_an_unreachable_model_is_not_kept() -> None:
    """A client that could not reach the model says so in its own words, kept as ``unreached.message``
    (and the run's error, its sentence): a client quoting its config there ("Incorrect API key provided:
    KEY") had put the key in the result file and its page, though the transcript's copy was hidden."""
    from llmdeck.evals.agentbase import scrub_secrets
    from llmdeck.evals.results import AgentRun, ModelUnreached, TranscriptEntry

    key = "sk-llmdeck-0123456789abcdef"
    said = f"AuthenticationError: Incorrect API key provided: {key}"
    run = AgentRun(client="aider", unreached=ModelUnreached(kind="auth", status=401, message=said))
    run.transcript.append(TranscriptEntry(t_s=0.1, prompt=0, kind="text", text=said))
    scrub_secrets(run, key)
    assert run.unreached is not None and key not in run.unreached.sentence()
    assert run.unreached.message.startswith("AuthenticationError: Incorrect API key")
    assert key not in run.model_dump_json()


def test_the_turn_limit_stops_the_agent(
    fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT", "loop")
    result, _ = _run(fake_vllm_server, fake_agent, tmp_path, limits={"max_turns": 3})
    agent = result.runs[0].agent
    assert agent.limit_hit == "turns" and len(agent.turns) == 3 and agent.tokens.input == 7500
    assert agent.transcript[-1].kind == "limit" and "3 turns" in agent.transcript[-1].text
    assert result.runs[0].status == "done" and not result.runs[0].passed  # the tests still ran


def test_the_time_limit_kills_the_agent_and_its_children(
    fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = tmp_path / "child.pid"
    monkeypatch.setenv("FAKE_AGENT", "hang")
    monkeypatch.setenv("FAKE_PIDFILE", str(pidfile))
    t0 = time.monotonic()
    result, _ = _run(fake_vllm_server, fake_agent, tmp_path, limits={"timeout_sec": 2.0})
    assert result.runs[0].agent.limit_hit == "time" and time.monotonic() - t0 < 60
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        stat = Path(f"/proc/{child}/stat").read_text() if Path(f"/proc/{child}/stat").exists() else ""
        if ") Z " in stat:  # a zombie is dead
            break
        time.sleep(0.1)
    stat = Path(f"/proc/{child}/stat")
    assert not stat.exists() or ") Z " in stat.read_text()


def test_an_interrupted_eval_keeps_the_finished_runs(
    fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT", "loop")

    class Stop:
        def message(self, text: str) -> None: ...
        def turn(self, run: Any, turn: Any) -> None: ...
        def run_end(self, run: Any) -> None: ...

        def run_start(self, run: Any, index: int, total: int) -> None:
            if index == 1:
                raise KeyboardInterrupt

    out = tmp_path / "eval.json"
    options = EvalOptions(client="aider", binary=fake_agent, out_path=out, repeat=2, limits={"max_turns": 1})
    target = TargetInfo(base_url=fake_vllm_server, model="")
    settings = Settings(state_dir=tmp_path / "state")
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run_eval([find_task("fix-intervals")], target, options, settings, Stop()))
    saved = load_eval_result(out)
    assert saved.status == "interrupted" and [r.status for r in saved.runs] == ["done", "interrupted"]
    assert saved.summary.runs == 1 and saved.runs[0].tests is not None


def test_the_html_page_of_one_and_of_two_configurations(
    fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("FAKE_AGENT", "loop")
    _, out = _run(fake_vllm_server, fake_agent, tmp_path, limits={"max_turns": 1})
    doc = json.loads(out.read_text())
    doc["target"]["server_args"] = ["--model", "m", "--kv-cache-dtype", "fp8"]
    a, b = tmp_path / "fp8.json", tmp_path / "bf16.json"
    a.write_text(json.dumps(doc))
    doc["target"]["server_args"] = ["--model", "m"]
    b.write_text(json.dumps(doc))
    code, _, err = run_cli(["report", str(a), str(b), "--html", str(tmp_path / "cmp.html")], capsys)
    assert code == 0, err
    page = (tmp_path / "cmp.html").read_text()
    assert "2 serving configurations" in page and "--kv-cache-dtype" in page and "(not set)" in page
    assert "<script" not in page and "fix-intervals" in page
    code, out_text, _ = run_cli(["report", str(a)], capsys)
    assert code == 0 and "fix-intervals #1" in out_text and "score 0.00" in out_text
    code, _, err = run_cli(["report", str(a), "--against", str(b)], capsys)
    assert code == 2 and "bench results" in err
    # a committed bench result beside an eval result: refused, not mixed (this path was a helper's
    # worktree, so the check was skipped everywhere else)
    bench = ROOT / "evidence/report/results/seeds.json"
    code, _, err = run_cli(["report", str(a), str(bench), "--html", str(tmp_path / "x.html")], capsys)
    assert code == 2 and "cannot be mixed" in err


def test_bad_input_is_one_paragraph_and_exit_2(
    capsys: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_cli(["eval", "--client", "nope", "--task", "fix-intervals"], capsys)
    assert code == 2 and "Unknown eval client 'nope'" in err and "opencode, aider" in err
    code, _, err = run_cli(["eval", "--client", "opencode", "--task", "fem-poisson"], capsys)
    assert code == 2 and "Did you mean 'fem-poisson-1d'" in err
    code, _, err = run_cli(["eval", "--client", "opencode", "--suite", "nope"], capsys)
    assert code == 2 and "Unknown eval suite" in err
    code, _, err = run_cli(["eval", "--client", "opencode"], capsys)
    assert code == 2 and "--task NAME" in err
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = run_cli(["eval", "--client", "opencode", "--task", "fix-intervals"], capsys)
    assert code == 2 and "opencode is not installed" in err and "npm install -g opencode-ai" in err
    code, _, err = run_cli(["eval", "-c", "aider", "-t", "fix-intervals", "--agent-bin", "/no/such"], capsys)
    assert code == 2 and "not an executable" in err
    assert "Traceback" not in err


def test_an_unreachable_server_is_exit_1(capsys: Any, fake_agent: Path, tmp_path: Path) -> None:
    from llmdeck.util.net import free_port

    t0 = time.monotonic()
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run_cli(
        ["eval", "-c", "aider", "-t", "fix-intervals", "-s", url, "--agent-bin", str(fake_agent)], capsys
    )
    assert code == 1 and "Traceback" not in err and time.monotonic() - t0 < 60
    assert "127.0.0.1" in err


def test_verify_cli_and_tasks_cli(capsys: Any) -> None:
    code, out, _ = run_cli(["eval", "verify", "--task", "refactor-shapes", "--json"], capsys)
    assert code == 0 and json.loads(out)[0]["ok"] is True
    code, out, _ = run_cli(["eval", "tasks", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0 and "fem-poisson-1d" in {t["name"] for t in doc["tasks"]} and "core" in doc["suites"]


def test_agent_env_isolates_home_and_puts_our_python_first(tmp_path: Path) -> None:
    from llmdeck.evals.agents import AgentSetup, agent_env

    setup = AgentSetup(
        tmp_path / "ws", tmp_path / "home", "http://x", "m", None, Path("/bin/true"), "/opt/py/bin"
    )
    env = agent_env(setup)
    assert env["HOME"] == str(tmp_path / "home") and env["XDG_CONFIG_HOME"].startswith(str(tmp_path / "home"))
    assert env["PATH"].startswith("/opt/py/bin" + os.pathsep) and env["PWD"] == str(tmp_path / "ws")
    assert not any(k.startswith("PYTHONPATH") for k in env)


def test_ctrl_c_keeps_the_finished_runs_and_stops_the_agent(
    fake_vllm_server: str, fake_agent: Path, tmp_path: Path
) -> None:
    """A real SIGINT to `llmdeck eval` (a subprocess) during its second run: exit 130, the first run kept."""
    import signal
    import subprocess

    out = tmp_path / "eval.json"
    env = dict(os.environ, FAKE_AGENT="slow", PYTHONPATH=str(ROOT / "src"))
    env["LLMDECK_STATE_DIR"] = str(tmp_path / "state")
    argv = [sys.executable, "-m", "llmdeck", "eval", "-c", "aider", "-t", "fix-intervals", "--repeat", "2"]
    argv += ["-s", fake_vllm_server, "--agent-bin", str(fake_agent), "--max-turns", "3", "--out", str(out)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        doc = json.loads(out.read_text()) if out.is_file() else None
        if doc and doc["runs"][0]["status"] == "done" and doc["runs"][1]["status"] == "running":
            break
        time.sleep(0.3)
    time.sleep(1.5)  # the second run's agent is up
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and str(out) in err and "Traceback" not in err
    saved = load_eval_result(out)
    assert saved.status == "interrupted" and [r.status for r in saved.runs] == ["done", "interrupted"]
    assert saved.runs[0].agent is not None and saved.runs[0].agent.limit_hit == "turns"
    left = subprocess.run(["pgrep", "-f", str(fake_agent)], capture_output=True, text=True).stdout.split()
    assert not left, f"agent processes left: {left}"


def test_random_weights_are_named_in_the_verdict(tmp_path: Path) -> None:
    from llmdeck.evals.results import EvalResult, EvalSummary, summarize
    from llmdeck.evals.runner import _is_random_model

    dummy = TargetInfo(
        base_url="http://h", model="m", server_args=["vllm", "serve", "--load-format", "dummy"]
    )
    assert _is_random_model(dummy) is True
    assert _is_random_model(TargetInfo(base_url="http://h", model="m")) is None
    # a URL server whose model folder is on this host: a config and no weights means random weights
    # (the H200 run's case, where the server's flags were not known); a weight file means real ones
    shape = tmp_path / "shape"
    shape.mkdir()
    (shape / "config.json").write_text("{}")
    by_url = TargetInfo(base_url="http://h", model="m", tokenizer=str(shape))
    assert _is_random_model(by_url) is True
    (shape / "model-00001-of-00002.safetensors").write_bytes(b"")
    assert _is_random_model(by_url) is False
    from llmdeck.bench.monitor import host_facts

    result = EvalResult(
        client="opencode", target=dummy, host=host_facts(), summary=EvalSummary(random_weights=True)
    )
    assert "no task run finished" in summarize(result).verdict


def test_an_agent_that_cannot_start_aborts_with_the_result_kept(
    fake_vllm_server: str, tmp_path: Path
) -> None:
    from llmdeck.errors import OperationError

    broken = tmp_path / "aider"
    broken.write_text("#!/no/such/interpreter\n")
    broken.chmod(0o755)
    with pytest.raises(OperationError, match="Cannot start aider"):
        _run(fake_vllm_server, broken, tmp_path)
    saved = load_eval_result(tmp_path / "eval.json")
    assert saved.status == "aborted" and saved.runs[0].status == "error" and "Cannot start" in saved.error


def test_outputs_are_checked_before_any_agent_runs(capsys: Any, fake_agent: Path, tmp_path: Path) -> None:
    """--keep into a run folder of the user's, --keep on a file, --html on the --out file or the user's
    notes: each had been found only after the agents ran (or, for --html, the result file was replaced
    by the page, exit 0). The server is unreachable here: reaching it would be exit 1, not 2."""
    from llmdeck.util.net import free_port

    url = f"http://127.0.0.1:{free_port()}"
    base = ["eval", "-c", "aider", "-t", "fix-intervals", "-s", url, "--agent-bin", str(fake_agent)]
    mine = tmp_path / "keep" / "fix-intervals-1"
    mine.mkdir(parents=True)
    (mine / "precious.txt").write_text("mine\n")
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    for extra, said in (
        (["--keep", str(tmp_path / "keep")], "llmdeck did not make"),
        (["--keep", str(notes)], "is a file, not a folder"),
        (["--out", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.json")], "are the same file"),
        (["--html", str(notes)], "not a report page llmdeck wrote"),
    ):
        code, _, err = run_cli([*base, *extra], capsys)
        assert code == 2 and said in err and "--force" not in err, (extra, err)
    assert (mine / "precious.txt").read_text() == "mine\n" and notes.read_text() == "my notes\n"


def _hanging_task(tmp_path: Path, timeout_sec: float) -> tuple[Path, Path]:
    """fix-intervals whose hidden tests hang (one writes its pid first), with the verifier's limit set."""
    import shutil

    from llmdeck.evals.spec import TASKS_DIR

    task = tmp_path / "hangtest"
    shutil.copytree(TASKS_DIR / "fix-intervals", task, ignore=shutil.ignore_patterns("__pycache__"))
    pid_file = tmp_path / "pytest.pid"
    for test in (task / "tests").glob("test_*.py"):
        test.unlink()
    (task / "tests" / "test_hang.py").write_text(
        "import os, time\n\ndef test_hang():\n"
        f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    time.sleep(1000)\n"
    )
    toml = (
        (task / "task.toml")
        .read_text()
        .replace("[verifier]\ntimeout_sec = 60.0", f"[verifier]\ntimeout_sec = {timeout_sec}")
    )
    (task / "task.toml").write_text(toml.split("[wrong]")[0])
    return task, pid_file


def test_hidden_tests_that_hang_are_named_as_such(capsys: Any, tmp_path: Path) -> None:
    """The verdict had been "reference: no hidden test ran: ;" for tests stopped at their limit."""
    task, _ = _hanging_task(tmp_path, 2.0)
    code, out, _ = run_cli(["eval", "verify", "--task", str(task), "--json"], capsys)
    problems = json.loads(out)[0]["problems"]
    assert code == 1 and problems == [
        "reference: the hidden tests did not end within 2 s (verifier.timeout_sec)"
    ]


def test_ctrl_c_during_verify_stops_the_hidden_tests(tmp_path: Path) -> None:
    """pytest runs in its own session (the time limit kills its group): a Ctrl-C of `eval verify` had left
    it running, orphaned, its folder already deleted."""
    import signal
    import subprocess

    import psutil

    task, pid_file = _hanging_task(tmp_path, 300.0)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(tmp_path / "state"))
    argv = [sys.executable, "-m", "llmdeck", "eval", "verify", "--task", str(task)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, err
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the hidden tests outlived the eval"
        time.sleep(0.1)


@pytest.mark.parametrize("odd", ["fifo", "symlink loop", "symlink out"])
def test_a_task_folder_with_what_a_sandbox_cannot_copy_is_bad_input(
    odd: str, capsys: Any, tmp_path: Path
) -> None:
    """A FIFO or a symlink loop in workspace/ had been an internal error when the run copied it; a
    symlink to /etc would have brought the host's file into the sandbox."""
    import shutil

    from llmdeck.evals.spec import TASKS_DIR

    task = tmp_path / "odd"
    shutil.copytree(TASKS_DIR / "fix-intervals", task, ignore=shutil.ignore_patterns("__pycache__"))
    where = task / "workspace" / "thing"
    if odd == "fifo":
        os.mkfifo(where)
    else:
        where.symlink_to("." if odd == "symlink loop" else "/etc/hostname")
    code, _, err = run_cli(["eval", "verify", "--task", str(task)], capsys)
    said = "a named pipe" if odd == "fifo" else "a symbolic link"
    assert code == 2 and said in err and "internal error" not in err, err


def test_a_client_that_never_asks_the_model_is_not_scored(
    capsys: Any, fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that exited 0 without one model turn had been scored (exit 0, "complete")."""
    monkeypatch.setenv("FAKE_AGENT", "idle")
    out = tmp_path / "r.json"
    argv = _aider_on_fix_intervals(fake_vllm_server, fake_agent)
    code, _, err = run_cli([*argv, "--out", str(out)], capsys)
    assert code == 1 and "never reached the model" in err and "without a model turn" in err, err
    run = load_eval_result(out).runs[0]
    assert run.status == "unreachable" and run.score is None


def test_what_an_agent_left_running_in_its_group_is_stopped_when_it_exits(
    capsys: Any, fake_vllm_server: str, fake_agent: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that exited 0 leaving a background process (a dev server it started) had left it running
    in its group for ever, free to edit the workspace while it was scored, and the eval waited the task's
    whole time limit for the output that process held open."""
    import time
    from contextlib import suppress

    import psutil

    pid_file = tmp_path / "daemon.pid"
    monkeypatch.setenv("FAKE_AGENT", "daemon")
    monkeypatch.setenv("FAKE_PIDFILE", str(pid_file))
    argv = _aider_on_fix_intervals(fake_vllm_server, fake_agent)
    t0 = time.monotonic()
    run_cli([*argv, "--out", str(tmp_path / "r.json"), "--task-timeout", "120"], capsys)
    child = int(pid_file.read_text())
    assert time.monotonic() - t0 < 60, "waited for the output the agent's leftover held open"
    try:
        gone = not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
        assert gone, "the agent's background process outlived it"
    finally:
        with suppress(ProcessLookupError):
            os.kill(child, 9)


def _aider_on_fix_intervals(server: str, agent: Path) -> list[str]:
    return ["eval", "-c", "aider", "-t", "fix-intervals", "-s", server, "--agent-bin", str(agent)]
