"""What a foreground command starts in a session of its own dies with the command even when the command is
killed outright (SIGKILL runs no handler): util/leash.py, for an eval's agent and hidden tests and a
foreground server (a tune's trial, quickstart, `up --attach`). Real processes, fake agent and server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from repo_paths import ROOT
from test_eval_harness import fake_agent, fake_vllm_server  # noqa: F401 (fixtures)


def _wait_for_pid(pid_file: Path, proc: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate(timeout=10)
        time.sleep(0.05)
    return int(pid_file.read_text())


def _gone_soon(pids: list[int], within_s: float = 15.0) -> list[int]:
    """The pids still running (not zombies) after ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        left = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Pids a test saw started: whatever is left of them is killed, the test passing or not."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def _llmdeck(argv: list[str], tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(tmp_path / "state"), **env)
    return subprocess.Popen(
        [sys.executable, "-m", "llmdeck", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_an_eval_killed_outright_leaves_no_agent(
    fake_vllm_server: str,  # noqa: F811 (the fixture, imported)
    fake_agent: Path,  # noqa: F811
    tmp_path: Path,
    started: list[int],
) -> None:
    """The agent runs in its own session (its limits stop its group): `kill -9` of the eval had left it
    running, editing the copy, with its tools (the fake's `sleep 300`), for ever."""
    pid_file = tmp_path / "agent-child.pid"
    argv = ["eval", "-c", "aider", "-t", "fix-intervals", "-s", fake_vllm_server]
    argv += ["--agent-bin", str(fake_agent), "--out", str(tmp_path / "eval.json")]
    proc = _llmdeck(argv, tmp_path, FAKE_AGENT="hang", FAKE_PIDFILE=str(pid_file))
    child = _wait_for_pid(pid_file, proc)
    agent = os.getpgid(child)  # the agent leads its own group
    started += [child, agent]
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone_soon([agent, child]) == [], "the agent outlived the eval"


def test_an_eval_verify_killed_outright_leaves_no_hidden_tests(tmp_path: Path, started: list[int]) -> None:
    """pytest runs in its own session (the time limit kills its group): `kill -9` of `eval verify` (or of
    an eval while it scores a run) had left the hidden tests running, their folder never removed."""
    from test_eval_harness import _hanging_task

    task, pid_file = _hanging_task(tmp_path, 300.0)
    proc = _llmdeck(["eval", "verify", "--task", str(task)], tmp_path)
    pytest_pid = _wait_for_pid(pid_file, proc)
    started.append(pytest_pid)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone_soon([pytest_pid]) == [], "the hidden tests outlived the eval"


FOREGROUND_START = """
import sys, time
from pathlib import Path
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime import service
from llmdeck.settings import Settings
from llmdeck.util.net import free_port

tmp = Path(sys.argv[1])
model = tmp / "model"
model.mkdir()
(model / "config.json").write_text('{"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}')
spec = LaunchSpec(name="fg", engine="venv", model=str(model), python=sys.argv[2], port=free_port())
record = service.start(spec, Settings(state_dir=tmp / "state"), service.UpOptions.bare(leashed=True))
print(record.pid, flush=True)
time.sleep(300)
"""


def test_a_leashed_server_dies_with_the_command_that_started_it(tmp_path: Path, started: list[int]) -> None:
    """A foreground start (a tune's trial) killed outright had left its server running, holding the GPU:
    in a session of its own, no handler ran to stop it."""
    engine = tmp_path / "python"  # the engine: a "vLLM" whose tool (a child in its group) also runs
    engine.write_text("#!/bin/sh\nsleep 300 &\necho $! > child.pid\nexec sleep 301\n")
    engine.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    argv = [sys.executable, "-c", FOREGROUND_START, str(tmp_path), str(engine)]
    proc = subprocess.Popen(
        argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), proc.communicate(timeout=30)
    server = int(line)
    started.append(server)
    child = _wait_for_pid(tmp_path / "child.pid", proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert _gone_soon([server, child]) == [], "the server outlived the command that started it"


def test_a_tune_starts_its_trial_servers_leashed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A tune killed outright had left its trial's vLLM holding the GPU until the same tune ran again."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime import service
    from llmdeck.settings import Settings
    from llmdeck.tune import trial

    seen: list[service.UpOptions] = []
    monkeypatch.setattr(service, "up", lambda spec, settings, options, events: seen.append(options))
    req = type("Req", (), {"ready_timeout_s": 60.0, "base": LaunchSpec(name="t", engine="cpu", model="m")})()
    trial._start(req.base, req, Settings(state_dir=tmp_path), lambda ev: None)  # type: ignore[arg-type]
    assert [o.leashed for o in seen] == [True]


def test_up_attach_starts_its_server_leashed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`up --attach` (Ctrl-C stops the server) killed outright had left the server running on its own."""
    from llmdeck.cli import server
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime import attach, service
    from llmdeck.settings import Settings

    seen: list[service.UpOptions] = []
    monkeypatch.setattr(service, "start", lambda spec, settings, options, clock: seen.append(options))
    monkeypatch.setattr(attach, "follow", lambda record, settings, write: None)
    spec = LaunchSpec(name="a", engine="venv", model="m")
    server._run_up(spec, Settings(state_dir=tmp_path), service.UpOptions(), attach=True)
    assert [o.leashed for o in seen] == [True]


@pytest.mark.parametrize("keep", [False, True])
def test_quickstart_leashes_its_server_unless_kept(
    keep: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """quickstart stops its server at the end (unless --keep); killed outright it had left it running."""
    from llmdeck.flows import quickstart
    from llmdeck.runtime import service
    from llmdeck.settings import Settings

    seen: list[service.UpOptions] = []

    def up(spec: object, settings: object, options: service.UpOptions, events: object) -> None:
        seen.append(options)
        raise KeyboardInterrupt  # stop there: nothing to talk to

    monkeypatch.setattr(quickstart, "ensure_tiny_model", lambda settings, say: tmp_path)
    monkeypatch.setattr(service, "up", up)
    with pytest.raises(KeyboardInterrupt):
        quickstart.run_quickstart(Settings(state_dir=tmp_path), lambda text: None, keep=keep, port=9)
    assert [o.leashed for o in seen] == [not keep]
