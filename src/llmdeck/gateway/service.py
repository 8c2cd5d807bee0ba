"""The gateway as a background process: its record, its log, up / down / status.

One gateway per state dir: the record is ``<state>/gateway/gateway.json``, the log
``<state>/logs/gateway.log`` (kept across runs as gateway.log.1 … like the servers' logs, and moved
along the same way while it runs, past 64 MiB: logcap.py).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field, ValidationError

from llmdeck.engines.logfiles import open_log
from llmdeck.engines.process import (
    ProcessIdentity,
    identify,
    pid_owner,
    spawn_detached,
    stop_process_group,
)
from llmdeck.errors import AlreadyExistsError, NotRunningError, OperationError, UsageError
from llmdeck.runtime.launcher import read_tail, rotate_log
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.http import BodyTooLarge, NotAnswering, Redirected, bounded_get, failure_words
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.localfile import ensure_dir, read_regular_text
from llmdeck.util.net import bind_hint, bind_problem, validate_port

GATEWAY_RECORD_SCHEMA_VERSION = 1
MAX_RECORD_BYTES = 1 << 20
PID_MAX = 2**31 - 1  # any pid os.kill takes; 0, a negative or a larger one is not a record
_WHY = {"UnicodeDecodeError": "not UTF-8 text", "ValidationError": "not JSON, or not a gateway record"}


class GatewayRecord(BaseModel):
    schema_version: int = GATEWAY_RECORD_SCHEMA_VERSION
    pid: int | None = Field(..., gt=0, le=PID_MAX, description="The gateway process (a positive pid).")
    host: str = Field(..., min_length=1, max_length=255, pattern=r"^[0-9A-Za-z.:_-]+$")
    port: int = Field(..., ge=1, le=65535)
    config: Path
    log_path: Path
    insecure: bool = False
    argv: list[str] = Field(default_factory=list)
    process: ProcessIdentity | None = Field(None, description="What identifies the process (start time).")
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    managed: list[str] = Field(
        default_factory=list, description="The servers it starts on demand: `gateway down` stops any left."
    )

    @property
    def base_url(self) -> str:
        from llmdeck.util.net import local_url

        return local_url(self.host, self.port)


def _ours(record: GatewayRecord) -> bool:
    """The recorded pid is still the gateway llmdeck started (not a reused pid)."""
    return pid_owner(record.pid, record.process, record.argv) == "ours"


def record_path(settings: Any) -> Path:
    return Path(settings.state_dir) / "gateway" / "gateway.json"


def log_path(settings: Any) -> Path:
    return Path(settings.logs_dir) / "gateway.log"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, keys_on: bool, insecure: bool) -> None:
    """A bind beyond loopback needs API keys, or --insecure (which the log and status then say)."""
    if is_loopback(host) or keys_on or insecure:
        return
    raise UsageError(
        f"Refusing to serve {host} without API keys: anyone on the network could use the models.",
        hint="Create a key (`llmdeck keys create NAME`), bind 127.0.0.1, or pass --insecure to serve the "
        "network with no keys.",
    )


def load_record(settings: Any) -> GatewayRecord | None:
    path = record_path(settings)
    if not path.exists():
        return None
    try:  # a named pipe there is not opened (reading one waits for a writer that never comes)
        text = read_regular_text(path, MAX_RECORD_BYTES)
        return GatewayRecord.model_validate_json(text, strict=True)  # as written: `"pid": true` is none
    except (ValidationError, ValueError, OSError) as exc:  # ValueError: not UTF-8
        why = getattr(exc, "strerror", None) or _WHY.get(type(exc).__name__, "not a gateway record")
        raise NotRunningError(
            f"The gateway record {path} is unreadable ({why}).",
            hint=f"Delete {path}; stop a running gateway by its pid if there is one.",
        ) from exc


def start_background(
    config: Path, host: str, port: int, settings: Any, *, insecure: bool, managed: Sequence[str] = ()
) -> GatewayRecord:
    """Spawn ``python -m llmdeck.gateway.serve`` detached, its output in the log; wait until /health.
    One `gateway up` at a time: a second waits for the first, then finds it recorded. ``managed``: the
    servers its config starts on demand (recorded, for `gateway down`)."""
    validate_port(port)
    with _one_at_a_time(settings):
        return _start_locked(config, host, port, settings, insecure=insecure, managed=list(managed))


def _one_at_a_time(settings: Any) -> contextlib.AbstractContextManager[None]:
    """One `gateway up` or `gateway down` at a time, from reading the record to writing (or removing)
    it: an up during a down had recorded its new gateway, then the down removed that record."""
    from llmdeck.util.filelock import exclusive

    return exclusive(
        record_path(settings).with_suffix(".lock"), timeout_s=60.0, what="`llmdeck gateway up` or `down`"
    )


def check_port(host: str, port: int) -> None:
    """UsageError (exit 2) when the gateway cannot listen on ``host:port`` (in use, not this host's)."""
    problem = bind_problem(port, "127.0.0.1" if host in {"0.0.0.0", "::"} else host)
    if problem == "in use":
        raise UsageError(f"Port {port} on {host} is in use.", hint="Choose another with --port.")
    if problem is not None:
        raise UsageError(
            f"The gateway cannot listen on {host}:{port}: {problem}.", hint=bind_hint(host, problem)
        )


def _start_locked(
    config: Path, host: str, port: int, settings: Any, *, insecure: bool, managed: list[str]
) -> GatewayRecord:
    old = load_record(settings)
    if old is not None and _ours(old):
        raise AlreadyExistsError(
            f"The gateway is already running (pid {old.pid}, {old.base_url}).",
            hint="Stop it with `llmdeck gateway down` first.",
        )
    check_port(host, port)
    log = log_path(settings)
    ensure_dir(log.parent)  # a file in the way is a UsageError naming it
    rotate_log(log)
    argv = [
        sys.executable,
        "-m",
        "llmdeck.gateway.serve",
        "--config",
        str(config.resolve()),
        "--host",
        host,
        "--port",
        str(port),
        "--log",
        str(log.resolve()),
    ] + (["--insecure"] if insecure else [])
    env = {**os.environ, "LLMDECK_STATE_DIR": str(Path(settings.state_dir).resolve())}
    with open_log(log, argv) as fh:  # 0600, as the servers' logs (it names keys and clients)
        proc = spawn_detached(argv, fh, env)
    record = GatewayRecord(
        pid=proc.pid,
        host=host,
        port=port,
        config=config.resolve(),
        log_path=log,
        insecure=insecure,
        argv=argv,
        process=identify(proc.pid),
        managed=managed,
    )
    atomic_write_json(record_path(settings), record)
    _wait_healthy(record, proc, timeout_s=30.0)
    return record


def _wait_healthy(record: GatewayRecord, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = read_tail(record.log_path, 4000).strip().splitlines()[-8:]
            raise OperationError(
                f"The gateway exited during start-up (exit {proc.returncode}): " + " | ".join(tail),
                hint=f"Read {record.log_path}.",
            )
        try:
            if httpx.get(f"{record.base_url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_process_group(proc.pid, grace_s=3)
    raise OperationError(
        f"The gateway did not answer /health within {timeout_s:g} s.", hint=f"Read {record.log_path}."
    )


def gateway_target(settings: Any) -> Any:
    """The running gateway as a check/connect Target (``--server gateway``), or None when none is known."""
    from llmdeck.runtime.target import Target

    record = load_record(settings)
    if record is None or not _ours(record):
        return None
    return Target(base_url=record.base_url, source="gateway")


def stop(settings: Any) -> str:
    if load_record(settings) is None:  # nothing to stop: no lock (nor lock file) needed
        raise NotRunningError("No gateway is known to llmdeck.", hint="Start one with `llmdeck gateway up`.")
    with _one_at_a_time(settings):
        return _stop_locked(settings)


def _stop_locked(settings: Any) -> str:
    record = load_record(settings)
    if record is None:
        raise NotRunningError("No gateway is known to llmdeck.", hint="Start one with `llmdeck gateway up`.")
    outcome = (  # time for its own shutdown: each model it runs gets 20 s to stop before a SIGKILL
        stop_process_group(record.pid, grace_s=STOP_GRACE_S, identity=record.process, argv=record.argv)
        if record.pid
        else "gone"
    )
    from llmdeck.gateway.lifecycle import stop as stop_server

    for name in record.managed:  # a model its shutdown did not get to (the gateway was killed): stopped
        stop_server(name, settings)  # here, as any llmdeck server, its pid checked first; none: "gone"
    record_path(settings).unlink(missing_ok=True)
    return outcome


STOP_GRACE_S = 40.0


STATUS_TIMEOUT_S = 3.0


def status(settings: Any) -> dict[str, Any]:
    """The record, whether it runs, and (when it answers) the live routes and backends."""
    record = load_record(settings)
    if record is None:
        return {"state": "stopped"}
    out: dict[str, Any] = {
        "state": "running" if _ours(record) else "dead",
        "url": record.base_url,
        "pid": record.pid,
        "host": record.host,
        "port": record.port,
        "config": str(record.config),
        "log": str(record.log_path),
        "insecure": record.insecure,
        "started_at": record.started_at.isoformat(),
    }
    if out["state"] == "running":
        url = f"{record.base_url}/gateway/status"
        try:  # bounded as a whole, capped and never inflated: it had read an endless body whole
            code, body = bounded_get(url, limit=STATUS_TIMEOUT_S)
            if code != 200:
                raise httpx.HTTPStatusError(
                    "", request=httpx.Request("GET", url), response=httpx.Response(code)
                )
            data = json_loads(body)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            out.update(data)
        except (httpx.HTTPError, ValueError, NotAnswering, BodyTooLarge, Redirected) as exc:
            out["state"] = "unhealthy"
            out["error"] = _status_problem(exc)
    return out


def _status_problem(exc: Exception) -> str:
    """Why the running gateway's /gateway/status gave no status, in words (no exception class names)."""
    return failure_words(exc, "/gateway/status", STATUS_TIMEOUT_S, "a JSON object")
