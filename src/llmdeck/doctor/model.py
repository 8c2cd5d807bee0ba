"""The doctor's result schema (versioned; it records the host it ran on)."""

from __future__ import annotations

import os
import platform
import sys
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

DOCTOR_SCHEMA_VERSION = 1
Status = Literal["ok", "warn", "fail"]


class DoctorFinding(BaseModel):
    """One thing checked: its status, what it means, and what to do when it is not ok."""

    id: str
    area: str = Field(
        description="folders, os, gpu, cuda, docker, vllm, hf, proxy, disk, memory, tenants, ports"
    )
    status: Status
    message: str
    fix: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class DoctorHost(BaseModel):
    hostname: str = Field(default_factory=platform.node)
    os: str = Field(default_factory=platform.platform)
    machine: str = Field(default_factory=platform.machine)
    python: str = Field(default_factory=lambda: sys.version.split()[0])
    cpu_count: int | None = Field(default_factory=lambda: os.cpu_count())


class DoctorReport(BaseModel):
    schema_version: int = DOCTOR_SCHEMA_VERSION
    llmdeck_version: str = ""
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    host: DoctorHost = Field(default_factory=DoctorHost)
    findings: list[DoctorFinding] = Field(default_factory=list)

    @property
    def failed(self) -> list[DoctorFinding]:
        return [f for f in self.findings if f.status == "fail"]

    @property
    def warned(self) -> list[DoctorFinding]:
        return [f for f in self.findings if f.status == "warn"]

    @property
    def ok(self) -> bool:
        return not self.failed
