"""Records of the servers llmdeck started, one JSON file each in the state dir.

``<state>/servers/NAME.json`` (0600, folder 0700) holds no secret: argv and env are redacted when
dumped, and the secrets a server was started with (``VLLM_API_KEY`` …) live in
``<state>/servers/NAME.secrets`` (0600), read back only to restart it and to wait for it.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_serializer

from llmdeck.engines.process import ProcessIdentity
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import InternalError, NotRunningError, UsageError
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.jsonsafe import loads as _json_loads
from llmdeck.util.localfile import ensure_dir
from llmdeck.util.names import validate_server_name
from llmdeck.util.redact import redact_argv, redact_env

SERVER_RECORD_SCHEMA_VERSION = 1
PID_MAX = 2**31 - 1  # any pid os.kill takes; 0, a negative or a larger one is not a record


StartedBy = Literal["up", "gateway"]


class ServerRecord(BaseModel):
    """What llmdeck knows about a server it started."""

    schema_version: int = SERVER_RECORD_SCHEMA_VERSION
    name: str
    spec: LaunchSpec
    argv: list[str]
    env: dict[str, str] = Field(
        default_factory=dict, description="Variables llmdeck set (not the whole env)."
    )
    pid: int | None = Field(None, gt=0, le=PID_MAX, description="The engine process (a positive pid).")
    process: ProcessIdentity | None = Field(
        None,
        description="start tick since boot, create_time and cmdline of the pid at launch: checked before any "
        "signal.",
    )
    container_id: str | None = None
    sized_from: LaunchSpec | None = Field(
        None,
        description="On unified memory: the spec as asked, before the start sized its KV cache from live "
        "memory (--kv-cache-memory-bytes): what a restart sizes again.",
    )
    log_path: Path
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    ready_at: datetime | None = None
    started_by: StartedBy = Field(
        "up", description="Who started it: the gateway stops only the servers it started itself."
    )

    @field_serializer("argv")
    def _argv_out(self, argv: list[str]) -> list[str]:
        return redact_argv(argv)

    @field_serializer("env")
    def _env_out(self, env: dict[str, str]) -> dict[str, str]:
        return redact_env(env)

    @property
    def host(self) -> str:
        return self.spec.host if self.spec.host not in {"0.0.0.0", "::"} else "127.0.0.1"

    @property
    def port(self) -> int:
        return self.spec.port

    @property
    def base_url(self) -> str:
        from llmdeck.util.net import local_url

        return local_url(self.host, self.port)

    @property
    def served_model_name(self) -> str:
        return self.spec.effective_served_name


MAX_RECORD_BYTES = 1 << 20  # a record is a few KB
_WHY = {
    "UnicodeDecodeError": "not UTF-8 text",
    "JSONDecodeError": "not JSON",
    "ValidationError": "not a record",
}


def _read_record(path: Path) -> ServerRecord:
    """One record file (never waits on a pipe put there); ValidationError / ValueError / OSError."""
    from llmdeck.util.localfile import read_regular_text

    # strict: llmdeck wrote it with these types, so `"pid": true` or `"port": "80"` is no record of its own
    record = ServerRecord.model_validate_json(read_regular_text(path, MAX_RECORD_BYTES), strict=True)
    if record.name != path.stem:  # a copy under another name had been listed twice, and `down COPY`
        # stopped the other's server while removing only the copy
        raise _Misnamed(f"it is the record of server {record.name!r}, not {path.stem!r}: a copy?")
    return record


class _Misnamed(InternalError, ValueError):
    """A record file whose server name is not its file's (``alias.json`` holding ``name: f1``); a
    ValueError like the other unreadable records, read as such by every caller."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.strerror = why


def _why(exc: Exception) -> str:
    """Why a record file is unreadable, in words (never the exception's class name)."""
    return getattr(exc, "strerror", None) or _WHY.get(type(exc).__name__, "not a record")


Warnings = list[str]  # (named here: inside StateStore, ``list`` is the method)


def _scan_records(servers_dir: Path) -> tuple[list[ServerRecord], Warnings]:
    """(readable records, a warning for each unreadable one) of a servers folder."""
    if not servers_dir.is_dir():
        return [], []
    records, problems = [], []
    for path in sorted(servers_dir.glob("*.json")):
        try:
            records.append(_read_record(path))
        except (ValidationError, ValueError, OSError) as exc:  # ValueError: not JSON, not UTF-8
            problems.append(
                f"skipped the unreadable server record {path} ({_why(exc)}); delete it if no server uses it."
            )
    return records, problems


class StateStore:
    """Server records under ``<state_dir>/servers/<name>.json``."""

    def __init__(self, servers_dir: Path) -> None:
        self.servers_dir = Path(servers_dir)

    def path(self, name: str) -> Path:
        """The record's path; the name is validated here, so no name ever leaves the state dir."""
        return self.servers_dir / f"{validate_server_name(name)}.json"

    def secrets_path(self, name: str) -> Path:
        return self.servers_dir / f"{validate_server_name(name)}.secrets"

    def _ensure_dir(self) -> None:
        ensure_dir(self.servers_dir)  # a file in the way is a UsageError naming it
        if not self.servers_dir.is_symlink():  # a linked folder's mode is its owner's (a shared 1777 one)
            with contextlib.suppress(OSError):
                os.chmod(self.servers_dir, 0o700)

    def ensure_writable(self) -> None:
        """The records' folder made, and one a record can be written into (UsageError otherwise)."""
        self._ensure_dir()
        if not os.access(self.servers_dir, os.W_OK | os.X_OK):
            raise UsageError(
                f"Cannot write server records into {self.servers_dir}: permission denied.",
                hint="Make it writable, or point LLMDECK_STATE_DIR at a folder you own.",
            )

    def save(self, record: ServerRecord) -> None:
        self._ensure_dir()
        atomic_write_json(self.path(record.name), record, secret=True)

    def save_secrets(self, name: str, secrets: dict[str, str]) -> None:
        """The secret variables of server ``name`` (0600); none: the file is removed."""
        if not secrets:
            self.secrets_path(name).unlink(missing_ok=True)
            return
        self._ensure_dir()
        atomic_write_json(self.secrets_path(name), secrets, secret=True)

    def load_secrets(self, name: str) -> dict[str, str]:
        """The secrets of server ``name``; {} when there are none or the file is unreadable (a named
        pipe there is not opened: reading one would wait for a writer that never comes)."""
        from llmdeck.util.localfile import read_regular_text

        try:
            data = _json_loads(read_regular_text(self.secrets_path(name), MAX_RECORD_BYTES))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def load(self, name: str) -> ServerRecord:
        path = self.path(name)
        if not path.exists():
            known = ", ".join(r.name for r in self.list()) or "none"
            raise NotRunningError(
                f"No server named {name!r} is known to llmdeck (known: {known}).",
                hint="Run `llmdeck status` to see servers, or `llmdeck up` to start one.",
            )
        try:
            return _read_record(path)
        except (ValidationError, ValueError, OSError) as exc:  # ValueError: not JSON, not UTF-8
            raise NotRunningError(
                f"The record of server {name!r} at {path} is unreadable ({_why(exc)}).",
                hint=f"Delete {path} and start the server again.",
            ) from exc

    def list(self) -> list[ServerRecord]:
        """The readable records; unreadable ones are skipped (:meth:`unreadable` names them)."""
        return _scan_records(self.servers_dir)[0]

    def unreadable(self) -> Warnings:
        """One warning per record file :meth:`list` skips (not UTF-8, not JSON, not a record, a pipe)."""
        return _scan_records(self.servers_dir)[1]

    def remove(self, name: str) -> None:
        """Forget server ``name`` (its engine is stopped already); UsageError when the folder forbids it."""
        for path in (self.path(name), self.secrets_path(name)):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                raise UsageError(
                    f"The server {name!r} is stopped, but its record {path} cannot be removed: "
                    f"{exc.strerror or exc}.",
                    hint=f"Make {self.servers_dir} writable and run `llmdeck down {name}` again (it then "
                    "finds the process gone and removes the record).",
                ) from exc
