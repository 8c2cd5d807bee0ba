"""Process helpers: start a detached process, is a pid alive and ours, stop a process group
gracefully then hard.

A saved pid is not proof: after the server died the system may give its pid to another program.
At launch llmdeck records what identifies the process (:class:`ProcessIdentity`: its start time
since boot, psutil's ``create_time`` and the command line); :func:`pid_owner` checks it, and nothing
is signalled unless the pid is still the process llmdeck started.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Literal

import psutil
from pydantic import BaseModel

from llmdeck.util import leash
from llmdeck.util.after_exit import read_stat
from llmdeck.util.procgroup import signal_group

Owner = Literal["ours", "gone", "other"]
# create_time is the boot time plus the start tick: different for any later process that reuses the
# pid (which cannot start before the first one ended), but it moves with the boot time, which the
# kernel derives from the wall clock: when the clock is stepped (a VM paused and resynced, NTP at
# start-up) every running process's create_time moves with it. In a clean clone's `make test` here it
# moved 31 s in mid-run, every live server then looked like another program, and `down` forgot them
# running. The start tick itself (since_boot) never moves: it is what is compared where it was read.
CREATE_TIME_TOLERANCE_S = 0.5
SINCE_BOOT_TOLERANCE_S = 0.05  # the tick is exact; its unit is 1/CLK_TCK (0.01 s)
# set in the environment of every process llmdeck spawns, a new value each time, and inherited by what
# it starts (vLLM's EngineCore, its workers): what makes a dead leader's group members its own
GROUP_MARK = "LLMDECK_GROUP"


def spawn_detached(
    argv: Sequence[str], log: IO[bytes] | int, env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (its own process group, so that it outlives this process and
    is stopped as a group), with no stdin, its stdout and stderr written to ``log`` (an open file, or
    ``subprocess.DEVNULL``), marked (:data:`GROUP_MARK`, a new value) with what it starts."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**env, GROUP_MARK: secrets.token_hex(8)},
        start_new_session=True,
        close_fds=True,
    )


def spawn_module(module: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
    """``python -m MODULE ARGS`` detached (:func:`spawn_detached`, no output), with this process's import
    path: the helpers llmdeck leaves beside a server (the guard, the log keeper)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return spawn_detached([sys.executable, "-m", module, *args], subprocess.DEVNULL, env)


class ProcessIdentity(BaseModel):
    """What identifies a process beyond its pid, read right after it was started."""

    create_time: float
    cmdline: list[str]
    since_boot: float | None = None  # seconds from boot to its start (/proc/PID/stat), where readable
    group_mark: str | None = None  # its GROUP_MARK (None: an older record, or its environment unreadable)
    output: tuple[int, int] | None = None  # (device, inode) of its stdout or stderr: its log, a regular file


def since_boot(pid: int) -> float | None:
    """Seconds from boot to ``pid``'s start: /proc/PID/stat's ``starttime`` tick, which no clock step
    moves (None off Linux, or when the process is gone)."""
    stat = read_stat(pid)
    return None if stat is None else stat[1] / os.sysconf("SC_CLK_TCK")


def identify(pid: int) -> ProcessIdentity | None:
    """The identity of a running process (None when it is gone or not readable)."""
    from llmdeck.util.redact import redact_argv

    try:
        proc = psutil.Process(pid)
        return ProcessIdentity(
            create_time=proc.create_time(),
            cmdline=redact_argv(proc.cmdline()),
            since_boot=since_boot(pid),
            group_mark=_mark_of(proc),
            output=next(iter(_outputs(pid)), None),
        )
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def pid_owner(pid: int | None, identity: ProcessIdentity | None, argv: Sequence[str] | None = None) -> Owner:
    """ "ours" when ``pid`` is still the process that was recorded, "gone" when no such process
    runs, "other" when the pid now belongs to another program (the record is stale).

    Records without an identity (written by older llmdeck) are checked by their command line."""
    from llmdeck.util.redact import redact_argv

    if not pid_alive(pid):
        return "gone"
    assert pid is not None
    try:
        proc = psutil.Process(pid)
        if identity is None:
            same = bool(argv) and redact_argv(proc.cmdline()) == redact_argv(list(argv or []))
        else:
            same = _same_start(proc, identity)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return "gone"
    except psutil.AccessDenied:
        return "other"  # another user's process: certainly not one we started
    return "ours" if same else "other"


def _same_start(proc: psutil.Process, identity: ProcessIdentity) -> bool:
    """Whether ``proc`` started when the recorded process did: by the tick since boot where both are
    known, else (a record of an older llmdeck, not Linux) by create_time."""
    recorded = identity.since_boot
    now = since_boot(proc.pid) if recorded is not None else None
    if recorded is not None and now is not None:
        return abs(now - recorded) <= SINCE_BOOT_TOLERANCE_S
    return abs(proc.create_time() - identity.create_time) <= CREATE_TIME_TOLERANCE_S


def pid_alive(pid: int | None) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def stop_process_group(
    pid: int,
    *,
    grace_s: float = 20.0,
    identity: ProcessIdentity | None = None,
    argv: Sequence[str] | None = None,
) -> str:
    """SIGTERM the process group led by ``pid``, wait ``grace_s``, then SIGKILL — only while ``pid``
    is still the recorded process (``identity``, or ``argv`` for old records).

    Returns "stopped", "killed", "gone" (it had already exited) or "stale" (the pid belongs to
    another program now; nothing was signalled). A leash on the group (util.leash) is let go.
    """
    try:
        return _stop_group(pid, grace_s, identity, argv)
    finally:
        leash.let_go(pid)


def _stop_group(
    pid: int, grace_s: float, identity: ProcessIdentity | None, argv: Sequence[str] | None
) -> str:
    owner = pid_owner(pid, identity, argv)
    if owner == "gone":
        _reap(pid)
        # the leader died (a crash, kill -9) but vLLM's engine core may live on in its group, holding
        # the GPU's memory: those of the group that carry the leader's mark (a pid reused since by a
        # program that led a group of its own and exited leaves that program's processes there)
        _kill_leftovers(lambda: marked_members(pid, identity))
        return "gone"
    if owner == "other":
        return "stale"
    try:
        pgid = os.getpgid(pid)
    except ProcessLookupError:  # it exited since it was seen ours: its group's id is not reused yet
        _kill_leftovers(lambda: _group_members(pid))
        return "gone"
    signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    try:
        while time.monotonic() < deadline:
            _reap(pid)
            if not pid_alive(pid):
                _kill_leftovers(lambda: _group_members(pgid))
                return "stopped"
            time.sleep(0.2)
    except KeyboardInterrupt:  # Ctrl-C in the grace (up to --shutdown-timeout + 20 s): killed now, not left
        signal_group(pgid, signal.SIGKILL)  # SIGTERMed, where vLLM may hold its connections for good
        raise
    if pid_owner(pid, identity, argv) != "ours":
        return "stopped"
    signal_group(pgid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    return "killed"


def _kill_leftovers(members: Callable[[], list[psutil.Process]], wait_s: float = 10.0) -> None:
    """vLLM's engine core is a child process; make sure none of the group (``members``) outlives the
    server. Waits (``wait_s`` at most) until they have exited: the GPU's memory is back when this
    returns, before a next start's preflight reads it."""
    killed = members()
    for proc in killed:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    deadline = time.monotonic() + wait_s
    while killed and time.monotonic() < deadline:
        time.sleep(0.1)
        killed = members()


def leftover_count(pgid: int, identity: ProcessIdentity | None) -> int:
    """How many processes the dead leader ``pgid`` (recorded as ``identity``) left running in its group
    (vLLM's engine core lives on): :func:`marked_members`."""
    return len(marked_members(pgid, identity))


def marked_members(pgid: int, identity: ProcessIdentity | None) -> list[psutil.Process]:
    """The running processes of a dead leader's group that it started: they carry its mark, or write to
    its log (vLLM's EngineCore sets its process title over its environment, and inherits the log as its
    stdout). None where neither was recorded (a record of an older llmdeck): a group id is free again
    once its leader and members are gone, and the pid's next owner may lead a group of its own and exit
    (`a & b &` in a script), leaving processes there that are none of the server's."""
    if identity is None or (identity.group_mark is None and identity.output is None):
        return []
    return [proc for proc in _group_members(pgid) if _started_by(proc, identity)]


def _started_by(proc: psutil.Process, identity: ProcessIdentity) -> bool:
    if identity.output is not None and identity.output in _outputs(proc.pid):
        return True
    return identity.group_mark is not None and _mark_of(proc) == identity.group_mark


def _outputs(pid: int) -> list[tuple[int, int]]:
    """(device, inode) of ``pid``'s stdout and stderr where they are regular files (a log: /dev/null and
    pipes are shared by unrelated processes)."""
    found = []
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{pid}/fd/{fd}")
            if stat.S_ISREG(st.st_mode):
                found.append((st.st_dev, st.st_ino))
    return found


def _mark_of(proc: psutil.Process) -> str | None:
    """``proc``'s :data:`GROUP_MARK`, from the environment it was started with (None: unreadable)."""
    try:
        return proc.environ().get(GROUP_MARK)
    except (psutil.Error, OSError):
        return None


def _group_members(pgid: int) -> list[psutil.Process]:
    """The processes of group ``pgid`` that still run (an exited one not yet reaped holds nothing)."""
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess, psutil.AccessDenied, PermissionError):
            continue
    return out


def _reap(pid: int) -> None:
    """Collect our own exited child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (vLLM's API server, engine core, workers)."""
    try:
        root = psutil.Process(pid)
        return [root.pid, *(c.pid for c in root.children(recursive=True))]
    except psutil.Error:
        return []


def tree_pss(pids: list[int]) -> int:
    """Sum of PSS (RSS where PSS cannot be read) over ``pids``; 0 when none can be read."""
    total = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            try:
                total += int(getattr(proc.memory_full_info(), "pss", 0) or proc.memory_info().rss)
            except psutil.AccessDenied:
                total += int(proc.memory_info().rss)
        except psutil.Error:
            continue
    return total
