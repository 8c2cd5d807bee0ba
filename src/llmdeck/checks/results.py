"""The check report: one verdict per probe, with the evidence, versioned."""

from __future__ import annotations

import platform as _platform
import socket
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from llmdeck import __version__

CHECK_REPORT_SCHEMA_VERSION = 1

Status = Literal["pass", "warn", "fail", "inconclusive", "not_applicable", "skipped"]


class Exchange(BaseModel):
    """One HTTP exchange, trimmed: what was sent and what came back."""

    method: str
    path: str
    sent: str | None = None
    status_code: int | None = None
    received: str | None = None
    seconds: float | None = None


class ProbeResult(BaseModel):
    """The verdict of one probe."""

    id: str
    title: str
    status: Status
    required: bool = Field(False, description="The chosen client needs this probe to pass.")
    summary: str
    fix: str | None = None
    evidence: list[Exchange] = Field(default_factory=list)
    data: dict[str, object] = Field(default_factory=dict)


class ServerFacts(BaseModel):
    """What the probes learned about the server (reused by `llmdeck connect`)."""

    base_url: str
    server_version: str | None = None
    model: str | None = None
    model_root: str | None = None
    models: list[str] = Field(default_factory=list)
    max_model_len: int | None = None
    api_key_required: bool | None = None
    thinking_template: bool | None = Field(None, description="The chat template honours enable_thinking.")
    thinking_default: bool | None = Field(None, description="Thinking is on when a request says nothing.")
    reasoning_parser: bool | None = None
    reasoning_field: str | None = None
    auto_tool_choice: bool | None = None
    tool_parser: bool | None = None
    suggested_tool_parser: str | None = None
    suggested_reasoning_parser: str | None = None


class HostFacts(BaseModel):
    hostname: str = Field(default_factory=socket.gethostname)
    platform: str = Field(default_factory=_platform.platform)
    python: str = Field(default_factory=_platform.python_version)


class CheckReport(BaseModel):
    """Everything `llmdeck check` found, as JSON (``--json``) or a table."""

    schema_version: int = CHECK_REPORT_SCHEMA_VERSION
    kind: Literal["llmdeck.check"] = "llmdeck.check"
    llmdeck_version: str = __version__
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    host: HostFacts = Field(default_factory=HostFacts)
    client: str | None = None
    server: ServerFacts
    probes: list[ProbeResult] = Field(default_factory=list)
    only: list[str] | None = Field(
        None,
        description="The probes asked for (`check --probe`): only these ran, with health, api_key and "
        "models, and `ready` speaks for them alone.",
    )
    incomplete: str | None = Field(None, description="Why some probes did not run (the deadline passed).")
    error: str | None = Field(
        None, description="Why the check stopped before its verdict: the server is unreachable or silent."
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ready(self) -> bool:
        """No probe the chosen client needs has failed (also in the JSON)."""
        return self.ok

    @property
    def failed_required(self) -> list[ProbeResult]:
        return [p for p in self.probes if p.required and p.status == "fail"]

    @property
    def ok(self) -> bool:
        """True when no probe the chosen client needs has failed and every probe ran."""
        return not self.failed_required and self.incomplete is None and self.error is None

    def probe(self, probe_id: str) -> ProbeResult:
        for p in self.probes:
            if p.id == probe_id:
                return p
        raise KeyError(probe_id)
