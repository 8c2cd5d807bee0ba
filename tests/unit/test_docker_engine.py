"""engines/docker/: the exact argv docker gets, and parsing real docker output."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from llmdeck.engines.docker import (
    DockerCLI,
    DockerError,
    container_model_path,
    docker_logs_argv,
    docker_ps_argv,
    docker_run_argv,
    docker_stop_argv,
    image_kind,
    image_vllm_version_argv,
    parse_inspect,
    parse_ps,
    parse_version,
    split_image,
)
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import MissingDependencyError, NotRunningError, UsageError
from repo_paths import TEST_FIXTURES

FIX = TEST_FIXTURES / "docker"


def _real(stem: str) -> tuple[str, str, int]:
    return (
        (FIX / f"{stem}.stdout").read_text(),
        (FIX / f"{stem}.stderr").read_text(),
        int((FIX / f"{stem}.rc").read_text()),
    )


class RecordingRunner:
    """Records each argv and answers with canned (stdout, stderr, rc)."""

    def __init__(self, answers: list[tuple[str, str, int]]) -> None:
        self.answers = list(answers)
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        out, err, rc = self.answers.pop(0)
        return subprocess.CompletedProcess(argv, rc, out, err)


def test_split_and_kind() -> None:
    assert split_image("nvcr.io/nvidia/vllm:25.11-py3") == ("nvcr.io/nvidia/vllm", "25.11-py3")
    assert split_image("vllm/vllm-openai") == ("vllm/vllm-openai", None)
    assert split_image("localhost:5000/vllm/vllm-openai:v0.17.0") == (
        "localhost:5000/vllm/vllm-openai",
        "v0.17.0",
    )
    assert image_kind("vllm/vllm-openai:cu130-nightly") == "vllm-openai"
    assert image_kind("docker.io/vllm/vllm-openai:v0.22.0") == "vllm-openai"
    assert image_kind("nvcr.io/nvidia/vllm:25.12-py3") == "ngc"
    assert image_kind("ghcr.io/me/custom:1") == "other"


def test_run_argv_vllm_openai_local_model(tmp_path: Path) -> None:
    model = tmp_path / "qwen3-0.6b"
    model.mkdir()
    spec = LaunchSpec(
        name="qwen",
        engine="docker",
        model=str(model),
        port=8001,
        image="vllm/vllm-openai:v0.22.0",
        hf_cache="/data/hf",
        vllm_args=["--max-model-len", "8192"],
        env={"VLLM_USE_FLASHINFER_SAMPLER": "0"},
    )
    argv = docker_run_argv(spec)
    assert argv == [
        "docker", "run", "-d", "--restart", "unless-stopped",
        "--name", "llmdeck-qwen",
        "--label", "llmdeck.name=qwen", "--label", "llmdeck.port=8001",
        "--gpus", "all", "--ipc", "host",
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "-p", "127.0.0.1:8001:8001",
        "-v", "/data/hf:/root/.cache/huggingface",
        "-v", f"{model.resolve()}:/models/qwen3-0.6b:ro",
        "-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1",
        "-e", "VLLM_USE_FLASHINFER_SAMPLER=0",
        "vllm/vllm-openai:v0.22.0",
        # the image's ENTRYPOINT is `vllm serve`: the model follows the image directly
        "/models/qwen3-0.6b",
        "--served-model-name", "qwen3-0.6b", "--host", "0.0.0.0", "--port", "8001",
        "--max-model-len", "8192",
    ]  # fmt: skip
    assert "serve" not in argv[argv.index("vllm/vllm-openai:v0.22.0") :]


def test_run_argv_ngc_needs_vllm_serve_and_attach() -> None:
    spec = LaunchSpec(
        name="ngc",
        engine="docker",
        model="Qwen/Qwen3-30B-A3B",
        host="0.0.0.0",
        port=8000,
        image="nvcr.io/nvidia/vllm:25.12-py3",
        hf_cache="/hf",
    )
    argv = docker_run_argv(spec, detach=False, tty=True)
    assert argv[:5] == ["docker", "run", "--rm", "-it", "--name"]
    assert "--restart" not in argv  # --restart conflicts with --rm
    assert "-d" not in argv
    assert argv[argv.index("-p") : argv.index("-p") + 2] == ["-p", "8000:8000"]
    assert "HF_HUB_OFFLINE=1" not in argv
    assert argv[argv.index("HF_TOKEN") - 1 : argv.index("HF_TOKEN") + 1] == ["-e", "HF_TOKEN"]
    tail = argv[argv.index("nvcr.io/nvidia/vllm:25.12-py3") + 1 :]
    assert tail[:3] == ["vllm", "serve", "Qwen/Qwen3-30B-A3B"]
    assert tail[3:5] == ["--served-model-name", "Qwen3-30B-A3B"]


def test_run_argv_mounts_the_compile_cache_so_the_next_container_compiles_nothing_again() -> None:
    """A tune's trials (and a restart) reuse torch.compile, Triton (its autotuning too) and DeepGEMM:
    the host folder is mounted and the container's caches point into it; the user's env wins."""
    spec = LaunchSpec(
        name="c", engine="docker", model="Qwen/Qwen3-0.6B", image="vllm/vllm-openai",
        compile_cache="/var/cache/llmdeck/docker-compile", env={"TRITON_CACHE_DIR": "/mine"},
    )  # fmt: skip
    argv = docker_run_argv(spec)
    i = argv.index("/var/cache/llmdeck/docker-compile:/llmdeck-compile-cache")
    assert argv[i - 1] == "-v"
    assert "VLLM_CACHE_ROOT=/llmdeck-compile-cache/vllm" in argv and "TRITON_CACHE_DIR=/mine" in argv
    assert argv.index("VLLM_CACHE_ROOT=/llmdeck-compile-cache/vllm") < argv.index("vllm/vllm-openai")
    plain = docker_run_argv(spec.model_copy(update={"compile_cache": None, "env": {}}))
    assert not any("llmdeck-compile-cache" in a for a in plain)
    with pytest.raises(ValueError, match="absolute"):
        LaunchSpec(name="c", engine="docker", model="m", compile_cache="rel/dir")


def test_run_argv_host_network_binds_spec_host() -> None:
    spec = LaunchSpec(name="h", engine="docker", model="Qwen/Qwen3-0.6B", port=9000, image="vllm/vllm-openai")
    argv = docker_run_argv(spec, network="host")
    assert "-p" not in argv
    assert argv[argv.index("--network") : argv.index("--network") + 2] == ["--network", "host"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


def test_container_model_path() -> None:
    assert container_model_path(LaunchSpec(model="/srv/models/Qwen3.6-35B-A3B/")) == "/models/Qwen3.6-35B-A3B"
    assert container_model_path(LaunchSpec(model="Qwen/Qwen3-0.6B")) == "Qwen/Qwen3-0.6B"


def test_other_argvs() -> None:
    assert docker_stop_argv("qwen", timeout_s=20) == ["docker", "stop", "-t", "20", "llmdeck-qwen"]
    assert docker_logs_argv("qwen", follow=True, tail=200) == [
        "docker", "logs", "-f", "--tail", "200", "llmdeck-qwen",
    ]  # fmt: skip
    assert docker_ps_argv() == [
        "docker", "ps", "-a", "--filter", "label=llmdeck.name", "--no-trunc", "--format", "{{json .}}",
    ]  # fmt: skip
    argv = image_vllm_version_argv("vllm/vllm-openai:v0.22.0")
    # the vllm-openai entrypoint is `vllm serve`, so python must be the entrypoint
    assert argv[:6] == ["docker", "run", "--rm", "--entrypoint", "python3", "vllm/vllm-openai:v0.22.0"]


def test_parse_ps_documented_format() -> None:
    rows = parse_ps((FIX / "docker-ps-format-json.jsonl").read_text())
    assert [r.names for r in rows] == ["llmdeck-qwen", "llmdeck-hybrid"]
    assert rows[0].state == "running" and rows[0].llmdeck_name == "qwen"
    assert rows[0].labels["maintainer"] == "vLLM"
    assert rows[0].exit_code is None
    assert rows[1].state == "exited" and rows[1].exit_code == 1


def test_parse_inspect_oom_and_restarts() -> None:
    (state,) = parse_inspect((FIX / "docker-inspect-exited-oom.json").read_text())
    assert state.name == "llmdeck-hybrid"
    assert state.status == "exited" and state.dead
    assert state.oom_killed and state.exit_code == 137 and state.restart_count == 3
    assert "OOM killer" in state.summary()
    (ok,) = parse_inspect((FIX / "docker-inspect-running-healthy.json").read_text())
    assert ok.running and not ok.dead and ok.health == "healthy" and ok.pid == 48213
    assert ok.labels["llmdeck.name"] == "qwen"


def test_parse_version_real_no_daemon_output() -> None:
    out, _err, rc = _real("docker-version-format-json-no-daemon")
    info = parse_version(out)
    assert rc == 1
    assert info.client_version == "28.2.2"
    assert info.server_reachable is False and info.server_version is None


def test_cli_version_no_daemon_is_actionable() -> None:
    runner = RecordingRunner([_real("docker-version-format-json-no-daemon")])
    with pytest.raises(DockerError) as exc:
        DockerCLI(run=runner).version()
    assert runner.calls == [["docker", "version", "--format", "json"]]
    assert "not running" in exc.value.message
    assert "systemctl start docker" in (exc.value.hint or "")


def test_cli_ps_and_inspect_no_daemon() -> None:
    runner = RecordingRunner([_real("docker-ps-no-daemon"), _real("docker-inspect-no-daemon")])
    cli = DockerCLI(run=runner)
    with pytest.raises(DockerError, match="Docker daemon"):
        cli.ps()
    with pytest.raises(DockerError, match="Docker daemon"):
        cli.inspect("qwen")
    assert runner.calls[1] == ["docker", "inspect", "--type", "container", "llmdeck-qwen"]


def test_cli_inspect_missing_container() -> None:
    runner = RecordingRunner([("[]\n", "Error: No such container: llmdeck-gone\n", 1)])
    with pytest.raises(NotRunningError, match="llmdeck-gone"):
        DockerCLI(run=runner).inspect("gone")


def test_cli_run_container_returns_id_and_checks_engine() -> None:
    spec = LaunchSpec(name="q", engine="docker", model="Qwen/Qwen3-0.6B", image="vllm/vllm-openai:v0.22.0")
    runner = RecordingRunner([("4f7c2a9e1b3d\n", "", 0)])
    cli = DockerCLI(run=runner)
    assert cli.run_container(spec) == "4f7c2a9e1b3d"
    assert runner.calls == [docker_run_argv(spec)]
    with pytest.raises(UsageError):
        cli.run_container(spec.model_copy(update={"engine": "venv"}))


def test_cli_missing_binary() -> None:
    def runner(argv: list[str]) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(argv[0])

    with pytest.raises(MissingDependencyError):
        DockerCLI(run=runner).version()


def test_real_docker_client_when_present() -> None:
    """The real client on this machine: with no daemon the error must be the actionable one."""
    import shutil

    if shutil.which("docker") is None:
        pytest.skip("no docker client")
    cli = DockerCLI()
    try:
        info = cli.version()
    except DockerError as exc:
        assert exc.hint
    else:
        assert info.server_reachable
