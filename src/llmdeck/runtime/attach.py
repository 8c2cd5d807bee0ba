"""The foreground ways to run a server (``llmdeck up --attach``): a local engine whose log streams
until it exits or Ctrl-C stops it, and a container run in the foreground (``docker run --rm``, like
seed 004's ``docker run -it``). Both start through the service's one validation and preflight."""

from __future__ import annotations

from collections.abc import Callable

from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime import launcher
from llmdeck.runtime.service import EventClock, Events, ServiceEvent, UpOptions, preflight
from llmdeck.runtime.state import ServerRecord
from llmdeck.settings import Settings
from llmdeck.util.interrupts import interrupts_held


def follow(record: ServerRecord, settings: Settings, write: Callable[[str], None]) -> None:
    """Foreground mode: stream the log until the server exits; Ctrl-C (or SIGTERM) stops it, says so
    and re-raises, so the command exits 130 (143), not 0. A server that exits by itself is an
    OperationError (exit 1): an attached server is meant to run until it is stopped; one stopped by
    `llmdeck down` (its note in the log) says so and returns."""
    from llmdeck.engines.logfiles import follow_from_start, who_stopped
    from llmdeck.engines.process import pid_alive
    from llmdeck.errors import OperationError

    try:  # the log keeper moves the log along in place past 64 MiB: read from its start again then
        for text in follow_from_start(record.log_path, lambda: not pid_alive(record.pid)):
            write(text)
    except KeyboardInterrupt:
        with interrupts_held("stopping the server"):  # a second Ctrl-C had left it running
            outcome = launcher.down(record.name, settings)
            write(f"\n{record.name}: {outcome}; its log stays at {record.log_path}\n")
        raise
    who = who_stopped(record.log_path)
    if who is not None:  # `llmdeck down` in another shell: stopped as asked, not "exited by itself"
        write(f"\n{record.name}: stopped by {who}; its log stays at {record.log_path}\n")
        return
    raise OperationError(
        f"The server {record.name} (pid {record.pid}) exited by itself.",
        hint=f"Read its log ({record.log_path}, or `llmdeck logs {record.name}`) for why.",
    )


def docker(spec: LaunchSpec, settings: Settings, options: UpOptions, *, tty: bool, events: Events) -> None:
    """A foreground container: validated and preflighted as ``up`` does, then ``docker run --rm``
    in this terminal; Ctrl-C stops it."""
    import os
    import subprocess

    from llmdeck.engines.docker import DockerCLI, docker_run_argv, docker_stop_argv, render_shell
    from llmdeck.engines.secrets import split_secrets
    from llmdeck.errors import OperationError
    from llmdeck.util import leash

    checked = launcher.validate(spec)
    if options.preflight:
        preflight(checked, settings, options, EventClock(events))
    spec, secrets = split_secrets(checked.spec)
    launcher.make_compile_cache(spec)
    # docker keeps the container's output in its own log, attached or not: bounded as `up` bounds it
    log_opts = DockerCLI().bounded_log_opts()
    argv = docker_run_argv(spec, detach=False, tty=tty, secret_env=list(secrets), log_opts=log_opts)
    events(ServiceEvent(kind="starting", message=render_shell(argv)))
    # killed outright, llmdeck leaves the docker client attached to a container no one stops: the
    # watcher stops it (by name: no other container can hold the name while this one runs)
    key = f"attach:{spec.name}"
    leash.hold_command(key, docker_stop_argv(spec.name, timeout_s=20))
    code: int | None = None
    try:
        code = subprocess.call(argv, env={**os.environ, **secrets})
    except FileNotFoundError as exc:
        raise OperationError("The docker client is not installed.", hint="Use --engine venv.") from exc
    finally:
        if code is None:  # interrupted (SIGTERM, Ctrl-C): the client was killed, its container not
            with interrupts_held("stopping the container"):
                _stop_quietly(docker_stop_argv(spec.name, timeout_s=20))
        leash.let_go(key)
    if code in (130, 143):  # docker passed on Ctrl-C / SIGTERM: the container was stopped
        events(ServiceEvent(kind="stopped", message=f"the container stopped (exit {code})"))
        raise KeyboardInterrupt
    if code != 0:
        raise OperationError(f"The container exited with code {code}.", hint="Read its output above.")


def _stop_quietly(argv: list[str]) -> None:
    """Run `docker stop` on the way out of an interrupted foreground run (bounded, errors ignored)."""
    import contextlib
    import subprocess

    with contextlib.suppress(OSError, subprocess.SubprocessError):
        # its own session: a second Ctrl-C to the terminal's group had killed it, the container left
        subprocess.run(argv, capture_output=True, timeout=80, check=False, start_new_session=True)
