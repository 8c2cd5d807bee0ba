"""`llmdeck up/down/status --engine docker`: the argv llmdeck runs and its handling of real docker output.

There is no Docker engine on these machines: the real docker client answers "Cannot connect to the
Docker daemon", which is tested as is; the rest uses a recording runner (``RecordingDocker``) that
returns docker's documented output formats from tests/fixtures/docker (see its README).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from llmdeck.cli.app import main
from llmdeck.engines.docker import DockerCLI
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime import container_start, launcher
from llmdeck.settings import Settings
from llmdeck.util.net import free_port
from repo_paths import ROOT, TEST_FIXTURES

DOCKER_FIXTURES = TEST_FIXTURES / "docker"
VERSION_OK = json.dumps({"Client": {"Version": "28.2.2"}, "Server": {"Version": "28.2.2"}})

# the public Qwen3-0.6B config.json that llmdeck bundles (same bytes as shared/fixtures/configs)
BUNDLED_CONFIGS = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs"


class RecordingDocker:
    """Records every docker argv and answers with real output formats."""

    def __init__(self, inspect_file: str) -> None:
        self.calls: list[list[str]] = []
        self.inspect_file = inspect_file

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        verb = argv[1]
        out, err, rc = "", "", 0
        if verb == "version":
            out = VERSION_OK
        elif verb == "run":
            out = "9a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b\n"
        elif verb == "inspect":
            out = (DOCKER_FIXTURES / self.inspect_file).read_text()
        elif verb == "logs":
            err = (
                "INFO 11-29 20:52:41 [utils.py:233] non-default args: {}\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
            )
        return subprocess.CompletedProcess(argv, rc, out, err)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")


def docker_spec(tmp_path: Path) -> LaunchSpec:
    model = tmp_path / "qwen3"
    model.mkdir()
    src = BUNDLED_CONFIGS / "Qwen3-0.6B.config.json"
    (model / "config.json").write_text(src.read_text())
    return LaunchSpec(
        name="dock",
        engine="docker",
        model=str(model),
        port=free_port(),
        image="vllm/vllm-openai:v0.22.0",
        vllm_args=["--max-model-len", "8192"],
    )


def test_start_runs_the_rendered_argv_and_records_the_container(tmp_path: Path, settings: Settings) -> None:
    runner = RecordingDocker("docker-inspect-running-healthy.json")
    spec = docker_spec(tmp_path)
    record = container_start.start_docker(spec, settings, DockerCLI(run=runner))
    run = next(c for c in runner.calls if c[1] == "run")
    assert run[:3] == ["docker", "run", "-d"]
    for flag in ("--gpus", "--ipc", "--restart"):
        assert flag in run
    assert "vllm/vllm-openai:v0.22.0" in run
    assert run[run.index("vllm/vllm-openai:v0.22.0") + 1].startswith("/models/")  # entrypoint is vllm serve
    assert run[-2:] == ["--max-model-len", "8192"]
    assert record.container_id and record.container_id.startswith("9a1b3c")
    assert record.pid is None and record.log_path.exists()
    assert launcher.is_alive(record, DockerCLI(run=runner))


def test_dead_container_is_diagnosed_from_docker_logs(tmp_path: Path, settings: Settings) -> None:
    runner = RecordingDocker("docker-inspect-exited-oom.json")
    cli = DockerCLI(run=runner)
    record = container_start.start_docker(docker_spec(tmp_path), settings, cli)
    assert not launcher.is_alive(record, cli)
    text = launcher.engine_log(record, cli)
    assert "CUDA out of memory" in text
    outcome = launcher.stop_engine(record, docker=cli)
    assert outcome == "gone"
    assert "CUDA out of memory" in record.log_path.read_text(), "the container's log must survive docker rm"
    assert runner.calls[-2] == ["docker", "logs", "-t", "llmdeck-dock"]  # saved whole, then removed
    assert runner.calls[-1] == ["docker", "rm", "-f", "llmdeck-dock"]


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client installed")
def test_up_engine_docker_without_daemon_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real docker client with no daemon: one clear message, exit 1, no traceback, no record."""
    probe = subprocess.run(["docker", "version", "--format", "json"], capture_output=True, text=True)
    if probe.returncode == 0:
        pytest.skip("a docker daemon is running here")
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    spec = docker_spec(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["up", "--engine", "docker", "--model", spec.model, "--port", str(spec.port), "--force"])
    err = capsys.readouterr().err
    assert info.value.code == 1
    assert "daemon" in err.lower() and "Traceback" not in err
    assert not list((tmp_path / "state").glob("servers/*.json"))
