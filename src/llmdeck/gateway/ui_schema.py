"""The dashboard's data: ``GET /ui/api/state`` (schema ``llmdeck.gateway.ui/1``), what ``/ui`` draws.

Stable for other tools (scripts, Open WebUI functions): fields are only added within a version; a
change of meaning or a removal bumps :data:`UI_SCHEMA_VERSION`. Bytes are integers, times are Unix
seconds (``generated_at`` is the gateway's clock: compare ``at`` fields with it, not with yours).
Nothing here is a key, a digest or a prompt.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

UI_SCHEMA = "llmdeck.gateway.ui"
UI_SCHEMA_VERSION = 1

SegmentKind = Literal["model", "server", "ollama", "os", "page_cache", "free"]
Action = Literal["start", "stop", "sleep", "wake"]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Segment(_Out):
    """A part of a memory pool. ``model``: a model on demand (``bytes`` = measured while it runs, else
    planned); ``server``: another llmdeck server; ``os``: everything else in use (kernel, other
    processes); ``page_cache``: reclaimable file cache (host pool only)."""

    kind: SegmentKind
    name: str
    bytes: int = Field(ge=0)
    planned_bytes: int | None = None
    measured_bytes: int | None = None
    state: str | None = None


class MemoryPool(_Out):
    """The host's memory (``/proc/meminfo``) or one GPU's (NVML, where it reports memory: not on GB10)."""

    name: str = Field(description="'host' or 'gpu0', 'gpu1', ...")
    kind: Literal["host", "gpu"]
    source: str = Field(description="Where the numbers come from: /proc/meminfo or nvml.")
    total_bytes: int = Field(ge=0)
    budget: bool = Field(description="The pool the models-on-demand budget counts in.")
    segments: list[Segment]


class BudgetView(_Out):
    kind: str
    memory_gib: float | Literal["auto"]
    reserve_gib: float
    held_bytes: int


class ModelView(_Out):
    """A model on demand (a launch-spec backend): its state and what may be done with it now."""

    name: str
    aliases: list[str]
    state: str
    progress: str | None = Field(description="The start-up phase reached, while starting or waited for.")
    planned_bytes: int
    planned_how: str
    measured_bytes: int | None
    held_bytes: int
    in_flight: int
    queue: int
    last_used: float | None
    starts: int
    evictions: int
    wakes: int
    start_seconds: float | None
    keep: bool
    ttl_s: float | None
    sleep_level: int | None
    last_error: str | None
    actions: list[Action] = Field(description="What POST /ui/api/models/{name}/{action} accepts now.")


class RouteView(_Out):
    """A route (alias), from the gateway's own metrics: rates and TTFT over the last ``window_s``."""

    alias: str
    backends: int
    healthy: int
    in_flight: int
    requests: int = Field(description="Requests since the gateway started.")
    errors: int
    window_s: float = Field(description="The window of the rates and percentiles (up to 60 s).")
    requests_per_s: float | None
    ttft_p50_ms: float | None = Field(description="From the TTFT histogram's buckets (interpolated).")
    ttft_p95_ms: float | None
    prompt_tokens: int
    completion_tokens: int
    completion_tokens_per_s: float | None


class EventView(_Out):
    seq: int
    at: float
    kind: str = Field(
        description="start, ready, failed, evict, stopped, sleep, wake, exited, refused or adopted"
    )
    model: str
    reason: str
    code: str | None = None
    count: int = 1


class ReportLink(_Out):
    """A bench / tune / eval HTML page in the results folder, served at ``href`` (sandboxed)."""

    name: str
    kind: Literal["bench", "tune", "eval", "report"]
    href: str
    modified: float
    bytes: int


class GatewayView(_Out):
    uptime_s: float
    keys_required: bool
    insecure: bool
    version: str


class UiState(_Out):
    schema_: str = Field(UI_SCHEMA, alias="schema")
    schema_version: int = UI_SCHEMA_VERSION
    generated_at: float
    gateway: GatewayView
    pools: list[MemoryPool]
    budget: BudgetView | None
    models: list[ModelView]
    routes: list[RouteView]
    events: list[EventView]
    reports: list[ReportLink]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
