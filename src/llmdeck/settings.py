"""Settings: environment variables with the ``LLMDECK_`` prefix.

Built once in ``llmdeck.cli.app`` and passed down; nothing reads configuration at import time.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


class Settings(BaseSettings):
    """Everything llmdeck may be configured with, from ``LLMDECK_*`` variables."""

    model_config = SettingsConfigDict(env_prefix="LLMDECK_", extra="ignore")

    debug: bool = Field(False, description="Show tracebacks (LLMDECK_DEBUG=1).")
    state_dir: Path = Field(
        default_factory=lambda: _xdg("XDG_STATE_HOME", ".local/state") / "llmdeck",
        description="Where server records and logs live (XDG state home).",
    )
    cache_dir: Path = Field(
        default_factory=lambda: _xdg("XDG_CACHE_HOME", ".cache") / "llmdeck",
        description="Engine caches (vLLM cache root, TMPDIR for the engine).",
    )
    models_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "huggingface" / "models",
        description="Where `llmdeck fetch` puts models (seed 004's layout).",
    )
    host: str = Field("127.0.0.1", description="Default host servers bind to and clients talk to.")
    port: int = Field(8000, ge=1, le=65535, description="Default server port.")
    api_key: str | None = Field(None, description="API key sent to servers (Authorization: Bearer).")
    results_dir: Path = Field(Path("runs"), description="Where bench results go by default.")
    catalog_paths: list[Path] = Field(
        default_factory=list, description="Extra catalog files or folders (user catalogs)."
    )
    ready_timeout_s: float = Field(900.0, gt=0, description="How long `up` waits for readiness.")
    watchdog_floor_gib: float = Field(
        1.5, ge=0, description="`up` stops the engine when MemAvailable falls below this during start-up."
    )

    @property
    def servers_dir(self) -> Path:
        return self.state_dir / "servers"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"
