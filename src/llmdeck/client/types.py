"""Plain data types of the client (dataclasses, not pydantic: built on the hot path)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Client timeouts in seconds. ``read`` is the longest gap between two received bytes;
    ``total`` bounds a whole request (``None`` = unbounded), so a server that trickles a byte now and
    then cannot hold it forever; ``probe`` bounds each short question (/v1/models, /version,
    /metrics): a server that accepts and never answers is reported after it."""

    connect: float = 10.0
    read: float = 600.0
    total: float | None = 1800.0
    probe: float = 30.0


@dataclass(slots=True)
class StreamResult:
    """One streamed request, timed with ``time.perf_counter``.

    ``chunk_times`` holds the arrival time of every chunk that carries generated output (content,
    reasoning or tool-call deltas; for /v1/completions every chunk with choices; never the
    role-only first chat chunk, the usage chunk or ``[DONE]``). Definitions follow
    ``vllm bench serve``: ``ttft = chunk_times[0] - start``, ``latency`` (E2EL) ``= chunk_times[-1]
    - start``, ``itl`` = successive gaps of ``chunk_times``.
    """

    start: float
    chunk_times: list[float] = field(default_factory=list)
    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    done: bool = False  # saw ``data: [DONE]``
    end: float = 0.0  # when the stream closed (after usage / [DONE])

    @property
    def ttft(self) -> float:
        return self.chunk_times[0] - self.start if self.chunk_times else 0.0

    @property
    def latency(self) -> float:
        return self.chunk_times[-1] - self.start if self.chunk_times else 0.0

    @property
    def itl(self) -> list[float]:
        t = self.chunk_times
        return [t[i] - t[i - 1] for i in range(1, len(t))]

    @property
    def num_chunks(self) -> int:
        return len(self.chunk_times)
