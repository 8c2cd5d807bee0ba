"""The launch spec: everything needed to start one vLLM server, as data.

``llmdeck plan`` writes one (``--spec-out``), ``llmdeck up`` consumes one (``--spec``), and the
engine modules turn it into an argv. Versioned: ``schema_version`` changes on breaking edits.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

LAUNCH_SPEC_SCHEMA_VERSION = 1

EngineKind = Literal["cpu", "venv", "docker"]
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


class LaunchSpec(BaseModel):
    """One server to start: which engine, which model, which flags."""

    schema_version: int = LAUNCH_SPEC_SCHEMA_VERSION
    name: str = Field("default", description="Server name, unique on this machine.")
    engine: EngineKind = "cpu"
    model: str = Field(..., description="Local model folder, or a Hugging Face repo id.")
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    vllm_args: list[str] = Field(default_factory=list, description="Extra `vllm serve` flags.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    python: str | None = Field(None, description="venv/cpu engines: the Python that has vLLM.")
    image: str | None = Field(None, description="docker engine: the image.")
    hf_cache: str | None = Field(None, description="docker engine: host HF cache mounted in the container.")
    restart_policy: str | None = Field("unless-stopped", description="docker engine: --restart policy.")

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(
                "server names use letters, digits, '.', '_' and '-' (max 63), starting with a letter or digit"
            )
        return value

    @property
    def effective_served_name(self) -> str:
        if self.served_model_name:
            return self.served_model_name
        return self.model.rstrip("/").split("/")[-1] or self.model
