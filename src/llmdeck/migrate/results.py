"""The versioned result of ``llmdeck migrate ollama`` (``migration.json`` and ``--json``)."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_serializer

from llmdeck import __version__

MIGRATION_SCHEMA_VERSION = 1
MIGRATION_KIND = "llmdeck.migrate.ollama"
DEFAULT_BASE_PORT = 8001


class MigrateRequest(BaseModel):
    """What the user asked for (every option)."""

    ollama_url: str = "http://127.0.0.1:11434"
    out_dir: Path
    machine: str = "auto"
    engine: Literal["docker", "venv"] = "docker"
    context: int | None = Field(None, gt=0, description="max_model_len for every model (default: plan's).")
    base_port: int = Field(DEFAULT_BASE_PORT, ge=1, le=65000)
    gateway_port: int = Field(4000, ge=1, le=65535)
    force: bool = False
    unload: bool = False
    timeout_s: float = Field(10.0, gt=0, le=600)

    @field_serializer("ollama_url")
    def _url_out(self, url: str) -> str:
        """A URL's password never reaches migration.json or --json (the run itself keeps it)."""
        from llmdeck.util.redact import redact_url

        return redact_url(url)


class Change(BaseModel):
    """One thing that is not the same on vLLM as it was on Ollama."""

    what: str
    ollama: str
    vllm: str
    note: str = ""


class MigratedModel(BaseModel):
    ollama_name: str
    aliases: list[str] = Field(description="The model names the gateway answers for it.")
    catalog_name: str
    repo_id: str
    quantization: str | None
    why: str
    alternatives: list[str] = Field(default_factory=list)
    spec_file: str
    server_name: str
    port: int
    vllm_args: list[str]
    max_model_len: int
    weights_gib: float
    requested_gib: float = Field(description="What vLLM takes at start (gpu_memory_utilization x device).")
    kv_cache_gib: float
    kv_cache_tokens: int
    max_concurrency_at_max_len: float
    lint_errors: list[str] = Field(default_factory=list)
    lint_warnings: list[str] = Field(default_factory=list)
    changes: list[Change] = Field(default_factory=list)


class Unmapped(BaseModel):
    ollama_name: str
    family: str | None = None
    parameter_size: str | None = None
    quantization_level: str | None = None
    why: str


class LoadedModel(BaseModel):
    name: str
    bytes: int | None = None
    vram_bytes: int | None = None
    expires_at: str | None = None
    unload_command: str


class MigrationReport(BaseModel):
    schema_version: int = MIGRATION_SCHEMA_VERSION
    kind: str = MIGRATION_KIND
    llmdeck_version: str = __version__
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    host: dict[str, str] = Field(
        default_factory=lambda: {
            "hostname": platform.node(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        }
    )
    request: MigrateRequest
    ollama_url: str
    ollama_version: str | None = None
    machine: str = Field(description="The machine profile the plans were made for.")
    migrated: list[MigratedModel] = Field(default_factory=list)
    unmapped: list[Unmapped] = Field(default_factory=list)
    loaded: list[LoadedModel] = Field(default_factory=list, description="Models Ollama holds in memory.")
    unloaded: list[str] = Field(default_factory=list, description="Unloaded by --unload.")
    gateway_config: str | None = None
    next_commands: list[str] = Field(default_factory=list)
