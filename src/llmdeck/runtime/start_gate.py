"""What every start of a server passes, whatever its engine: one start at a time from its check to its
record (:func:`start_lock`), no live server of the name, a dead one's leftovers cleared, a port no other
server is starting on, the earlier run's log moved along, the folders it writes made."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from llmdeck.engines.base import Engine
from llmdeck.engines.logfiles import rotate_log
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import AlreadyExistsError, PortInUseError
from llmdeck.runtime.engine_state import engine_of, is_alive
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.settings import Settings
from llmdeck.util.filelock import exclusive

if TYPE_CHECKING:
    from llmdeck.engines.docker import DockerCLI

START_LOCK_S = 60.0  # a start holds the lock from its check to its record: a second or two


@contextmanager
def start_lock(settings: Settings) -> Iterator[None]:
    """One start at a time from check to record: two `up` of one name (or one port) at once had both
    spawned, one engine left unrecorded, or reported ready on the other's /health."""
    with exclusive(settings.servers_dir / ".start.lock", timeout_s=START_LOCK_S, what="server start"):
        yield


def settled(settings: Settings) -> None:
    """Wait for a start between its spawn and its record (the start lock, held a second or two): a
    `down` in that window had said "no server named X" (`down --all`: "nothing to stop") of the server
    recorded a moment later, which ran on. No lock file (no start ever ran here), or one this user
    cannot open: nothing to wait for."""
    import contextlib

    if not (settings.servers_dir / ".start.lock").is_file():
        return
    with contextlib.suppress(OSError), start_lock(settings):
        pass


def refuse_running(store: StateStore, name: str) -> bool:
    """AlreadyExistsError when a server named ``name`` runs; whether a record (of a dead one) is there."""
    if not store.path(name).exists():
        return False
    old = store.load(name)
    if is_alive(old):
        running = f"pid {old.pid}" if old.pid else f"container llmdeck-{old.name}"
        raise AlreadyExistsError(
            f"A server named {name!r} is already running ({running}, port {old.port}).",
            hint=f"Use `llmdeck restart {name}`, stop it with `llmdeck down {name}`, "
            "or choose another --name.",
        )
    return True


class Cleared(NamedTuple):
    outcome: str  # the stop's: "gone", "stale" …
    leftovers: int  # processes of the dead server that still ran, stopped now


def forget_dead(store: StateStore, name: str, docker: DockerCLI | None = None) -> Cleared | None:
    """A record of a server that no longer runs makes room, its leftovers cleared as `down` clears
    them: an exited container (its log saved first) had kept the name, so the next `docker run` failed
    on it; a crashed engine's surviving workers had kept the GPU. A live one refuses. None when there
    was no record."""
    from llmdeck.engines.process import leftover_count

    if not refuse_running(store, name):
        return None
    record = store.load(name)
    left = leftover_count(record.pid, record.process) if record.pid else 0  # its group: the leader's pid
    outcome = engine_of(record, docker).stop(record, grace_s=5.0)  # a reused pid is never signalled
    on_disk = _on_disk(store, name)  # a start that recorded its server meanwhile keeps its record
    if on_disk is not None and _same_start(on_disk, record):
        store.remove(name)
    return Cleared(outcome, left if outcome == "gone" else 0)


def refuse_a_port_taken_by_a_start(store: StateStore, spec: LaunchSpec) -> None:
    """PortInUseError when a live llmdeck server has the port: one still loading binds it only later,
    so the port check could not see it."""
    for other in store.list():
        if other.name != spec.name and other.port == spec.port and is_alive(other):
            raise PortInUseError(
                f"Port {spec.port} is the llmdeck server {other.name!r}'s (it may still be starting).",
                hint=f"Choose another --port, or stop it first (`llmdeck down {other.name}`).",
            )


def prepare_folders(store: StateStore, folders: list[Path]) -> None:
    """What a start writes, made and checked before the engine is spawned (an engine started, then a
    record that could not be written, had run on untracked): the record's folder writable, the log's
    and the cache's folders made. Exit 2 naming the path otherwise."""
    from llmdeck.util.localfile import ensure_dir

    store.ensure_writable()
    for folder in folders:
        ensure_dir(folder)


def rotate(log_path: Path) -> None:
    """The earlier runs' logs moved along (NAME.log.1-.3); exit 2 naming the path that is in the way."""
    from llmdeck.util.atomic import write_error

    try:
        rotate_log(log_path)
    except OSError as exc:
        raise write_error(Path(exc.filename or log_path), exc) from None


def keep_record(store: StateStore, record: ServerRecord, secrets: dict[str, str], engine: Engine) -> None:
    """Save the started server's secrets and record; when that fails (a full disk, Ctrl-C) the engine
    goes at once: with no record nothing could stop it later."""
    try:
        store.save_secrets(record.name, secrets)
        store.save(record)
    except BaseException:
        engine.stop(record, grace_s=5)
        raise


def _same_start(a: ServerRecord, b: ServerRecord) -> bool:
    return (a.pid, a.container_id, a.started_at) == (b.pid, b.container_id, b.started_at)


def _on_disk(store: StateStore, name: str) -> ServerRecord | None:
    from llmdeck.errors import NotRunningError

    try:
        return store.load(name)
    except NotRunningError:  # gone, or unreadable: not this start's either way
        return None


def forget_own(store: StateStore, record: ServerRecord, settings: Settings) -> None:
    """Remove ``record``'s file only while it is still this start's (checked under the start lock): a
    start that failed after `down` had stopped it had removed the record a newer `up` of the name had
    saved meanwhile, that server left running unrecorded."""
    with start_lock(settings):
        on_disk = _on_disk(store, record.name)
        if on_disk is not None and _same_start(on_disk, record):
            store.remove(record.name)


def save_if_own(store: StateStore, record: ServerRecord, settings: Settings) -> bool:
    """Save ``record`` (now ready) over its file only while that is still this start's; False when it
    is gone or another's: a `down` in the last moment of the wait had been undone by the ready start
    saving its record again, a record of a stopped server left behind and "ready" said of it."""
    with start_lock(settings):
        on_disk = _on_disk(store, record.name)
        if on_disk is None or not _same_start(on_disk, record):
            return False
        store.save(record)
        return True
