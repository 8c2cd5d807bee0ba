"""The preflight report: findings (what is wrong, and what to do) and the facts they were found on."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any, Literal

from pydantic import BaseModel, Field

PREFLIGHT_SCHEMA_VERSION = 1

Severity = Literal["error", "warning", "info"]


class Finding(BaseModel):
    """One preflight result. ``error`` stops the launch (unless --force)."""

    id: str
    severity: Severity
    message: str
    fix: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class HostFacts(BaseModel):
    hostname: str = Field(default_factory=platform.node)
    platform: str = Field(default_factory=platform.platform)
    python: str = Field(default_factory=lambda: sys.version.split()[0])
    cpu_count: int | None = Field(default_factory=os.cpu_count)


class PreflightReport(BaseModel):
    schema_version: int = PREFLIGHT_SCHEMA_VERSION
    llmdeck_version: str = ""
    server: str
    engine: str
    findings: list[Finding] = Field(default_factory=list)
    host: HostFacts = Field(default_factory=HostFacts)
    vllm_version: str | None = None
    architecture: str | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors
