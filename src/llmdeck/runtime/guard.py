"""The running watchdog: a small detached process that stops one server before the host goes under.

The start-up watchdog (:mod:`llmdeck.runtime.watchdog`) samples memory while ``up`` waits for
readiness; once ``up`` returns nobody watches, yet on unified memory a server that runs can still take
the host down (a KV cache filling, a tenant growing, a wake that brings weights back: vllm issue
#50011 took a Spark down twice). So on unified memory ``up`` leaves this guard behind:
``python -m llmdeck.runtime.guard CONFIG_JSON``. Every ``interval_s`` it samples MemAvailable, swap
and PSI; when a limit trips it stops *its* server only (the recorded process group, identity-checked,
as ``llmdeck down`` does), forgets its record, and says which limit tripped, what the server held and
the flag to change — in the server's log, in ``NAME.watchdog`` next to the record (``llmdeck
status`` shows it) and on its own stderr. It exits when the server is gone or replaced.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from llmdeck.runtime.watchdog import WatchdogConfig, sample, trip_hint, trip_reason
from llmdeck.util.units import GIB


class GuardConfig(BaseModel):
    name: str
    pid: int
    servers_dir: Path
    watchdog: WatchdogConfig


class WatchdogTrip(BaseModel):
    """What a guard did: written as ``NAME.watchdog`` beside the server records."""

    name: str
    pid: int
    at: datetime
    limit: str
    reason: str
    held_bytes: int
    message: str
    hint: str


def trip_path(servers_dir: Path, name: str) -> Path:
    return servers_dir / f"{name}.watchdog"


def read_trip(servers_dir: Path, name: str) -> WatchdogTrip | None:
    from llmdeck.util.localfile import read_regular

    try:  # a FIFO in its place is skipped, not waited on
        head = read_regular(trip_path(servers_dir, name), 1 << 16, head=True)
        return WatchdogTrip.model_validate_json(head)
    except (OSError, ValueError):
        return None


def tree_bytes(pid: int) -> int:
    """PSS (else RSS) of ``pid`` and its descendants: what the server holds in host memory."""
    from llmdeck.engines.process import process_tree, tree_pss

    return tree_pss(process_tree(pid))


def spawn(name: str, pid: int, servers_dir: Path, watchdog: WatchdogConfig) -> int:
    """Start the guard for one server, detached (its own session); returns its pid."""
    config = GuardConfig(name=name, pid=pid, servers_dir=servers_dir, watchdog=watchdog)
    trip_path(servers_dir, name).unlink(missing_ok=True)
    from llmdeck.engines.process import spawn_module

    return spawn_module("llmdeck.runtime.guard", [config.model_dump_json()]).pid


def _trip(config: GuardConfig, limit: str, reason: str) -> WatchdogTrip:
    from llmdeck.runtime.launcher import stop_engine
    from llmdeck.runtime.state import StateStore
    from llmdeck.util.atomic import atomic_write_text

    store = StateStore(config.servers_dir)
    record = store.load(config.name)
    held = tree_bytes(config.pid)
    message = (
        f"llmdeck watchdog stopped {config.name!r} (pid {config.pid}) while it ran on unified memory: "
        f"{reason}; the server held {held / GIB:.2f} GiB."
    )
    trip = WatchdogTrip(
        name=config.name,
        pid=config.pid,
        at=datetime.now(UTC),
        limit=limit,
        reason=reason,
        held_bytes=held,
        message=message,
        hint=trip_hint(limit),
    )
    atomic_write_text(trip_path(config.servers_dir, config.name), trip.model_dump_json(indent=2))
    with open(record.log_path, "a", encoding="utf-8") as log:
        log.write(f"\n[llmdeck watchdog] {message} {trip.hint}\n")
    stop_engine(record, grace_s=5)
    store.remove(config.name)
    return trip


def watch(config: GuardConfig) -> WatchdogTrip | None:
    """Sample until the server is gone (None) or a limit trips (the trip, the server stopped)."""
    from llmdeck.errors import LlmdeckError
    from llmdeck.runtime.engine_state import is_alive
    from llmdeck.runtime.host import read_meminfo, read_psi_avg10
    from llmdeck.runtime.state import StateStore

    store = StateStore(config.servers_dir)
    first = None
    while True:
        try:
            record = store.load(config.name)
        except LlmdeckError:
            return None
        if record.pid != config.pid or not is_alive(record):
            return None
        now = sample(read_meminfo(), read_psi_avg10(kind="full"))
        first = first or now
        tripped = trip_reason(config.watchdog, now, first)
        if tripped is not None:
            return _trip(config, *tripped)
        time.sleep(config.watchdog.interval_s)


def main(argv: list[str]) -> int:
    config = GuardConfig.model_validate(json.loads(argv[0]))
    trip = watch(config)
    if trip is not None:
        sys.stderr.write(trip.message + " " + trip.hint + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
