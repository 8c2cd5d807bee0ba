"""A gateway model restarted outside the gateway (`llmdeck restart NAME`) while the manager still holds
its old start: its idle TTL must not stop the new server while it loads, and a sleeping model's new server
(awake) gets no wake call. The engines are FAKE (tests/unit/test_gateway_manager.py's FakeLifecycle);
the restarted server is a real process (`sleep 60`) with its record on disk, as `restart` saves it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from llmdeck.engines.process import identify
from llmdeck.gateway import lifecycle, manager
from llmdeck.gateway.manager import ModelManager
from llmdeck.runtime.state import ServerRecord, StateStore
from test_gateway_manager import FakeLifecycle, _manager, _model, _real_engines_run, _sleepy, run


def _restart(mgr: ModelManager, name: str, pid: int, *, ready: bool) -> ServerRecord:
    """What `llmdeck restart NAME` saves: a new start (another pid), loading (no ready_at) or ready."""
    record = ServerRecord(
        name=name, spec=_model(mgr, name).backend.spec, argv=["sleep", "60"], pid=pid, process=identify(pid),
        log_path=Path("/dev/null"), ready_at=datetime.now(UTC) if ready else None, started_by="gateway",
    )  # fmt: skip
    StateStore(mgr.settings.servers_dir).save(record)
    return record


@pytest.fixture()
def engine() -> Any:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_model_restarted_outside_is_not_evicted_by_its_ttl_while_it_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """Before: the model stayed "running" to the manager, its idle TTL ran out while the new server
    loaded, and the eviction stopped the model by name: the loading server. Now it is kept, and adopted
    once ready."""
    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(manager, "TICK_S", 0.05)
    monkeypatch.setattr(manager, "MEASURE_EVERY_S", 0.05)
    mgr = _manager(tmp_path, {"a": ", ttl_s: 0.2"})

    async def go() -> None:
        await mgr.startup()
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        _restart(mgr, "a", engine.pid, ready=False)
        fake.up.discard("a")  # the restart stopped the old engine
        await asyncio.sleep(0.6)  # past the TTL, the new server still loading
        assert ("stop", "a") not in fake.calls and a.state == "starting"  # loading, as a start of its own
        _restart(mgr, "a", engine.pid, ready=True)
        for _ in range(40):  # adopted at the next check (then idle again past its TTL: evicted, rightly)
            if any(e.kind == "adopted" for e in mgr.events.newest()):
                break
            await asyncio.sleep(0.05)
        assert [e.kind for e in reversed(mgr.events.newest())][-1] == "adopted"
        await mgr.shutdown()

    run(go)


def test_a_sleeping_model_restarted_outside_is_adopted_not_woken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """Before: the next request sent /wake_up (and at level 2 reload_weights) to the new, awake server;
    now the new server is adopted as it is."""
    fake, mgr = _sleepy(tmp_path, monkeypatch)
    _real_engines_run(monkeypatch, fake)

    async def go() -> None:
        gpu = _model(mgr, "gpu")
        assert await mgr.acquire(gpu) is None
        mgr.release(gpu)
        gpu.state = "sleeping"  # put to sleep for another model (test_gateway_manager.py drives that)
        _restart(mgr, "gpu", engine.pid, ready=True)
        fake.up.discard("gpu")
        assert await mgr.acquire(gpu) is None
        mgr.release(gpu)
        assert gpu.state == "running" and gpu.record is not None and gpu.record.pid == engine.pid

    run(go)
    assert not [c for c in fake.calls if c[0] == "wake"], fake.calls


def test_a_managed_model_started_again_is_learnt_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the gateway learnt of a model's server (it counts the output cap against the prompt's room,
    vLLM < 0.32; its context) held for the model's next start too (another server, perhaps another
    vLLM) till the gateway restarted. Now a new start (another record) forgets it; the same one keeps it."""
    from llmdeck.gateway.metrics import GatewayMetrics
    from llmdeck.gateway.ondemand import acquire_route
    from llmdeck.gateway.proxy import RequestCtx
    from llmdeck.gateway.routing import Router
    from test_gateway_manager import _loaded

    FakeLifecycle(monkeypatch)
    loaded, settings = _loaded(tmp_path, {"a": ", min_resident_s: 0"}, "{memory_gib: 5}")
    mgr, router = ModelManager(loaded, settings), Router(loaded)
    route = router.get("a")
    assert route is not None

    async def serve() -> Any:
        ctx = RequestCtx(GatewayMetrics(), "POST", "/v1/chat/completions", route="a")
        narrowed = await acquire_route(mgr, router, route, ctx)
        ctx.finish(200)
        return narrowed.backends[0]  # type: ignore[union-attr]

    async def go() -> None:
        state = await serve()
        state.reserves_cap, state.max_model_len = True, 16384
        assert (await serve()).reserves_cap  # the same start
        _model(mgr, "a").stopped()  # stopped (a TTL, the dashboard), then a request starts it again
        assert await serve() is state and not state.reserves_cap and state.max_model_len is None

    run(go)


def test_requests_for_a_model_restarted_outside_wait_as_for_a_start_of_the_gateways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """Before: the manager still counted the model as running, so requests went to the loading server
    (a 502 "cannot connect", relayed). Now they wait in its queue as for a start of the gateway's own:
    after budget.queue.wait_s the same 503 model_not_ready with Retry-After; once ready they are let in."""
    from starlette.responses import JSONResponse

    from llmdeck.gateway import outside
    from llmdeck.gateway.metrics import GatewayMetrics
    from llmdeck.gateway.ondemand import acquire_route
    from llmdeck.gateway.proxy import RequestCtx
    from llmdeck.gateway.routing import Router
    from test_gateway_manager import _loaded

    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(outside, "POLL_S", 0.05)
    loaded, settings = _loaded(tmp_path, {"a": ""}, "{memory_gib: 5, queue: {wait_s: 0.5}}")
    mgr, router = ModelManager(loaded, settings), Router(loaded)

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        _restart(mgr, "a", engine.pid, ready=False)
        fake.up.discard("a")  # the restart stopped the old engine
        ctx = RequestCtx(GatewayMetrics(), "POST", "/v1/chat/completions", route="a")
        answer = await acquire_route(mgr, router, router.routes["a"], ctx)
        assert isinstance(answer, JSONResponse) and answer.status_code == 503
        assert answer.headers["Retry-After"] == "10" and "x-should-retry" not in answer.headers
        assert b"model_not_ready" in answer.body
        assert b"was not ready within 0.5 s (it is starting" in answer.body  # as for a start of its own
        assert a.state == "starting" and "started again outside the gateway" in (a.progress or "")
        waiting = asyncio.create_task(mgr.acquire(a))
        await asyncio.sleep(0.1)
        assert not waiting.done() and a.waiting == 1
        _restart(mgr, "a", engine.pid, ready=True)
        assert await waiting is None
        assert a.state == "running" and a.record is not None and a.record.pid == engine.pid
        mgr.release(a)

    run(go)
    assert fake.calls == [("start", "a")]  # no start of the gateway's own, no stop


def test_a_model_loading_outside_is_not_evicted_while_an_idle_one_can_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """Before: the loading model counted as running and idle; the least recently used, it was evicted
    for another model, i.e. `llmdeck down` of the server still loading (its memory not settled). Now
    the idle one goes; with no other to evict the start is refused, the 503 saying why."""
    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    mgr = _manager(tmp_path, {"a": "", "b": "", "c": ""}, "{memory_gib: 7}")  # two of 3.2 GiB fit

    async def go() -> None:
        a, b, c = (_model(mgr, n) for n in "abc")
        for m in (a, c):  # a used first: the least recently used
            assert await mgr.acquire(m) is None
            mgr.release(m)
        _restart(mgr, "a", engine.pid, ready=False)
        fake.up.discard("a")
        assert await mgr.acquire(b) is None
        mgr.release(b)
        assert ("stop", "c") in fake.calls and ("stop", "a") not in fake.calls
        assert a.state == "starting"

    run(go)
    assert ("stop", "a") not in fake.calls


def test_another_model_that_only_a_loading_one_could_make_room_for_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """The loading model is the only one that could go: the other is refused with a 503 naming it."""
    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    mgr = _manager(tmp_path, {"a": "", "b": ""})

    async def go() -> None:
        a, b = _model(mgr, "a"), _model(mgr, "b")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        _restart(mgr, "a", engine.pid, ready=False)
        fake.up.discard("a")
        refusal = await mgr.acquire(b)
        assert refusal is not None and refusal.status == 503 and refusal.code == "insufficient_memory"
        assert "a (3.20 GiB, loading: started again outside the gateway) would have to go" in refusal.message
        assert a.state == "starting" and b.state == "stopped"

    run(go)
    assert fake.calls == [("start", "a")]


def _note_restart(log: Path, name: str, pid: int) -> None:
    """What `llmdeck restart NAME` (process ``pid``) notes in the server's log before it stops the engine."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(f"# llmdeck: 2026-01-01T00:01:00+00:00 stopping: `llmdeck restart {name}` (pid {pid})\n")


def test_a_request_between_the_restarts_stop_and_its_new_start_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """`llmdeck restart NAME` stops the engine and removes its record, then lets the memory settle and
    runs the preflight before its new start saves a record: seconds with no server. A request then was
    sent to the stopped engine (a 502). Now the restart's note in the log (its command still running)
    makes the model starting: the request waits, as for a start of the gateway's own."""
    from llmdeck.gateway import outside
    from test_gateway_manager import _loaded

    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(outside, "POLL_S", 0.05)
    loaded, settings = _loaded(tmp_path, {"a": ""}, "{memory_gib: 5, queue: {wait_s: 0.5}}")
    mgr = ModelManager(loaded, settings)
    store = StateStore(settings.servers_dir)

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None and a.record is not None
        mgr.release(a)
        a.record.log_path = tmp_path / "a.log"
        store.save(a.record)  # the gateway's start, on disk as the runtime saves it
        a.record_sig = lifecycle.record_sig("a", settings)
        _note_restart(a.record.log_path, "a", os.getpid())  # this test stands for the restart command
        store.path("a").unlink()
        fake.up.discard("a")
        refusal = await mgr.acquire(a)
        assert refusal is not None and refusal.code == "model_not_ready" and refusal.retry_after_s == 10
        assert a.state == "starting" and "stopped by `llmdeck restart a`" in (a.progress or "")
        waiting = asyncio.create_task(mgr.acquire(a))
        _restart(mgr, "a", engine.pid, ready=False)
        await asyncio.sleep(0.2)
        assert not waiting.done()
        _restart(mgr, "a", engine.pid, ready=True)
        assert await waiting is None and a.record is not None and a.record.pid == engine.pid
        mgr.release(a)

    run(go)
    assert fake.calls == [("start", "a")]


def test_a_start_of_the_gateways_stopped_by_a_restart_is_followed_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """`llmdeck restart NAME` while the gateway's own start of it loaded: that start ended "stopped by
    `llmdeck restart NAME`", and its requests got 503 model_start_failed (no retry; the model marked
    failed for budget.queue.failed_retry_s) while the restart's start loaded. Now that start is followed
    and adopted once ready, and the requests are let in."""
    from llmdeck.errors import StartStopped
    from llmdeck.gateway import outside

    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(outside, "POLL_S", 0.05)
    mgr = _manager(tmp_path, {"a": ""})

    def stopped_by_restart(backend: Any, settings: Any, *_: Any) -> ServerRecord:
        fake.calls.append(("start", backend.name))
        _note_restart(settings.logs_dir / "a.log", "a", os.getpid())
        raise StartStopped("Server 'a' was stopped by `llmdeck restart a` before it was ready.")

    monkeypatch.setattr(lifecycle, "start", stopped_by_restart)

    async def go() -> None:
        a = _model(mgr, "a")
        waiting = asyncio.create_task(mgr.acquire(a))
        await asyncio.sleep(0.2)
        assert not waiting.done() and a.state == "starting" and a.outside
        _restart(mgr, "a", engine.pid, ready=True)
        assert await waiting is None
        assert a.state == "running" and a.record is not None and a.record.pid == engine.pid
        mgr.release(a)

    run(go)
    assert fake.calls == [("start", "a")]


def test_a_request_in_the_restarts_stop_gap_is_sent_again_and_waits_for_the_new_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """`llmdeck restart NAME` stops the engine (its port closes at once; the stop lasts up to its 20 s
    grace while requests it took stay open), then removes its record: in between the model still counted
    as running, and a request then was sent to the stopping engine: a 502 "cannot connect", relayed at
    once. Now the refused connection makes the gateway look for the restart's note in the engine's log:
    the model counts as starting, the request waits for the restart's new start and is served there.
    The gateway runs for real (uvicorn); the engine's HTTP side is a FAKE upstream (tests/gateway_fakes.py)
    stopped and started again on the model's port."""
    import threading

    import httpx

    from gateway_fakes import FakeOpenAIUpstream, UvicornThread
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.gateway import outside
    from llmdeck.gateway.app import build_app
    from llmdeck.gateway.config import parse_config
    from llmdeck.settings import Settings
    from llmdeck.util.net import free_port

    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(outside, "POLL_S", 0.05)
    port = free_port()
    spec = LaunchSpec(name="a", engine="cpu", model=str(tmp_path / "m"), port=port)
    (tmp_path / "a.json").write_text(spec.model_dump_json(), encoding="utf-8")
    settings = Settings(state_dir=tmp_path / "st")
    text = (
        "routes:\n  - {model: a, backends: [{spec: a.json, min_resident_s: 0}]}\n"
        "budget: {memory_gib: 5, queue: {wait_s: 20}}\n"
        "timeouts: {connect_s: 3, first_byte_s: 5, response_s: 5, idle_s: 5}\n"
        "health: {interval_s: 60, timeout_s: 0.5}\n"
    )
    loaded = parse_config(text, source=tmp_path / "gw.yaml", settings=settings)
    chat = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}
    upstream = FakeOpenAIUpstream()
    app = build_app(loaded, settings=settings)
    with UvicornThread(app) as gw:
        with UvicornThread(upstream.app, port=port):
            assert httpx.post(f"{gw.url}/v1/chat/completions", json=chat, timeout=10).status_code == 200
            mgr = app.state.gateway.manager
            a = _model(mgr, "a")
            a.record.log_path = tmp_path / "a.log"
            StateStore(settings.servers_dir).save(a.record)  # the gateway's start, on disk
            a.record_sig = lifecycle.record_sig("a", settings)
            _note_restart(a.record.log_path, "a", os.getpid())  # this test stands for the restart command
        got: list[httpx.Response] = []
        post = lambda: got.append(httpx.post(f"{gw.url}/v1/chat/completions", json=chat, timeout=30))  # noqa: E731
        thread = threading.Thread(target=post, daemon=True)
        thread.start()
        time.sleep(3.5)  # its port closed, its record still there past the connect timeout (3 s): the
        # old engine's stop can last its grace period (20 s) while requests it took stay open
        assert not got, got[0].text  # before: a 502 at once
        assert a.state == "starting" and "stopped by `llmdeck restart a`" in (a.progress or "")
        StateStore(settings.servers_dir).path("a").unlink()  # the restart's stop is through
        time.sleep(0.3)
        assert not got and a.state == "starting"
        with UvicornThread(upstream.app, port=port):
            _restart(mgr, "a", engine.pid, ready=True)  # the restart's new start, ready
            thread.join(15)
            assert got and got[0].status_code == 200, got and got[0].text
    assert len(upstream.bodies) == 2
    assert fake.calls == [("start", "a"), ("stop", "a")]  # no start of its own; stopped at its shutdown


def test_a_dashboard_stop_ends_a_start_made_outside_the_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """The dashboard offered "stop" for a model loading after `llmdeck restart NAME` and did nothing: the
    request kept waiting, the model was adopted once ready (and the stop left asked, ending the model's
    next start of the gateway's at once). Now the new server (the gateway's: `restart` keeps it so) is
    stopped as the gateway stops its own, once the restart's stop is through and its record saved; the
    waiting request gets 503 model_start_stopped; the next request starts the model."""
    from llmdeck.gateway import outside
    from llmdeck.gateway.ui_actions import begin
    from test_gateway_manager import _loaded

    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(outside, "POLL_S", 0.05)
    loaded, settings = _loaded(tmp_path, {"a": ""}, "{memory_gib: 5, queue: {wait_s: 10}}")
    mgr = ModelManager(loaded, settings)
    store = StateStore(settings.servers_dir)

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None and a.record is not None
        mgr.release(a)
        a.record.log_path = tmp_path / "a.log"
        store.save(a.record)
        a.record_sig = lifecycle.record_sig("a", settings)
        _note_restart(a.record.log_path, "a", os.getpid())  # this test stands for the restart command
        store.path("a").unlink()
        fake.up.discard("a")
        waiting = asyncio.create_task(mgr.acquire(a))
        await asyncio.sleep(0.2)
        assert a.state == "starting" and a.outside
        begin(mgr, a, "stop", set())  # in the restart's gap: no new server yet to stop
        await asyncio.sleep(0.2)
        assert not waiting.done() and ("stop", "a") not in fake.calls
        _restart(mgr, "a", engine.pid, ready=False)  # the restart's new start, loading
        refusal = await asyncio.wait_for(waiting, 2)
        assert refusal is not None and refusal.code == "model_start_stopped", refusal
        assert "stopped from the dashboard while it loaded" in refusal.message
        assert a.state == "stopped" and not a.stop_asked and fake.calls[-1] == ("stop", "a")
        store.path("a").unlink()  # (the fake's stop leaves the record)
        assert await mgr.acquire(a) is None and a.state == "running"  # started again: not failed
        mgr.release(a)

    run(go)
    assert fake.calls == [("start", "a"), ("stop", "a"), ("start", "a")]


def test_a_dashboard_stop_ends_an_outside_start_no_request_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """No request waits, so no start task of the manager's follows it: the stop is one of its own."""
    from llmdeck.gateway import outside
    from llmdeck.gateway.ui_actions import begin
    from llmdeck.gateway.ui_state import actions_for

    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(outside, "POLL_S", 0.05)
    mgr = _manager(tmp_path, {"a": ""})

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        _restart(mgr, "a", engine.pid, ready=False)
        fake.up.discard("a")
        assert await mgr._loads_anew(a) and a.state == "starting" and not a.bringing_up
        assert actions_for(a) == ["stop"]
        begin(mgr, a, "stop", set())
        for _ in range(40):
            if a.state == "stopped":
                break
            await asyncio.sleep(0.05)
        assert a.state == "stopped" and not a.stop_asked and actions_for(a) == ["start"]

    run(go)
    assert fake.calls == [("start", "a"), ("stop", "a")]
