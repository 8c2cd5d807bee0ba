"""The model manager's lifecycle with its blocking steps faked (no engine): queue, one start at a time,
eviction order, drains, TTL, failures, Ollama. ``FakeLifecycle`` stands in for ``gateway.lifecycle``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar

import pytest

from http_fakes import JsonHandler
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import ServerStartError, StartStopped
from llmdeck.gateway import footprint, lifecycle, manager, model_state, room
from llmdeck.gateway.budget import GIB
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.manager import ModelManager
from llmdeck.runtime.state import ServerRecord, StartedBy
from llmdeck.settings import Settings


class FakeLifecycle:
    """Records starts and stops; a start takes ``start_s``; names in ``fail`` fail like a bad flag."""

    def __init__(self, mp: pytest.MonkeyPatch, *, start_s: float = 0.05) -> None:
        self.start_s = start_s
        self.fail: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.up: set[str] = set()
        self.max_up = 0
        self.starting = 0
        self.max_starting = 0
        self.free: int | None = None
        self.ollama: list[tuple[str, int]] = []
        self.measured: int | None = None
        self._lock = threading.Lock()
        for name in ("start", "stop", "settle_memory", "free_now", "ollama_models", "unload_ollama"):
            mp.setattr(lifecycle, name, getattr(self, name))
        mp.setattr(lifecycle, "alive_record", lambda name, settings: None)
        mp.setattr(lifecycle, "still_running", lambda record: record.name in self.up)
        mp.setattr(footprint, "measure", lambda pid, kind, gpu_index=0: self.measured)

    def start(
        self, backend: Any, settings: Any, on_progress: Any = None, stop_when: Any = None
    ) -> ServerRecord:
        """As the runtime service: ``stop_when`` is asked at every readiness poll (here every 10 ms)."""
        with self._lock:
            self.calls.append(("start", backend.name))
            self.starting += 1
            self.max_starting = max(self.max_starting, self.starting)
        try:
            end = time.monotonic() + self.start_s
            while time.monotonic() < end:
                if stop_when is not None and stop_when():
                    self.calls.append(("engine stopped", backend.name))
                    raise StartStopped(f"The start of {backend.name!r} was stopped on request.")
                time.sleep(min(0.01, self.start_s))
        finally:
            with self._lock:
                self.starting -= 1
        if backend.name in self.fail:
            raise ServerStartError(
                f"Server {backend.name!r} exited before it was ready; no known cause matched its log.",
                hint="Read the log tail below.",
                log_tail="api_server.py: error: unrecognized arguments: --no-such-flag",
            )
        with self._lock:
            self.up.add(backend.name)
            self.max_up = max(self.max_up, len(self.up))
        return ServerRecord(name=backend.name, spec=backend.spec, argv=[], log_path=Path("/dev/null"))

    def stop(self, name: str, settings: Any) -> str:
        with self._lock:
            self.calls.append(("stop", name))
            self.up.discard(name)
        return "stopped"

    def settle_memory(self, kind: str) -> None:
        return None

    def free_now(self, kind: str, gpu_index: int) -> int | None:
        return self.free

    def ollama_models(self, kind: str) -> list[tuple[str, int]]:
        return list(self.ollama)

    def unload_ollama(self, model: str) -> None:
        self.calls.append(("unload", model))
        if self.free is not None:  # MemAvailable gets Ollama's memory back
            self.free += sum(size for name, size in self.ollama if name == model)
        self.ollama = [o for o in self.ollama if o[0] != model]


def _manager(tmp_path: Path, backends: dict[str, str], budget: str = "{memory_gib: 5}") -> ModelManager:
    """Routes named like their specs; every spec is the CPU engine (planned 3.2 GiB: no weights on disk).
    Minimum residency is off unless a backend sets it (its own tests below)."""
    loaded, settings = _loaded(tmp_path, backends, budget)
    return ModelManager(loaded, settings)


def _loaded(tmp_path: Path, backends: dict[str, str], budget: str) -> tuple[Any, Settings]:
    lines = ["routes:"]
    for i, (name, extra) in enumerate(backends.items()):
        extra = extra if "min_resident_s" in extra else f"{extra}, min_resident_s: 0"
        spec = LaunchSpec(name=name, engine="cpu", model=str(tmp_path / "m"), port=9100 + i)
        (tmp_path / f"{name}.json").write_text(spec.model_dump_json(), encoding="utf-8")
        lines.append(f"  - {{model: {name}, backends: [{{spec: {name}.json{extra}}}]}}")
    lines.append(f"budget: {budget}")
    settings = Settings(state_dir=tmp_path / "st")
    loaded = parse_config("\n".join(lines) + "\n", source=tmp_path / "gw.yaml", settings=settings)
    return loaded, settings


def run(factory: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(factory(), timeout=30))


def _model(mgr: ModelManager, name: str) -> Any:
    return next(m for m in mgr.models.values() if m.name == name)


def test_alternating_models_are_never_up_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLifecycle(monkeypatch)
    mgr = _manager(tmp_path, {"a": "", "b": ""})

    async def go() -> None:
        for name in ("a", "b", "a"):
            m = _model(mgr, name)
            assert await mgr.acquire(m) is None
            mgr.release(m)

    run(go)
    assert fake.calls == [("start", "a"), ("stop", "a"), ("start", "b"), ("stop", "b"), ("start", "a")]
    assert fake.max_up == 1
    assert _model(mgr, "b").evictions == 1 and _model(mgr, "a").starts == 2


def test_requests_during_a_start_share_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLifecycle(monkeypatch, start_s=0.3)
    mgr = _manager(tmp_path, {"a": ""})

    async def go() -> None:
        m = _model(mgr, "a")
        waits = [asyncio.create_task(mgr.acquire(m)) for _ in range(3)]
        await asyncio.sleep(0.1)
        assert m.state == "starting" and m.waiting == 3 and mgr.status()["models"][0]["queue"] == 3
        # before the engine's first event (plan and preflight can take seconds) status says so
        assert "preparing the start" in mgr.status()["models"][0]["progress"]
        assert await asyncio.gather(*waits) == [None, None, None]
        assert m.inflight == 3

    run(go)
    assert fake.calls == [("start", "a")]


def test_a_client_that_hangs_up_while_its_model_starts_leaves_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients that timed out had kept their places (429 queue_full for the next real one) and were
    sent to the model once it was ready; now they leave the queue, answered 499 in the log."""
    from llmdeck.gateway.metrics import GatewayMetrics
    from llmdeck.gateway.ondemand import acquire_route
    from llmdeck.gateway.proxy import RequestCtx
    from llmdeck.gateway.routing import Router

    FakeLifecycle(monkeypatch, start_s=0.6)
    loaded, settings = _loaded(tmp_path, {"a": ""}, "{memory_gib: 5, queue: {max_waiting: 2}}")
    mgr, router = ModelManager(loaded, settings), Router(loaded)

    async def go() -> None:
        m = _model(mgr, "a")
        hang_up = asyncio.Event()
        ctxs = [RequestCtx(GatewayMetrics(), "POST", "/v1/chat/completions") for _ in range(2)]
        waits = [
            asyncio.create_task(acquire_route(mgr, router, router.routes["a"], ctx, gone=hang_up.wait))
            for ctx in ctxs
        ]
        await asyncio.sleep(0.1)
        assert m.waiting == 2
        hang_up.set()
        answers = await asyncio.gather(*waits)
        assert [a.status_code for a in answers] == [499, 499] and m.waiting == 0  # type: ignore[union-attr]
        assert await mgr.acquire(m) is None and m.inflight == 1  # the start went on; the next one is served

    run(go)


def test_a_refusal_a_retry_would_meet_again_tells_the_sdks_not_to_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The openai and anthropic SDKs retry a 503 twice: a model that cannot fit, or whose start just
    failed, had been asked three times (1.8 s, or 20 s of Retry-After) for the same answer
    (evidence/gateway/results/sdk_sweep.txt). Those now say ``x-should-retry: false``; a model that is
    still loading or a full queue keep their Retry-After and may be retried."""
    from llmdeck.gateway.metrics import GatewayMetrics
    from llmdeck.gateway.ondemand import acquire_route
    from llmdeck.gateway.proxy import RequestCtx
    from llmdeck.gateway.routing import Router

    fake = FakeLifecycle(monkeypatch, start_s=0.6)
    fake.fail.add("broken")
    backends = {"huge": ", memory_gib: 900", "broken": ", memory_gib: 1", "slow": ", memory_gib: 1"}
    budget = "{memory_gib: 5, queue: {failed_retry_s: 60, wait_s: 0.2, max_waiting: 1}}"
    loaded, settings = _loaded(tmp_path, backends, budget)
    mgr, router = ModelManager(loaded, settings), Router(loaded)

    async def answer(alias: str) -> tuple[int, str | None, str | None]:
        ctx = RequestCtx(GatewayMetrics(), "POST", "/v1/chat/completions")
        r = await acquire_route(mgr, router, router.routes[alias], ctx)
        assert not isinstance(r, type(router.routes[alias]))
        return r.status_code, r.headers.get("retry-after"), r.headers.get("x-should-retry")

    async def go() -> None:
        assert await answer("huge") == (503, None, "false")  # insufficient_memory
        assert await answer("broken") == (503, "10", None)  # model_not_ready: it is still loading
        await asyncio.sleep(0.6)  # its start failed meanwhile
        assert await answer("broken") == (503, "10", "false")  # model_start_failed, within failed_retry_s
        slow = asyncio.create_task(answer("slow"))
        await asyncio.sleep(0.05)
        assert await answer("slow") == (429, "5", None)  # queue_full: a retry in 5 s may get in
        assert await slow == (503, "10", None)  # model_not_ready

    run(go)


def test_one_start_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLifecycle(monkeypatch, start_s=0.2)
    mgr = _manager(tmp_path, {"a": "", "b": ""}, budget="{memory_gib: 10}")

    async def go() -> None:
        results = await asyncio.gather(mgr.acquire(_model(mgr, "a")), mgr.acquire(_model(mgr, "b")))
        assert results == [None, None]

    run(go)
    assert fake.max_starting == 1 and fake.up == {"a", "b"}  # both fit in 10 GiB: nothing evicted


def test_a_full_queue_is_429_and_a_long_start_503(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FakeLifecycle(monkeypatch, start_s=0.6)
    mgr = _manager(tmp_path, {"a": ""}, budget="{memory_gib: 5, queue: {max_waiting: 1, wait_s: 0.3}}")

    async def go() -> None:
        m = _model(mgr, "a")
        first = asyncio.create_task(mgr.acquire(m))
        await asyncio.sleep(0.05)
        full = await mgr.acquire(m)
        assert full is not None and full.status == 429 and full.code == "queue_full"
        timed_out = await first
        assert timed_out is not None and timed_out.status == 503 and timed_out.code == "model_not_ready"
        await asyncio.sleep(0.7)  # the start itself went on: the next request is served at once
        assert m.state == "running" and await mgr.acquire(m) is None

    run(go)


def test_a_failed_start_fails_its_waiters_and_spares_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLifecycle(monkeypatch)
    fake.fail.add("broken")
    mgr = _manager(tmp_path, {"a": "", "broken": ""}, budget="{memory_gib: 10, queue: {failed_retry_s: 60}}")

    async def go() -> None:
        assert await mgr.acquire(_model(mgr, "a")) is None
        broken = _model(mgr, "broken")
        refusals = await asyncio.gather(mgr.acquire(broken), mgr.acquire(broken))
        for r in refusals:
            assert r is not None and r.status == 503 and r.code == "model_start_failed"
            assert "unrecognized arguments: --no-such-flag" in r.message
        again = await mgr.acquire(broken)  # within failed_retry_s: the same answer, no new start
        assert again is not None and "no-such-flag" in again.message
        assert _model(mgr, "a").state == "running" and broken.state == "failed"

    run(go)
    assert fake.calls.count(("start", "broken")) == 1 and ("stop", "a") not in fake.calls


def test_keep_is_never_evicted_and_the_refusal_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLifecycle(monkeypatch)
    mgr = _manager(tmp_path, {"a": ", keep: true", "b": ""})

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        refusal = await mgr.acquire(_model(mgr, "b"))
        assert refusal is not None and refusal.code == "insufficient_memory"
        assert "a (3.20 GiB, keep: true) would have to go" in refusal.message

    with caplog.at_level(logging.INFO, logger="llmdeck.gateway.models"):
        run(go)
    assert ("stop", "a") not in fake.calls and "refused b" in caplog.text


def test_a_busy_victim_is_drained_before_it_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLifecycle(monkeypatch)
    mgr = _manager(tmp_path, {"a": "", "b": ""})

    async def go() -> None:
        a, b = _model(mgr, "a"), _model(mgr, "b")
        assert await mgr.acquire(a) is None  # one request in flight on a
        wait_b = asyncio.create_task(mgr.acquire(b))
        await asyncio.sleep(0.3)
        assert a.state == "stopping" and ("stop", "a") not in fake.calls  # no new requests; not killed
        mgr.release(a)
        assert await wait_b is None

    run(go)
    assert fake.calls[-2:] == [("stop", "a"), ("start", "b")]


def test_idle_past_ttl_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLifecycle(monkeypatch)
    monkeypatch.setattr(manager, "TICK_S", 0.05)
    mgr = _manager(tmp_path, {"a": ", ttl_s: 0.3", "b": ""}, budget="{memory_gib: 10}")

    async def go() -> None:
        await mgr.startup()
        a, b = _model(mgr, "a"), _model(mgr, "b")
        assert await mgr.acquire(a) is None and await mgr.acquire(b) is None
        mgr.release(a)
        mgr.release(b)
        await asyncio.sleep(0.8)
        assert a.state == "stopped" and b.state == "running"  # b has no ttl
        await mgr.shutdown()
        assert b.state == "stopped"

    with caplog.at_level(logging.INFO, logger="llmdeck.gateway.models"):
        run(go)
    assert "past its ttl_s 0.3" in caplog.text and ("stop", "b") in fake.calls


def test_ollama_counts_and_is_unloaded_only_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLifecycle(monkeypatch)
    fake.free, fake.ollama = 2 * GIB, [("llama3:8b", 4 * GIB)]  # MemAvailable 2 GiB; Ollama holds 4
    strict = _manager(tmp_path, {"a": ""}, budget="{memory_gib: auto, reserve_gib: 0}")

    async def refused() -> None:
        r = await strict.acquire(_model(strict, "a"))
        assert (
            r is not None and "ollama:llama3:8b (4.00 GiB" in r.message and "allow_unload_ollama" in r.message
        )

    run(refused)
    allowed = _manager(
        tmp_path, {"a": ""}, budget="{memory_gib: auto, reserve_gib: 0, allow_unload_ollama: true}"
    )

    async def unloaded() -> None:
        assert await allowed.acquire(_model(allowed, "a")) is None

    run(unloaded)
    assert fake.calls == [("unload", "llama3:8b"), ("start", "a")]


def test_the_measured_footprint_replaces_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeLifecycle(monkeypatch)
    fake.measured = 2 * GIB
    mgr = _manager(tmp_path, {"a": "", "b": ""})

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        assert a.estimate() == 2 * GIB and mgr.status()["models"][0]["measured_gib"] == 2.0
        assert mgr.status()["models"][0]["planned_gib"] == 3.2
        # a measured 2 GiB + b planned 3.2 GiB fit in 5.5 GiB, which the plan alone (6.4) did not
        mgr.budget = mgr.budget.model_copy(update={"memory_gib": 5.5})
        assert await mgr.acquire(_model(mgr, "b")) is None

    run(go)
    assert ("stop", "a") not in fake.calls


# ---- sleep mode (opt-in; GPU engines) ---------------------------------------------------------


def _sleepy(
    tmp_path: Path, mp: pytest.MonkeyPatch, *, port: int = 9200, real_wake: bool = False
) -> tuple[FakeLifecycle, ModelManager]:
    fake = FakeLifecycle(mp)
    mp.setattr(lifecycle, "sleep", lambda url, level: fake.calls.append(("sleep", f"{url} {level}")))
    if not real_wake:  # else the real wake and post-wake probe speak to a FAKE engine on `port`
        mp.setattr(lifecycle, "wake", lambda url, level: fake.calls.append(("wake", f"{url} {level}")))
        mp.setattr(lifecycle, "probe", lambda url, model, key=None: 0.01)
    spec = LaunchSpec(name="gpu", engine="venv", model=str(tmp_path / "m"), port=port)
    (tmp_path / "gpu.json").write_text(spec.model_dump_json(), encoding="utf-8")
    mgr = _manager(tmp_path, {"b": ""})
    text = (
        "routes:\n  - {model: gpu, backends: [{spec: gpu.json, sleep_level: 1, memory_gib: 3, "
        "min_resident_s: 0}]}\n"
        "  - {model: b, backends: [{spec: b.json}]}\nbudget: {memory_gib: 5}\n"
    )
    loaded = parse_config(text, source=tmp_path / "gw.yaml", settings=mgr.settings)
    return fake, ModelManager(loaded, mgr.settings)


def test_sleep_is_opt_in_and_adds_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, mgr = _sleepy(tmp_path, monkeypatch)
    spec = _model(mgr, "gpu").backend.spec
    assert "--enable-sleep-mode" in spec.vllm_args and spec.env["VLLM_SERVER_DEV_MODE"] == "1"
    assert _model(mgr, "b").backend.sleep_level is None  # stop/start unless the config asks


def test_an_evicted_sleeper_sleeps_then_wakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake, mgr = _sleepy(tmp_path, monkeypatch)

    async def go() -> None:
        gpu, b = _model(mgr, "gpu"), _model(mgr, "b")
        assert await mgr.acquire(gpu) is None
        mgr.release(gpu)
        fake.measured = GIB // 2  # asleep it holds 0.5 GiB; b, once up, as well
        assert await mgr.acquire(b) is None
        assert gpu.state == "sleeping" and gpu.held("unified") == GIB // 2
        assert mgr.status()["models"][0]["state"] == "sleeping"
        assert await mgr.acquire(gpu) is None  # 2.5 GiB more fits beside b: a wake, no eviction
        assert gpu.state == "running" and gpu.wakes == 1

    run(go)
    assert [c[0] for c in fake.calls] == ["start", "sleep", "start", "wake"]


def test_a_sleep_that_frees_too_little_is_followed_by_a_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, mgr = _sleepy(tmp_path, monkeypatch)

    async def go() -> None:
        gpu = _model(mgr, "gpu")
        assert await mgr.acquire(gpu) is None
        mgr.release(gpu)
        fake.measured = 3 * GIB  # the sleep freed nothing (on unified memory level 1 keeps the weights)
        assert await mgr.acquire(_model(mgr, "b")) is None
        assert gpu.state == "stopped"

    run(go)
    assert [c[0] for c in fake.calls] == ["start", "sleep", "stop", "start"]


def test_a_sleep_measured_to_free_nothing_on_unified_memory_is_refused_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, mgr = _sleepy(tmp_path, monkeypatch)
    assert mgr.budget.kind == "unified"  # no NVML here: the CPU box is the unified case

    async def go() -> None:
        gpu, b = _model(mgr, "gpu"), _model(mgr, "b")
        fake.measured = 3 * GIB  # awake and asleep alike: level 1 kept everything in the pool
        for _ in range(2):
            assert await mgr.acquire(gpu) is None
            mgr.release(gpu)
            assert await mgr.acquire(b) is None
            mgr.release(b)
        assert gpu.sleep_freed == {1: 0} and "refused" in gpu.sleep_refused(1, "unified")
        assert mgr.status()["models"][0]["sleep_freed_gib"] == {"1": 0.0}

    run(go)
    assert [c[0] for c in fake.calls].count("sleep") == 1  # the second eviction stopped it outright


class fake_wake_engine(JsonHandler):
    """A FAKE vLLM for the wake path: /wake_up answers ok; /v1/completions answers as ``reply`` says
    (a real completion, or one with no choices: the corrupted-after-wake case of vllm PR #45650)."""

    reply: ClassVar[dict[str, Any]] = {}
    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.seen.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self._json(200, self.reply if self.path == "/v1/completions" else {"status": "ok"})


GOOD_COMPLETION = {
    "choices": [{"index": 0, "text": " world", "finish_reason": "length"}],
    "usage": {"completion_tokens": 4},
}


@pytest.mark.parametrize("good", [True, False])
def test_after_a_wake_a_real_generation_decides_and_a_bad_answer_means_a_cold_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good: bool
) -> None:
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), fake_wake_engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake_wake_engine.reply = GOOD_COMPLETION if good else {"choices": [], "usage": {"completion_tokens": 0}}
    fake_wake_engine.seen = []
    fake, mgr = _sleepy(tmp_path, monkeypatch, port=server.server_address[1], real_wake=True)

    async def go() -> None:
        gpu, b = _model(mgr, "gpu"), _model(mgr, "b")
        assert await mgr.acquire(gpu) is None
        mgr.release(gpu)
        fake.measured = GIB // 2
        assert await mgr.acquire(b) is None
        mgr.release(b)
        assert gpu.state == "sleeping"
        assert await mgr.acquire(gpu) is None  # woken (or cold-started) and only then granted
        assert gpu.state == "running"

    try:
        run(go)
    finally:
        server.shutdown()
    gpu = _model(mgr, "gpu")
    assert fake_wake_engine.seen == ["/wake_up", "/v1/completions"]  # the probe went before any traffic
    snap = mgr.status()["models"][0]
    if good:
        assert gpu.wakes == 1 and gpu.wake_fallbacks == 0 and "probe answered" in snap["last_wake"]
        assert [c[0] for c in fake.calls] == ["start", "sleep", "start"]
    else:
        assert gpu.wakes == 0 and snap["wake_fallbacks"] == 1
        assert "no choices" in snap["last_wake"] and "cold-started" in snap["last_wake"]
        assert [c for c in fake.calls if c[1] == "gpu"] == [
            ("start", "gpu"),
            ("stop", "gpu"),
            ("start", "gpu"),
        ]


class fake_sleep_server(JsonHandler):
    """vLLM's dev endpoints as they answer (entrypoints/serve/dev/sleep/api_router.py); records paths."""

    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.seen.append(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/collective_rpc"):
            self.seen.append(body.decode())
        self._json(200, {"status": "ok"})


def test_sleep_and_wake_speak_vllms_dev_endpoints() -> None:
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), fake_sleep_server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        lifecycle.sleep(url, 2)
        lifecycle.wake(url, 2)
        lifecycle.wake(url, 1)
    finally:
        server.shutdown()
    assert fake_sleep_server.seen == [
        "/sleep?level=2",
        "/wake_up",
        "/collective_rpc",
        '{"method":"reload_weights"}',
        "/reset_prefix_cache",
        "/wake_up",
    ]


def test_a_model_that_dies_on_its_own_is_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLifecycle(monkeypatch)
    monkeypatch.setattr(manager, "TICK_S", 0.05)
    monkeypatch.setattr(manager, "MEASURE_EVERY_S", 0.05)
    mgr = _manager(tmp_path, {"a": ""})

    async def go() -> None:
        await mgr.startup()
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        fake.up.discard("a")  # the engine was killed (e.g. by the OOM killer)
        await asyncio.sleep(0.4)
        assert a.state == "stopped"
        assert await mgr.acquire(a) is None and a.starts == 2
        await mgr.shutdown()

    with caplog.at_level(logging.INFO, logger="llmdeck.gateway.models"):
        run(go)
    assert "exited on its own" in caplog.text


def test_an_eviction_that_fails_is_a_clear_503(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.errors import EndpointError

    fake = FakeLifecycle(monkeypatch)
    fake.free, fake.ollama = 1 * GIB, [("qwen:32b", 20 * GIB)]

    def fake_unload_refused(model: str) -> None:
        raise EndpointError(f"Ollama at http://127.0.0.1:11434 did not unload {model!r} (ConnectError).")

    monkeypatch.setattr(lifecycle, "unload_ollama", fake_unload_refused)
    mgr = _manager(
        tmp_path, {"a": ""}, budget="{memory_gib: auto, reserve_gib: 0, allow_unload_ollama: true}"
    )

    async def go() -> None:
        r = await mgr.acquire(_model(mgr, "a"))
        assert r is not None and r.status == 503 and r.code == "eviction_failed"
        assert "did not unload 'qwen:32b'" in r.message

    run(go)
    assert ("start", "a") not in fake.calls


def test_prometheus_shows_the_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.gateway.metrics import GatewayMetrics
    from llmdeck.gateway.model_metrics import ModelCollector

    FakeLifecycle(monkeypatch)
    mgr = _manager(tmp_path, {"a": "", "b": ""})
    metrics = GatewayMetrics()
    metrics.registry.register(ModelCollector(mgr))

    async def go() -> None:
        assert await mgr.acquire(_model(mgr, "a")) is None

    run(go)
    text = metrics.render().decode()
    assert 'llmdeck_gateway_model_state{model="a",state="running"} 1.0' in text
    assert 'llmdeck_gateway_model_state{model="b",state="stopped"} 1.0' in text
    assert 'llmdeck_gateway_model_starts_total{model="a"} 1.0' in text
    assert 'llmdeck_gateway_model_memory_bytes{kind="planned",model="a"}' in text


def test_contended_models_serve_their_waiters_before_they_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests for a and b at once, a budget for one: each start lets in the requests that waited
    for it before the next start may evict it (no ping-pong that serves nobody)."""
    fake = FakeLifecycle(monkeypatch, start_s=0.1)
    mgr = _manager(tmp_path, {"a": "", "b": ""}, budget="{memory_gib: 5, queue: {wait_s: 10}}")

    async def request(name: str) -> Any:
        m = _model(mgr, name)
        refusal = await mgr.acquire(m)
        if refusal is None:
            await asyncio.sleep(0.05)  # the request being served
            mgr.release(m)
        return refusal

    async def go() -> None:
        results = await asyncio.gather(*(request(n) for n in "abababab"))
        assert results == [None] * 8

    run(go)
    starts = [c for c in fake.calls if c[0] == "start"]
    assert fake.max_up == 1 and len(starts) <= 3, fake.calls


# ---- minimum residency (against thrash) -------------------------------------------------------


def test_a_resident_model_in_use_is_not_evicted_until_its_time_is_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeLifecycle(monkeypatch)
    monkeypatch.setattr(room, "RESIDENT_POLL_S", 0.05)
    mgr = _manager(tmp_path, {"a": ", min_resident_s: 0.8", "b": ", min_resident_s: 0.8"})

    async def go() -> None:
        a, b = _model(mgr, "a"), _model(mgr, "b")
        assert await mgr.acquire(a) is None  # a serves; demand for both goes on
        wait_b = asyncio.create_task(mgr.acquire(b))
        await asyncio.sleep(0.3)
        assert a.state == "running" and b.waiting == 1 and fake.calls == [("start", "a")]
        shown = next(m for m in mgr.status()["models"] if m["model"] == "b")
        assert "min_resident_s" in shown["progress"] and shown["queue"] == 1
        mgr.release(a)
        assert await mgr.acquire(a) is None  # a's traffic goes on: still served, no swap
        await asyncio.sleep(0.2)
        assert a.state == "running"
        await asyncio.sleep(0.5)  # the residency is over: a is drained, then evicted
        assert a.state == "stopping"
        mgr.release(a)
        assert await wait_b is None

    with caplog.at_level(logging.INFO, logger="llmdeck.gateway.models"):
        run(go)
    assert fake.calls == [("start", "a"), ("stop", "a"), ("start", "b")]
    assert "hold b: b waits: a (3.20 GiB" in caplog.text


def test_a_resident_model_gone_idle_is_evicted_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLifecycle(monkeypatch)
    monkeypatch.setattr(model_state, "IN_USE_S", 0.1)
    mgr = _manager(tmp_path, {"a": ", min_resident_s: 30", "b": ""})

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        await asyncio.sleep(0.2)  # no traffic for longer than IN_USE_S: the residency no longer holds
        assert a.resident_s() == 0.0
        assert await asyncio.wait_for(mgr.acquire(_model(mgr, "b")), 2) is None

    run(go)
    assert fake.calls == [("start", "a"), ("stop", "a"), ("start", "b")]


def test_requests_held_by_a_residency_time_out_and_the_resident_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLifecycle(monkeypatch)
    monkeypatch.setattr(room, "RESIDENT_POLL_S", 0.05)
    budget = "{memory_gib: 5, queue: {wait_s: 0.3}}"
    mgr = _manager(tmp_path, {"a": ", min_resident_s: 60", "b": ""}, budget=budget)

    async def go() -> None:
        a, b = _model(mgr, "a"), _model(mgr, "b")
        assert await mgr.acquire(a) is None
        refusal = await mgr.acquire(b)
        assert refusal is not None and refusal.status == 503 and refusal.code == "model_not_ready"
        await asyncio.sleep(0.2)  # nobody waits for b any more: its start is abandoned
        assert a.state == "running" and b.state == "stopped" and b.task is not None and b.task.done()
        assert "Dropped the start of 'b'" in (b.last_error or "") and "min_resident_s" in (b.last_error or "")

    run(go)
    assert fake.calls == [("start", "a")]


def test_min_resident_s_defaults_to_30_and_0_turns_it_off(tmp_path: Path) -> None:
    mgr = _manager(tmp_path, {"a": ", min_resident_s: 30", "b": ""})
    assert _model(mgr, "a").backend.min_resident_s == 30 and _model(mgr, "b").backend.min_resident_s == 0
    spec = LaunchSpec(name="c", engine="cpu", model=str(tmp_path / "m"), port=9300)
    (tmp_path / "c.json").write_text(spec.model_dump_json(), encoding="utf-8")
    text = "routes:\n  - {model: c, backends: [{spec: c.json}]}\n"
    loaded = parse_config(text, source=tmp_path / "gw.yaml", settings=mgr.settings)
    assert loaded.routes[0].backends[0].managed.min_resident_s == 30.0


def test_a_dashboard_start_waits_out_a_residency_and_its_failure_reaches_a_joining_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dashboard start (no request waiting) had been dropped as "nobody waits for it now" while another
    model was resident; a request joining a dashboard start that failed had got a 503 "not ready within
    30 s" instead of the start's diagnosis (the dashboard's task swallowed the failure)."""
    from llmdeck.gateway.ui_actions import begin

    fake = FakeLifecycle(monkeypatch)
    fake.fail.add("broken")
    monkeypatch.setattr(room, "RESIDENT_POLL_S", 0.05)
    mgr = _manager(tmp_path, {"a": ", min_resident_s: 0.4", "b": "", "broken": ""})

    async def go() -> None:
        a, b, broken = _model(mgr, "a"), _model(mgr, "b"), _model(mgr, "broken")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        begin(mgr, b, "start", set())
        assert b.task is not None
        await b.task  # held by a's residency, then started: a is evicted for it
        assert b.state == "running" and a.state == "stopped" and not b.asked
        begin(mgr, broken, "start", set())
        refusal = await mgr.acquire(broken)
        assert (
            refusal is not None and refusal.code == "model_start_failed" and "no-such-flag" in refusal.message
        )

    run(go)
    assert ("start", "b") in fake.calls


async def _a_starting_b_behind(
    mgr: ModelManager, a: Any, b: Any
) -> tuple[asyncio.Task[Any], asyncio.Task[Any]]:
    """A request for ``a`` that starts it, and one for ``b`` queued behind that start."""
    first = asyncio.create_task(mgr.acquire(a))
    while a.state != "starting":
        await asyncio.sleep(0.01)
    second = asyncio.create_task(mgr.acquire(b))
    await asyncio.sleep(0.05)
    return first, second


def test_a_start_stopped_from_the_dashboard_ends_at_once_and_lets_the_others_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that hangs had held the manager's one lock until its start_timeout_s (every other model
    waited behind it) and the dashboard could not end it. Its stop now ends the start at the next poll:
    the engine stopped, the waiting request told why, the model stopped (not failed: the next request
    starts it again) and the next model's start goes ahead."""
    from llmdeck.gateway.ui_actions import begin
    from llmdeck.gateway.ui_state import actions_for

    fake = FakeLifecycle(monkeypatch, start_s=20)
    mgr = _manager(tmp_path, {"a": "", "b": ""}, "{memory_gib: 10}")

    async def go() -> None:
        a, b = _model(mgr, "a"), _model(mgr, "b")
        waiter, behind = await _a_starting_b_behind(mgr, a, b)  # b waits for the lock a's start holds
        assert actions_for(a) == ["stop"]
        t0 = time.monotonic()
        begin(mgr, a, "stop", set())
        assert actions_for(a) == []  # asked: nothing more until it settles
        refusal = await waiter
        assert time.monotonic() - t0 < 2
        assert refusal is not None and refusal.code == "model_start_stopped", refusal
        assert "stopped from the dashboard" in refusal.message
        assert a.state == "stopped" and not a.stop_asked and actions_for(a) == ["start"]
        fake.start_s = 0.05
        assert await behind is None and b.state == "running"  # b's start was not held up
        mgr.release(b)
        assert await mgr.acquire(a) is None and a.state == "running"  # not failed: started again

    run(go)
    assert ("engine stopped", "a") in fake.calls
    assert any(
        e.kind == "stopped" and e.model == "a" and "dashboard" in e.reason for e in mgr.events.newest()
    )


def test_a_start_stopped_while_it_waits_its_turn_never_launches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.gateway.ui_actions import begin
    from llmdeck.gateway.ui_state import actions_for

    fake = FakeLifecycle(monkeypatch, start_s=0.5)
    mgr = _manager(tmp_path, {"a": "", "b": ""}, "{memory_gib: 10}")

    async def go() -> None:
        a, b = _model(mgr, "a"), _model(mgr, "b")
        first, second = await _a_starting_b_behind(mgr, a, b)
        assert b.state == "stopped" and b.bringing_up and actions_for(b) == ["stop"]
        begin(mgr, b, "stop", set())
        assert await first is None
        refusal = await second
        assert (
            refusal is not None
            and refusal.code == "model_start_stopped"
            and "before its launch" in refusal.message
        )
        assert b.state == "stopped"

    run(go)
    assert ("start", "b") not in fake.calls


def test_a_model_stopped_by_down_is_not_said_to_have_exited_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`llmdeck down a` in a shell while the gateway ran a: its log said "model a exited on its own"."""
    fake = FakeLifecycle(monkeypatch)
    monkeypatch.setattr(manager, "TICK_S", 0.05)
    monkeypatch.setattr(manager, "MEASURE_EVERY_S", 0.05)
    mgr = _manager(tmp_path, {"a": ""})
    log = tmp_path / "a.log"
    log.write_text("# llmdeck: 2026-01-01T00:00:00+00:00 starting: vllm serve\nINFO ready\n")

    async def go() -> None:
        await mgr.startup()
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        assert a.record is not None
        a.record.log_path = log
        with log.open("a") as fh:  # what `llmdeck down a` notes before it signals the engine
            fh.write("# llmdeck: 2026-01-01T00:01:00+00:00 stopping: `llmdeck down` (pid 7)\n")
        fake.up.discard("a")
        await asyncio.sleep(0.4)
        assert a.state == "stopped"
        await mgr.shutdown()

    with caplog.at_level(logging.INFO, logger="llmdeck.gateway.models"):
        run(go)
    assert "model a exited because `llmdeck down` (pid 7) stopped it" in caplog.text
    assert "on its own" not in caplog.text


def _restarted_record(
    mgr: ModelManager, name: str, pid: int, started_by: StartedBy = "gateway"
) -> ServerRecord:
    """What `llmdeck restart NAME` saves: a new start (another pid) of the same spec, ready, on disk."""
    from datetime import UTC, datetime

    from llmdeck.engines.process import identify
    from llmdeck.runtime.state import StateStore

    spec = _model(mgr, name).backend.spec
    record = ServerRecord(
        name=name, spec=spec, argv=["sleep", "60"], pid=pid, process=identify(pid),
        log_path=Path("/dev/null"), ready_at=datetime.now(UTC), started_by=started_by,
    )  # fmt: skip
    StateStore(mgr.settings.servers_dir).save(record)
    return record


def _real_engines_run(monkeypatch: pytest.MonkeyPatch, fake: FakeLifecycle) -> None:
    """A record with a pid (a restarted one's) runs while its process does; the fake's, while "up"."""
    from llmdeck.runtime.engine_state import is_alive

    alive = lambda r: is_alive(r) if r.pid is not None else r.name in fake.up  # noqa: E731
    monkeypatch.setattr(lifecycle, "still_running", alive)


def test_a_model_restarted_outside_the_gateway_is_adopted_not_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`llmdeck restart a` of a model the gateway ran: the manager saw its old engine gone and stopped
    "a" by name, i.e. the restarted server (now recorded as the gateway's), or lost track of it."""
    import subprocess

    real_alive = lifecycle.alive_record
    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(manager, "TICK_S", 0.05)
    monkeypatch.setattr(manager, "MEASURE_EVERY_S", 0.05)
    mgr = _manager(tmp_path, {"a": "", "b": ""})
    engines = [subprocess.Popen(["sleep", "60"]) for _ in range(2)]

    async def go() -> None:
        await mgr.startup()
        a, b = _model(mgr, "a"), _model(mgr, "b")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        _restarted_record(mgr, "a", engines[0].pid)
        fake.up.discard("a")  # the old engine stopped by the restart
        await asyncio.sleep(0.4)
        assert a.state == "running" and a.record is not None and a.record.pid == engines[0].pid
        assert ("stop", "a") not in fake.calls
        # the restart's new start came after the manager had found the old engine gone: adopted too
        monkeypatch.setattr(lifecycle, "alive_record", real_alive)
        _restarted_record(mgr, "b", engines[1].pid, started_by="up")  # a user's: the gateway's start adopts
        await asyncio.sleep(0.4)
        assert b.state == "stopped"
        assert await mgr.acquire(b) is None and b.record is not None and b.record.pid == engines[1].pid
        mgr.release(b)
        assert ("start", "b") not in fake.calls
        await mgr.shutdown()

    try:
        with caplog.at_level(logging.INFO, logger="llmdeck.gateway.models"):
            run(go)
    finally:
        for engine in engines:
            engine.kill()
            engine.wait()
    assert "adopted a: started again outside the gateway" in caplog.text
    assert ("stop", "a") in fake.calls  # `gateway down`: the restarted one is its own


def test_a_model_found_stopped_adopts_its_restarted_server_once_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restart's stop and its new start leave seconds with no record: the manager found the model
    gone meanwhile, and the restarted server (the gateway's) stayed unknown to it: `gateway down`
    left it running and the next request's start failed on "already running"."""
    import subprocess

    real_alive = lifecycle.alive_record
    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(manager, "TICK_S", 0.05)
    monkeypatch.setattr(manager, "MEASURE_EVERY_S", 0.05)
    mgr = _manager(tmp_path, {"a": ""})
    engine = subprocess.Popen(["sleep", "60"])

    async def go() -> None:
        await mgr.startup()
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        fake.up.discard("a")
        await asyncio.sleep(0.4)
        assert a.state == "stopped"
        monkeypatch.setattr(lifecycle, "alive_record", real_alive)
        _restarted_record(mgr, "a", engine.pid)
        await asyncio.sleep(0.4)
        assert a.state == "running" and a.record is not None and a.record.pid == engine.pid
        await mgr.shutdown()

    try:
        run(go)
    finally:
        engine.kill()
        engine.wait()
    assert fake.calls.count(("start", "a")) == 1 and fake.calls[-1] == ("stop", "a")
