"""The docker engine against fake_docker (tests/fake_docker.py): a stand-in `docker` client with docker
28's output, whose containers are local fake OpenAI servers; faults come from its environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmdeck.engines.docker import DockerCLI, DockerError
from llmdeck.engines.spec import LaunchSpec
from repo_paths import ROOT


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The path of a `docker` that runs fake_docker, its state under tmp_path."""
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {ROOT / "tests" / "fake_docker.py"} "$@"\n')
    client.chmod(0o755)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "fake-docker" / "state.json"))
    return str(client)


def _spec(tmp_path: Path) -> LaunchSpec:
    return LaunchSpec(
        name="d", engine="docker", model=str(tmp_path), port=18999, image="vllm/vllm-openai:v0.22.0"
    )


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("conflict", 'The container name "/llmdeck-d" is already in use'),
        ("port", "port is already allocated"),
    ],
)
def test_a_failed_docker_run_shows_what_docker_said(
    fake_docker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str, said: str
) -> None:
    """docker 23+ ends a failed `docker run` with "Run 'docker run --help' for more information": that
    line had been shown as what docker said, and the error itself was lost."""
    monkeypatch.setenv("FAKE_DOCKER_RUN_ERR", fault)
    with pytest.raises(DockerError) as info:
        DockerCLI(docker=fake_docker).run_container(_spec(tmp_path))
    assert said in info.value.message
    assert "--help' for more information" not in info.value.message
    if fault == "conflict":  # the hint had said `llmdeck down NAME`: a placeholder, and no record to stop
        assert info.value.hint is not None and "docker rm -f llmdeck-d" in info.value.hint
        assert "NAME" not in info.value.hint


def _llmdeck(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI, with fake_docker first on PATH (the fixture's `docker` lives in tmp_path)."""
    environ = {
        **os.environ,
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(sys.path),
        "LLMDECK_STATE_DIR": str(tmp_path / "state"),
        "LLMDECK_CACHE_DIR": str(tmp_path / "cache"),
        **(env or {}),
    }
    argv = [sys.executable, "-m", "llmdeck", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=120, check=False)


def _model(tmp_path: Path) -> Path:
    """A model folder (the public Qwen3-0.6B config.json llmdeck bundles; the fake needs no weights)."""
    model = tmp_path / "tiny"
    model.mkdir()
    config = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs" / "Qwen3-0.6B.config.json"
    (model / "config.json").write_bytes(config.read_bytes())
    return model


def test_up_and_restart_of_a_container_name_it_not_pid_none(fake_docker: str, tmp_path: Path) -> None:
    """A container has no pid of llmdeck's: `up` and `restart` had printed "ready … (pid None, …)"."""
    from llmdeck.util.net import free_port

    model = _model(tmp_path)
    port = str(free_port())
    up = ["up", "--engine", "docker", "--model", str(model), "--name", "d", "--port", port, "--force"]
    try:
        started = _llmdeck(tmp_path, *up, "--no-watchdog")
        assert started.returncode == 0, started.stderr
        restarted = _llmdeck(tmp_path, "restart", "d", "--force")
        assert restarted.returncode == 0, restarted.stderr
        for out in (started.stdout, restarted.stdout):
            assert "pid None" not in out
            assert "(container " in out
    finally:
        _llmdeck(tmp_path, "down", "d")


def test_a_container_in_a_crash_loop_fails_the_start_at_once(fake_docker: str, tmp_path: Path) -> None:
    """`--restart unless-stopped` brings a container that crashed while starting back into the same
    crash (inspect: restarting, RestartCount growing): `up` had waited out its whole ready timeout."""
    import time

    from llmdeck.util.net import free_port

    model = _model(tmp_path)
    up = ["up", "--engine", "docker", "--model", str(model), "--name", "d", "--port", str(free_port())]
    began = time.monotonic()
    try:
        done = _llmdeck(
            tmp_path,
            *up,
            "--force",
            "--no-watchdog",
            "--timeout",
            "60",
            env={"FAKE_DOCKER_CONTAINER": "restarting"},
        )
        assert done.returncode == 1, done.stderr
        assert "exited before it was ready" in done.stderr
        assert time.monotonic() - began < 40
        assert _llmdeck(tmp_path, "status", "--json").stdout.strip() == "[]"
        assert subprocess.run([fake_docker, "ps", "-a"], capture_output=True, text=True).stdout == ""
    finally:
        _llmdeck(tmp_path, "down", "d")


def test_a_start_up_longer_than_docker_logs_tail_is_kept_whole_and_once(
    fake_docker: str, tmp_path: Path
) -> None:
    """The readiness wait had rewritten the log file from `docker logs --tail 2000` twice a second: a
    start-up of 3,000 lines lost its first 1,000, and the phase reader's offset slid over a shifted
    file. `docker logs -f` now appends each line once, as it comes."""
    from llmdeck.util.net import free_port

    model = _model(tmp_path)
    up = ["up", "--engine", "docker", "--model", str(model), "--name", "d", "--port", str(free_port())]
    try:
        started = _llmdeck(tmp_path, *up, "--force", "--no-watchdog", env={"FAKE_DOCKER_CONTAINER": "chatty"})
        assert started.returncode == 0, started.stderr
        text = (tmp_path / "state" / "logs" / "d.log").read_text()
    finally:
        _llmdeck(tmp_path, "down", "d")
    lines = [line for line in text.splitlines() if "start-up line" in line]
    assert [line[-4:] for line in lines] == [f"{i:04d}" for i in range(3000)]
    assert text.startswith("# llmdeck: ") and text.count("vLLM API server version") == 1
