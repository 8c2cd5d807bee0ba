"""Records of the servers llmdeck started, one JSON file each in the state dir."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import NotRunningError
from llmdeck.util.atomic import atomic_write_json

SERVER_RECORD_SCHEMA_VERSION = 1


class ServerRecord(BaseModel):
    """What llmdeck knows about a server it started."""

    schema_version: int = SERVER_RECORD_SCHEMA_VERSION
    name: str
    spec: LaunchSpec
    argv: list[str]
    env: dict[str, str] = Field(
        default_factory=dict, description="Variables llmdeck set (not the whole env)."
    )
    pid: int | None = None
    container_id: str | None = None
    log_path: Path
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    ready_at: datetime | None = None

    @property
    def host(self) -> str:
        return self.spec.host if self.spec.host not in {"0.0.0.0", "::"} else "127.0.0.1"

    @property
    def port(self) -> int:
        return self.spec.port

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def served_model_name(self) -> str:
        return self.spec.effective_served_name


class StateStore:
    """Server records under ``<state_dir>/servers/<name>.json``."""

    def __init__(self, servers_dir: Path) -> None:
        self.servers_dir = Path(servers_dir)

    def path(self, name: str) -> Path:
        return self.servers_dir / f"{name}.json"

    def save(self, record: ServerRecord) -> None:
        atomic_write_json(self.path(record.name), record)

    def load(self, name: str) -> ServerRecord:
        path = self.path(name)
        if not path.exists():
            known = ", ".join(r.name for r in self.list()) or "none"
            raise NotRunningError(
                f"No server named {name!r} is known to llmdeck (known: {known}).",
                hint="Run `llmdeck status` to see servers, or `llmdeck up` to start one.",
            )
        try:
            return ServerRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, json.JSONDecodeError) as exc:
            raise NotRunningError(
                f"The record of server {name!r} at {path} is unreadable ({exc.__class__.__name__}).",
                hint=f"Delete {path} and start the server again.",
            ) from exc

    def list(self) -> list[ServerRecord]:
        if not self.servers_dir.is_dir():
            return []
        records = []
        for path in sorted(self.servers_dir.glob("*.json")):
            try:
                records.append(ServerRecord.model_validate_json(path.read_text(encoding="utf-8")))
            except (ValidationError, json.JSONDecodeError, OSError):
                continue
        return records

    def remove(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)
