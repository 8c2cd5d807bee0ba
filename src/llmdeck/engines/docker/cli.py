"""Running docker commands: :class:`DockerCLI`, whose ``run`` callable is injectable."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from llmdeck.engines.docker.argv import (
    container_name,
    docker_image_present_argv,
    docker_inspect_argv,
    docker_kill_argv,
    docker_log_driver_argv,
    docker_logs_argv,
    docker_ps_argv,
    docker_pull_argv,
    docker_rm_argv,
    docker_stop_argv,
    docker_version_argv,
    image_vllm_version_argv,
    log_opts_for,
    up_argv,
)
from llmdeck.engines.docker.output import (
    ContainerState,
    ContainerSummary,
    DockerVersion,
    docker_error,
    docker_pull_timeout,
    docker_timeout,
    parse_inspect,
    parse_ps,
    parse_version,
)
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import MissingDependencyError, NotRunningError, UsageError

if TYPE_CHECKING:
    from llmdeck.engines.docker.logrun import LogLines

Runner = Callable[..., "subprocess.CompletedProcess[str]"]  # (argv) or (argv, env=…)

# How long a docker command may take before the daemon counts as hung (nothing waits for ever on it):
QUERY_S = 30.0  # version, info, inspect, ps: a daemon answers in well under a second
LOGS_S = 60.0  # `docker logs --tail N`
RUN_S = 300.0  # create and start a container whose image is here (the NVIDIA hook, the mounts)
REMOVE_S = 60.0
STOP_EXTRA_S = 60.0  # `docker stop -t N` waits N seconds itself, then kills


def _subprocess_runner(
    argv: list[str], env: dict[str, str] | None = None, timeout: float | None = None, merge: bool = False
) -> subprocess.CompletedProcess[str]:
    """``merge``: the command's stderr into its stdout, in the order written (`docker logs` writes the
    container's two streams to its own two, line by line in the order the container wrote them).

    The client runs in its own session: a terminal's Ctrl-C reaches the whole foreground group, and a
    second one during the clean-up of an interrupted `up` had killed its `docker stop` (the stop
    failed, the container ran on); an interrupted llmdeck kills the client itself (subprocess.run)."""
    return subprocess.run(  # bytes that are not UTF-8 (a container's log) are shown replaced
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        text=True,
        errors="replace",
        check=False,
        env=env,
        timeout=timeout,
        start_new_session=True,
    )


class DockerCLI:
    """Runs docker commands, each bounded in time; ``run`` is injectable (tests record the argv and
    return real output; a runner may raise ``subprocess.TimeoutExpired`` as a hung daemon does)."""

    def __init__(self, docker: str = "docker", run: Runner | None = None) -> None:
        self.docker = docker
        self._injected = run

    def _invoke(
        self, argv: list[str], env: dict[str, str] | None, timeout_s: float, merge: bool = False
    ) -> subprocess.CompletedProcess[str]:
        if self._injected is None:
            return _subprocess_runner(argv, env, timeout_s, merge)
        return self._injected(argv, env=env) if env is not None else self._injected(argv)

    def _call(
        self,
        argv: list[str],
        *,
        check: bool = True,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
        merge: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        timeout_s = QUERY_S if timeout_s is None else timeout_s
        try:
            proc = self._invoke(argv, env, timeout_s, merge)
        except subprocess.TimeoutExpired as exc:  # subprocess.run killed the client
            raise docker_timeout(argv, timeout_s) from exc
        except FileNotFoundError as exc:
            raise self._missing_client() from exc
        if check and proc.returncode != 0:
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        return proc

    def _missing_client(self) -> MissingDependencyError:
        return MissingDependencyError(
            f"The docker client ({self.docker!r}) is not installed or not on PATH.",
            hint="Install Docker Engine and the NVIDIA Container Toolkit, or use `--engine venv`.",
        )

    def version(self) -> DockerVersion:
        """Client and server versions; raises DockerError when the daemon is unreachable."""
        argv = docker_version_argv(docker=self.docker)
        proc = self._call(argv, check=False)
        info = parse_version(proc.stdout or "")
        if proc.returncode != 0 or not info.server_reachable:
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        return info

    def log_driver(self, *, timeout_s: float | None = None) -> str | None:
        """The daemon's default logging driver (``json-file``, ``local``, ``journald`` …), or None."""
        import json

        proc = self._call(docker_log_driver_argv(docker=self.docker), check=False, timeout_s=timeout_s)
        try:
            driver = json.loads((proc.stdout or "").strip() or "null")
        except ValueError:
            return None
        return driver if proc.returncode == 0 and isinstance(driver, str) else None

    def bounded_log_opts(self) -> tuple[str, ...]:
        """The options that bound docker's own log of a container under the daemon's driver
        (:func:`~.argv.log_opts_for`)."""
        return log_opts_for(self.log_driver())

    def has_image(self, image: str) -> bool:
        """Whether ``image`` is on this host already (`docker run` would pull it, without a word)."""
        argv = docker_image_present_argv(image, docker=self.docker)
        proc = self._call(argv, check=False)
        if proc.returncode == 0:
            return True
        if "no such image" in (proc.stderr or "").lower():
            return False
        raise docker_error(argv, proc.returncode, proc.stderr or "")

    def pull(self, image: str, on_line: Callable[[str], None], *, timeout_s: float) -> None:
        """``docker pull``, its lines to ``on_line`` as they come; stopped after ``timeout_s``."""
        from llmdeck.util.linestream import stream_lines

        argv = docker_pull_argv(image, docker=self.docker)
        try:
            rc, tail = stream_lines(argv, on_line, timeout_s=timeout_s)
        except FileNotFoundError as exc:
            raise self._missing_client() from exc
        except subprocess.TimeoutExpired as exc:
            raise docker_pull_timeout(image, timeout_s) from exc
        if rc != 0:
            raise docker_error(argv, rc, tail)

    def run_container(
        self,
        spec: LaunchSpec,
        *,
        secrets: dict[str, str] | None = None,
        log_opts: Sequence[str] = (),
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
        argv = up_argv(spec, log_opts=log_opts, secret_env=list(secret), docker=self.docker)
        proc = self._call(argv, env={**os.environ, **secret} if secret else None, timeout_s=RUN_S)
        return (proc.stdout or "").strip().splitlines()[-1] if (proc.stdout or "").strip() else ""

    def stop(self, name: str, *, timeout_s: int = 30) -> None:
        argv = docker_stop_argv(name, timeout_s=timeout_s, docker=self.docker)
        self._call(argv, timeout_s=timeout_s + STOP_EXTRA_S)

    def kill(self, name: str) -> None:
        self._call(docker_kill_argv(name, docker=self.docker), timeout_s=REMOVE_S)

    def rm(self, name: str, *, force: bool = False) -> None:
        self._call(docker_rm_argv(name, force=force, docker=self.docker), timeout_s=REMOVE_S)

    def logs(self, name: str, *, tail: int | None = None) -> str:
        """The container's log, its two streams in the order written: vLLM logs to stdout, its
        warnings and tracebacks go to stderr (stdout then stderr had put a traceback after every later
        line, and shifted the start-up phases read from the log file while it grew)."""
        argv = docker_logs_argv(name, tail=tail, docker=self.docker)
        proc = self._call(argv, timeout_s=LOGS_S, merge=True)
        return (proc.stdout or "") + (proc.stderr or "")

    def stamped_logs(self, name: str, *, since: str | None, limit_s: float) -> LogLines:
        """`docker logs -t [--since SINCE]` (both streams in order), its lines read as they come."""
        from llmdeck.engines.docker.logrun import LogAnswer, LogRun

        argv = docker_logs_argv(name, timestamps=True, since=since, docker=self.docker)
        if self._injected is None:
            try:
                return LogRun(argv, limit_s)
            except FileNotFoundError as exc:
                raise self._missing_client() from exc
        proc = self._call(argv, check=False, timeout_s=limit_s, merge=True)
        return LogAnswer(argv, proc.returncode, (proc.stdout or "") + (proc.stderr or ""))

    def follow_logs(self, name: str) -> Iterator[str]:
        """What the container prints from now on (`docker logs -f --tail 0`, both streams in order),
        until it stops or the caller stops reading."""
        from llmdeck.util.linestream import follow_output

        argv = docker_logs_argv(name, follow=True, tail=0, docker=self.docker)
        try:
            yield from follow_output(argv)
        except FileNotFoundError as exc:
            raise self._missing_client() from exc

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
        argv = image_vllm_version_argv(image, docker=self.docker)
        proc = self._call(argv, check=False, timeout_s=RUN_S)
        if proc.returncode != 0:
            if "No module named" in (proc.stderr or ""):
                return None
            raise docker_error(image_vllm_version_argv(image), proc.returncode, proc.stderr or "")
        lines = (proc.stdout or "").strip().splitlines()
        return lines[-1].strip() if lines else None
