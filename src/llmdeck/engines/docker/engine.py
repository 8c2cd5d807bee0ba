"""The docker engine: vLLM in a container (vllm/vllm-openai or nvcr.io/nvidia/vllm), run by DockerCLI."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import IO

from llmdeck.engines.base import Engine, EngineHandle
from llmdeck.engines.docker.argv import docker_run_argv
from llmdeck.engines.docker.cli import DockerCLI
from llmdeck.engines.logfiles import header_line, read_tail
from llmdeck.engines.process import Owner
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import LlmdeckError
from llmdeck.util.redact import redact_text


@Engine.register("docker")
class DockerEngine(Engine):
    """`docker run -d` the spec; liveness from `docker inspect`, the log from `docker logs`."""

    containerized = True
    plans_as = "docker"

    @property
    def cli(self) -> DockerCLI:
        if self._docker_cli is None:
            self._docker_cli = DockerCLI()
        return self._docker_cli

    def argv(self, spec: LaunchSpec, *, secret_env: Sequence[str] = ()) -> list[str]:
        return docker_run_argv(spec, detach=True, secret_env=sorted(secret_env))

    def check_available(self) -> None:
        self.cli.version()

    def start(
        self, spec: LaunchSpec, *, log: IO[bytes], env: Mapping[str, str], secrets: Mapping[str, str]
    ) -> tuple[int | None, str | None]:
        """Secrets go into the container as ``-e KEY`` (the value through docker's own environment)."""
        return None, self.cli.run_container(spec, secrets=dict(secrets)) or None

    def owner(self, handle: EngineHandle) -> Owner:
        try:
            return "ours" if self.cli.inspect(handle.name).running else "gone"
        except LlmdeckError:
            return "gone"

    def logs(self, handle: EngineHandle) -> str:
        """`docker logs`, saved to the log file so that it survives `docker rm` (the file when docker
        cannot answer)."""
        from llmdeck.util.atomic import atomic_write_text

        try:
            text = self.cli.logs(handle.name, tail=2000)
        except LlmdeckError:
            return read_tail(handle.log_path)
        path = handle.log_path
        header = path.read_text(encoding="utf-8") if path.exists() else ""
        first = header.splitlines()[0] + "\n" if header.startswith("# llmdeck") else header_line(handle.argv)
        atomic_write_text(path, first + redact_text(text), secret=True)
        return text

    def stop(self, handle: EngineHandle, *, grace_s: float = 20.0) -> str:
        """Its log is saved first, then `docker stop` and `docker rm`."""
        if not self.is_alive(handle):
            outcome = "gone"
        else:
            self.logs(handle)
            self.cli.stop(handle.name, timeout_s=int(grace_s))
            outcome = "stopped"
        with contextlib.suppress(LlmdeckError):
            self.logs(handle)
            self.cli.rm(handle.name, force=True)
        return outcome
