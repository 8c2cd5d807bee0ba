"""The docker engine: vLLM in a container (vllm/vllm-openai or nvcr.io/nvidia/vllm), run by DockerCLI."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from llmdeck.engines.base import Engine, EngineHandle
from llmdeck.engines.docker.argv import DEFAULT_IMAGE, up_argv
from llmdeck.engines.docker.cli import DockerCLI
from llmdeck.engines.logfiles import header_line, read_tail
from llmdeck.engines.logtap import LogTap
from llmdeck.engines.process import Owner
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import LlmdeckError

TAIL_LINES = 2000  # what `docker logs` gives of a container for a diagnosis or a status


@Engine.register("docker")
class DockerEngine(Engine):
    """`docker run -d` the spec; liveness from `docker inspect`, the log from `docker logs`.

    :meth:`prepare` (before a start) pulls a missing image with its progress shown, and bounds docker's
    own log of the container when the daemon keeps it in one file that never rotates (json-file, the
    default): :meth:`argv` and :meth:`start` then carry those options."""

    containerized = True
    plans_as = "docker"
    _log_opts: tuple[str, ...] = ()

    @property
    def cli(self) -> DockerCLI:
        if self._docker_cli is None:
            self._docker_cli = DockerCLI()
        return self._docker_cli

    def argv(self, spec: LaunchSpec, *, secret_env: Sequence[str] = ()) -> list[str]:
        return up_argv(spec, log_opts=self._log_opts, secret_env=secret_env)

    def check_available(self) -> None:
        self.cli.version()

    def prepare(self, spec: LaunchSpec, *, progress: Callable[[str], None], timeout_s: float) -> None:
        """The daemon answers; the image is here (pulled otherwise, its progress every few seconds);
        the container's log bounded (3 x 64 MiB) when the daemon's driver is json-file."""
        from llmdeck.engines.docker.output import PullProgress

        self.check_available()
        image = spec.image or DEFAULT_IMAGE
        if not self.cli.has_image(image):
            progress(f"pulling {image} (not on this host yet) …")
            pulled = PullProgress()

            def show(line: str) -> None:
                shown = pulled.feed(line, time.monotonic())
                if shown:
                    progress(f"pull: {shown}")

            self.cli.pull(image, show, timeout_s=timeout_s)
        self._log_opts = self.cli.bounded_log_opts()

    def start(
        self, spec: LaunchSpec, *, log: IO[bytes], env: Mapping[str, str], secrets: Mapping[str, str]
    ) -> tuple[int | None, str | None]:
        """Secrets go into the container as ``-e KEY`` (the value through docker's own environment)."""
        return None, self.cli.run_container(spec, secrets=dict(secrets), log_opts=self._log_opts) or None

    def leash(self, pid: int | None, container_id: str | None) -> None:
        """No signal reaches a container's processes (the daemon's children): the watcher runs `docker
        stop` on its id (a name is taken again by the next start; an id never)."""
        from llmdeck.engines.docker.argv import docker_stop_id_argv
        from llmdeck.util import leash

        if container_id:
            leash.hold_command(container_id, docker_stop_id_argv(container_id, docker=self.cli.docker))

    def owner(self, handle: EngineHandle) -> Owner:
        """A container that crashed before it was ever ready is gone, though docker's restart policy
        (unless-stopped) brings it back into the same crash: a start had waited out its whole ready
        timeout on one that restarted in a loop. ``down`` and a next start still remove it."""
        try:
            state = self.cli.inspect(handle.name)
        except LlmdeckError:
            return "gone"
        starting = handle.ready_at is None
        if starting and (state.restarting or state.restart_count > 0):
            return "gone"
        return "ours" if state.running else "gone"

    def logs(self, handle: EngineHandle) -> str:
        """The last :data:`TAIL_LINES` lines of `docker logs` (the log file when docker cannot answer).
        The file is written by the start (its start-up) and by :meth:`stop` (the rest, whole): it had
        been rewritten here from the last 2,000 lines, which lost the start-up of a server that ran."""
        text = self.tail(handle, TAIL_LINES)
        return read_tail(handle.log_path) if text is None else text

    def tail(self, handle: EngineHandle, lines: int) -> str | None:
        """`docker logs --tail LINES`; None when docker cannot answer (the log file then)."""
        try:
            return self.cli.logs(handle.name, tail=lines)
        except LlmdeckError:
            return None

    def tap_log(self, handle: EngineHandle) -> LogTap:
        """`docker logs -f -t` from the container's first line, each line appended to the log file once
        as it comes (:mod:`.logmark`: the file's mark says where its copy of docker's log ends)."""
        from llmdeck.engines.docker.argv import docker_logs_argv
        from llmdeck.engines.docker.logmark import StampedTap, begin, mark_path
        from llmdeck.engines.logtap import FileTap

        try:
            mark = begin(handle.log_path, _header(handle))
        except OSError as exc:  # NAME.log.mark a folder (a full disk): had been an internal error
            from llmdeck.util.atomic import write_error

            raise write_error(Path(exc.filename or mark_path(handle.log_path)), exc) from None
        try:
            argv = docker_logs_argv(handle.name, follow=True, timestamps=True, docker=self.cli.docker)
            return StampedTap(argv, handle.log_path, mark)
        except OSError:  # no docker client to run: the file as it is
            return FileTap(handle.log_path)

    def follow_log(self, handle: EngineHandle) -> Iterator[str]:
        """`docker logs -f`: the log file gets the container's lines at a start and a stop only, so
        following the file had shown nothing while the container served."""
        return self.cli.follow_logs(handle.name)

    def stop(self, handle: EngineHandle, *, grace_s: float = 20.0) -> str:
        """`docker stop`, its log saved, `docker rm`; a leash on it is let go."""
        from llmdeck.util import leash

        try:
            return self._stop(handle, grace_s)
        finally:
            if handle.container_id:
                leash.let_go(handle.container_id)

    def _stop(self, handle: EngineHandle, grace_s: float) -> str:
        from llmdeck.engines.docker.logmark import forget

        if not self.is_alive(handle):
            outcome = "gone"
        else:
            self.cli.stop(handle.name, timeout_s=int(grace_s))
            outcome = "stopped"
        self.save_log(handle)
        with contextlib.suppress(LlmdeckError):
            self.cli.rm(handle.name, force=True)
        forget(handle.log_path)  # the record goes: its NAME.log.mark had stayed behind for good
        return outcome

    def save_log(self, handle: EngineHandle) -> None:
        """What the container logged past the file's copy, saved into the log file (bounded, redacted,
        each line once) before `docker rm` takes docker's copy; when docker cannot give it, a line in the
        log says so. Down had kept only docker's last 2,000 lines: a day's log lost its start-up."""
        from llmdeck.engines.docker.logmark import mark_path
        from llmdeck.engines.docker.logsave import save_rest
        from llmdeck.engines.logfiles import note

        if not mark_path(handle.log_path).exists() and self._no_container(handle):
            return  # another `down` saved it and removed the container (its mark went with its record)
        try:
            save_rest(handle.log_path, handle.name, header=_header(handle), cli=self.cli)
        except (LlmdeckError, OSError) as exc:
            why = exc.message if isinstance(exc, LlmdeckError) else (exc.strerror or str(exc))
            note(handle.log_path, f"the container's log could not be saved: {why}")

    def _no_container(self, handle: EngineHandle) -> bool:
        """Whether docker says there is no container of ``handle`` (not: it cannot tell)."""
        from llmdeck.errors import NotRunningError

        try:
            self.cli.inspect(handle.name)
        except NotRunningError:
            return True
        except LlmdeckError:
            return False
        return False


def _header(handle: EngineHandle) -> str:
    """The log file's first line (`# llmdeck: … starting: ARGV`), read alone: the file may be large."""
    try:
        with open(handle.log_path, encoding="utf-8", errors="replace") as fh:
            first = fh.readline(64 * 1024)
    except OSError:
        first = ""
    if first.startswith("# llmdeck"):
        return first if first.endswith("\n") else first + "\n"
    return header_line(handle.argv)
