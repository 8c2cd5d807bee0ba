"""Running docker commands: :class:`DockerCLI`, whose ``run`` callable is injectable."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from llmdeck.engines.docker.argv import (
    Network,
    container_name,
    docker_inspect_argv,
    docker_kill_argv,
    docker_logs_argv,
    docker_ps_argv,
    docker_rm_argv,
    docker_run_argv,
    docker_stop_argv,
    docker_version_argv,
    image_vllm_version_argv,
)
from llmdeck.engines.docker.output import (
    ContainerState,
    ContainerSummary,
    DockerVersion,
    docker_error,
    parse_inspect,
    parse_ps,
    parse_version,
)
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import MissingDependencyError, NotRunningError, UsageError

Runner = Callable[..., "subprocess.CompletedProcess[str]"]  # (argv) or (argv, env=…)


def _subprocess_runner(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env)


class DockerCLI:
    """Runs docker commands; ``run`` is injectable (tests record the argv and return real output)."""

    def __init__(self, docker: str = "docker", run: Runner | None = None) -> None:
        self.docker = docker
        self._run: Runner = run or _subprocess_runner

    def _call(
        self, argv: list[str], *, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        try:
            proc = self._run(argv, env=env) if env is not None else self._run(argv)
        except FileNotFoundError as exc:
            raise MissingDependencyError(
                f"The docker client ({self.docker!r}) is not installed or not on PATH.",
                hint="Install Docker Engine and the NVIDIA Container Toolkit, or use `--engine venv`.",
            ) from exc
        if check and proc.returncode != 0:
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        return proc

    def version(self) -> DockerVersion:
        """Client and server versions; raises DockerError when the daemon is unreachable."""
        argv = docker_version_argv(docker=self.docker)
        proc = self._call(argv, check=False)
        info = parse_version(proc.stdout or "")
        if proc.returncode != 0 or not info.server_reachable:
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        return info

    def run_container(
        self, spec: LaunchSpec, *, network: Network = "publish", secrets: dict[str, str] | None = None
    ) -> str:
        """Start ``spec`` detached; returns the container id docker printed. Secrets (``secrets``, and
        any left in ``spec``) reach docker through its environment, never its argv."""
        import os

        from llmdeck.engines.secrets import split_secrets

        if spec.engine != "docker":
            raise UsageError(
                f"Server {spec.name!r} uses engine {spec.engine!r}, not docker.",
                hint="Use --engine docker to run vLLM in a container.",
            )
        spec, found = split_secrets(spec)
        secret = {**found, **(secrets or {})}
        argv = docker_run_argv(
            spec, detach=True, network=network, docker=self.docker, secret_env=list(secret)
        )
        proc = self._call(argv, env={**os.environ, **secret} if secret else None)
        return (proc.stdout or "").strip().splitlines()[-1] if (proc.stdout or "").strip() else ""

    def stop(self, name: str, *, timeout_s: int = 30) -> None:
        self._call(docker_stop_argv(name, timeout_s=timeout_s, docker=self.docker))

    def kill(self, name: str) -> None:
        self._call(docker_kill_argv(name, docker=self.docker))

    def rm(self, name: str, *, force: bool = False) -> None:
        self._call(docker_rm_argv(name, force=force, docker=self.docker))

    def logs(self, name: str, *, tail: int | None = None) -> str:
        """The container's log (vLLM writes to stderr; docker keeps both streams)."""
        proc = self._call(docker_logs_argv(name, tail=tail, docker=self.docker))
        return (proc.stdout or "") + (proc.stderr or "")

    def inspect(self, name: str) -> ContainerState:
        argv = docker_inspect_argv(name, docker=self.docker)
        proc = self._call(argv, check=False)
        if proc.returncode != 0:
            if "No such container" in (proc.stderr or "") or "No such object" in (proc.stderr or ""):
                raise NotRunningError(
                    f"There is no container {container_name(name)!r} for server {name!r}.",
                    hint="Run `llmdeck status` to see known servers, or `llmdeck up` to start it.",
                )
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        states = parse_inspect(proc.stdout or "[]")
        if not states:
            raise NotRunningError(f"`docker inspect` knows no container {container_name(name)!r}.")
        return states[0]

    def ps(self, *, all_containers: bool = True, llmdeck_only: bool = True) -> list[ContainerSummary]:
        proc = self._call(
            docker_ps_argv(all_containers=all_containers, llmdeck_only=llmdeck_only, docker=self.docker)
        )
        return parse_ps(proc.stdout or "")

    def image_vllm_version(self, image: str) -> str | None:
        """The vLLM version inside ``image`` (pulls it if needed), or None if it has no vLLM."""
        proc = self._call(image_vllm_version_argv(image, docker=self.docker), check=False)
        if proc.returncode != 0:
            if "No module named" in (proc.stderr or ""):
                return None
            raise docker_error(image_vllm_version_argv(image), proc.returncode, proc.stderr or "")
        lines = (proc.stdout or "").strip().splitlines()
        return lines[-1].strip() if lines else None
