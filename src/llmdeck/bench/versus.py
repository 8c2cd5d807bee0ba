"""``llmdeck bench --compare URL_A URL_B``: one workload, two servers, alternating rounds, one result.

Seed 000's headline is a side-by-side: the same model, the same box, Ollama's TTFT 2-4 s with a long
agent system prompt against vLLM's 0.12 s with prefix caching. Measured one after the other, a
server that warms up or a box that heats up moves one side only; so the rounds alternate in ABBA
order (A1 B1, B2 A2, A3 B3, ...), each round with prompts of its own (both sides get the same
ones), and each metric is the median over the rounds. Any OpenAI URL counts (Ollama's /v1 port
too); when a side answers Ollama's ``/api/ps``, the memory its loaded models hold is sampled after
each of its runs. The sides' results are ordinary bench results (``report`` reads them); the ratio
is B / A.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_serializer

from llmdeck import __version__
from llmdeck.bench.load import ServerGone
from llmdeck.bench.result_schema import (
    BenchResult,
    HostFacts,
    RunStatus,
    ScenarioMetrics,
    ScenarioResult,
    ScenarioSpec,
    TargetInfo,
)
from llmdeck.bench.runner import BenchOptions, Progress, ResultWriter, new_result, probe_target
from llmdeck.bench.turns import ttft_by_turn

VERSUS_SCHEMA_VERSION = 1
VERSUS_KIND = "llmdeck.bench.versus"
MIN_ROUNDS = 2


class OllamaSample(BaseModel):
    """Ollama's ``/api/ps`` after one run: what its loaded models hold."""

    after: str = Field(description="The run it followed, e.g. B2.")
    models: list[str] = Field(default_factory=list)
    bytes: int = 0
    vram_bytes: int = 0


class VersusSide(BaseModel):
    label: Literal["A", "B"]
    url: str
    engine: str | None = Field(None, description="vllm / llamacpp / ollama, as far as the server shows.")
    result: BenchResult
    ollama: list[OllamaSample] = Field(default_factory=list, description="Only when the side is an Ollama.")

    @field_serializer("url")
    def _url_out(self, url: str) -> str:
        """A URL's password never reaches a result file (as BenchRequest.target)."""
        from llmdeck.util.redact import redact_url

        return redact_url(url)


class VersusRow(BaseModel):
    metric: str
    unit: str
    a: float | None = Field(None, description="Median over A's rounds.")
    b: float | None = None
    ratio: float | None = Field(None, description="b / a.")
    a_runs: list[float | None] = Field(default_factory=list)
    b_runs: list[float | None] = Field(default_factory=list)


class VersusResult(BaseModel):
    schema_version: int = VERSUS_SCHEMA_VERSION
    kind: str = VERSUS_KIND
    llmdeck_version: str = __version__
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    status: RunStatus = "running"
    error: str | None = None
    host: HostFacts
    request: dict[str, Any] | None = None
    workload: ScenarioSpec = Field(description="The scenario both sides ran (round 1's).")
    rounds: int
    order: list[str] = Field(default_factory=list, description="The runs in the order they ran.")
    a: VersusSide
    b: VersusSide
    rows: list[VersusRow] = Field(default_factory=list)


def _m(fn: Callable[[ScenarioMetrics], float | None]) -> Callable[[ScenarioResult], float | None]:
    return lambda sr: fn(sr.metrics) if sr.metrics is not None else None


METRICS: list[tuple[str, str, Callable[[ScenarioResult], float | None]]] = [
    ("mean TTFT", "ms", _m(lambda m: m.ttft_ms.mean if m.ttft_ms else None)),
    ("median TTFT", "ms", _m(lambda m: m.ttft_ms.median if m.ttft_ms else None)),
    ("p99 TTFT", "ms", _m(lambda m: m.ttft_ms.p(99) if m.ttft_ms else None)),
    ("mean TPOT", "ms", _m(lambda m: m.tpot_ms.mean if m.tpot_ms else None)),
    ("output throughput", "tok/s", _m(lambda m: m.output_throughput)),
    ("completed", "requests", _m(lambda m: float(m.completed))),
    ("failed", "requests", _m(lambda m: float(m.failed))),
    (
        "prefix-cache hit rate",
        "%",
        lambda sr: sr.server_metrics.prefix_cache_hit_rate_pct if sr.server_metrics else None,
    ),
]


def _turn_ttft(last: bool) -> Callable[[ScenarioResult], float | None]:
    """Median TTFT (ms) of the sessions' first turn, or of their last (bench/turns.py)."""

    def get(sr: ScenarioResult) -> float | None:
        by_turn = ttft_by_turn(sr)
        return (by_turn[max(by_turn)] if last else by_turn.get(0)) if by_turn else None

    return get


# Shown only for multi-turn workloads (in `bench --compare` tables after the median TTFT).
TURN_METRICS: list[tuple[str, str, Callable[[ScenarioResult], float | None]]] = [
    ("median TTFT, first turn", "ms", _turn_ttft(last=False)),
    ("median TTFT, last turn", "ms", _turn_ttft(last=True)),
]


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def compute_rows(a: BenchResult, b: BenchResult) -> list[VersusRow]:
    rows = []
    multi_turn = any(ttft_by_turn(sr) for sr in [*a.scenarios, *b.scenarios])
    metrics = [*METRICS[:3], *TURN_METRICS, *METRICS[3:]] if multi_turn else METRICS
    for name, unit, get in metrics:
        a_runs = [get(sr) for sr in a.scenarios]
        b_runs = [get(sr) for sr in b.scenarios]
        ma, mb = _median(a_runs), _median(b_runs)
        ratio = mb / ma if ma and mb is not None else None
        rows.append(VersusRow(metric=name, unit=unit, a=ma, b=mb, ratio=ratio, a_runs=a_runs, b_runs=b_runs))
    return rows


def abba_order(rounds: int) -> list[tuple[int, Literal["A", "B"]]]:
    """(round index, side): A1 B1, B2 A2, A3 B3, ..."""
    out: list[tuple[int, Literal["A", "B"]]] = []
    for r in range(rounds):
        out += [(r, "A"), (r, "B")] if r % 2 == 0 else [(r, "B"), (r, "A")]
    return out


class _Writer(ResultWriter):
    """Writes the whole comparison whenever a side's runner would write its own result."""

    def __init__(self, path: Path | None, side: BenchResult, whole: VersusResult) -> None:
        super().__init__(None, side)
        self.out, self.whole = path, whole

    def write(self) -> None:
        from llmdeck.util.atomic import atomic_write_json

        if self.out is not None:
            atomic_write_json(self.out, self.whole)

    def maybe_write(self) -> None:
        pass  # a request finishing does not rewrite the file; each finished run does


def ollama_sample(url: str, after: str) -> OllamaSample | None:
    """``/api/ps`` of ``url`` when it is an Ollama (None when it does not answer it)."""
    from llmdeck.runtime.tenants import ollama_ps

    status = ollama_ps(url)
    if not status.reachable:
        return None
    return OllamaSample(
        after=after,
        models=[m.name for m in status.models],
        bytes=status.total_bytes,
        vram_bytes=sum(m.size_vram for m in status.models),
    )


def _engine(side: VersusSide) -> str | None:
    if side.ollama:
        return "ollama"
    for sr in side.result.scenarios:
        if sr.server_metrics and sr.server_metrics.engine:
            return sr.server_metrics.engine
    return None


def new_versus(
    targets: tuple[TargetInfo, TargetInfo], specs: list[ScenarioSpec], options: BenchOptions
) -> VersusResult:
    a, b = (new_result(t, specs, options, None) for t in targets)
    return VersusResult(
        host=a.host,
        request=options.request,
        workload=specs[0],
        rounds=len(specs),
        a=VersusSide(label="A", url=targets[0].base_url, result=a),
        b=VersusSide(label="B", url=targets[1].base_url, result=b),
    )


async def run_versus(
    targets: tuple[TargetInfo, TargetInfo],
    specs: list[ScenarioSpec],
    options: BenchOptions,
    *,
    tokenizer: Any | None = None,
    progress: Progress | None = None,
) -> VersusResult:
    """Both sides, every round (``specs``: one per round), ABBA; writes ``options.out_path``."""
    from llmdeck.client.openai import OpenAIClient

    whole = new_versus(targets, specs, options)
    sides = {"A": whole.a, "B": whole.b}
    write = False  # as run_bench_async: no file before both probes pass (an earlier one at --out stays)
    try:
        async with (
            OpenAIClient(targets[0].base_url, api_key=options.api_key, timeouts=options.timeouts) as ca,
            OpenAIClient(targets[1].base_url, api_key=options.api_key, timeouts=options.timeouts) as cb,
        ):
            clients = {"A": ca, "B": cb}
            for label, side in sides.items():
                await probe_target(clients[label], side.result.target)
            tokenizer = await _tokenizer(whole, tokenizer, progress)
            write = True
            for r, label in abba_order(len(specs)):
                await _one_run(whole, sides[label], clients[label], r, tokenizer, options, progress)
        whole.status = "complete"
    except ServerGone as exc:
        whole.status, whole.error = "aborted", f"The comparison stopped: {exc}."
    except (asyncio.CancelledError, KeyboardInterrupt):
        whole.status, whole.error = "interrupted", "The comparison was interrupted."
        write = write or options.out_path is None or not options.out_path.exists()
        raise
    finally:
        whole.finished_at = datetime.now(UTC)
        for side in sides.values():
            side.engine = _engine(side)
            side.result.finished_at = whole.finished_at
            side.result.status = "complete" if whole.status == "complete" else "interrupted"
        whole.rows = compute_rows(whole.a.result, whole.b.result)
        if write:
            _Writer(options.out_path, whole.a.result, whole).write()
    return whole


async def _tokenizer(whole: VersusResult, tokenizer: Any | None, progress: Progress | None) -> Any | None:
    """One tokenizer for both sides (the same prompts): --tokenizer, else A's model folder, else B's."""
    from llmdeck.bench.workloads import load_tokenizer

    if tokenizer is not None:
        return tokenizer
    path = whole.a.result.target.tokenizer or whole.b.result.target.tokenizer
    if path is None:
        return None
    whole.a.result.target.tokenizer = whole.b.result.target.tokenizer = path
    if progress:
        progress.message(f"loading tokenizer from {path}")
    return await asyncio.to_thread(load_tokenizer, path)


async def _one_run(
    whole: VersusResult,
    side: VersusSide,
    client: Any,
    r: int,
    tokenizer: Any | None,
    options: BenchOptions,
    progress: Progress | None,
) -> None:
    from llmdeck.bench.runner import _run_scenario

    sr = side.result.scenarios[r]
    run_name = f"{side.label}{r + 1}"
    whole.order.append(run_name)
    if progress:
        progress.message(f"run {run_name} ({side.url})")
        progress.scenario_start(len(whole.order) - 1, 2 * whole.rounds, sr.spec)
    writer = _Writer(options.out_path, side.result, whole)
    await _run_scenario(client, side.result.target, sr, options, tokenizer, writer, progress)
    sample = await asyncio.to_thread(ollama_sample, side.url, run_name)
    if sample is not None:
        side.ollama.append(sample)
    if progress:
        progress.scenario_end(sr)
    whole.rows = compute_rows(whole.a.result, whole.b.result)
    writer.write()
