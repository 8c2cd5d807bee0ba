"""The docker engine against fake_docker (tests/fake_docker.py): a stand-in `docker` client with docker
28's output, whose containers are local fake OpenAI servers; faults come from its environment."""

from __future__ import annotations

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
