"""A `server:` backend that `llmdeck restart NAME` brings back (gateway/comeback.py): its requests wait for
it, not a 502 after the refused-connection retries or the all-down 503 at once. The gateway runs for real
(uvicorn); the upstream is a tiny FAKE (tests/gateway_fakes.py), stopped and started again on its port;
the restart is its note in the server's log (what `llmdeck restart` writes before it stops the engine),
left by this test process, which is alive as the restart's process would be."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_fakes import FakeOpenAIUpstream, UvicornThread
from llmdeck.engines.logfiles import note_stop
from llmdeck.engines.spec import LaunchSpec
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.runtime.launcher import restart_who
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.settings import Settings
from llmdeck.util.net import free_port

CHAT = {"model": "a", "messages": [{"role": "user", "content": "hi"}]}


@contextlib.contextmanager
def gateway(
    tmp_path: Path, port: int, restart_wait_s: float = 30, interval_s: float = 60, **record: object
) -> Iterator[tuple[str, Settings]]:
    """A gateway whose one route's backend is the llmdeck server `coder` (its record, at ``port``;
    ``record``: more of it, a live pid)."""
    settings = Settings(state_dir=tmp_path / "state")
    spec = LaunchSpec(name="coder", engine="cpu", model=str(tmp_path), port=port, served_model_name="coder")
    log_path = settings.logs_dir / "coder.log"
    log_path.parent.mkdir(parents=True)
    log_path.write_text("# llmdeck: starting\n")
    fields: dict[str, object] = {"argv": ["x"], **record}
    StateStore(settings.servers_dir).save(
        ServerRecord(name="coder", spec=spec, log_path=log_path, **fields)  # type: ignore[arg-type]
    )
    text = (
        "routes:\n  - model: a\n    backends:\n      - server: coder\n"
        f"timeouts: {{connect_s: 2, first_byte_s: 5, response_s: 5, restart_wait_s: {restart_wait_s}}}\n"
        f"health: {{interval_s: {interval_s}, timeout_s: 0.5}}\n"  # 60: no health round during a test
    )
    loaded = parse_config(text, source=tmp_path / "gateway.yaml", settings=settings)
    with UvicornThread(build_app(loaded)) as server:
        yield server.url, settings


def _restarting(settings: Settings, pid: int | None = None) -> None:
    """What `llmdeck restart coder` leaves in the server's log before it stops it (its own pid)."""
    log_path = settings.logs_dir / "coder.log"
    if pid is None:
        note_stop(log_path, restart_who("coder"))
    else:  # a restart whose process is gone (it failed, or was killed)
        with log_path.open("a") as f:
            f.write(f"# llmdeck: 2026-01-01T00:00:00+00:00 stopping: {restart_who('coder')} (pid {pid})\n")


def _post_in_thread(url: str) -> tuple[threading.Thread, list[httpx.Response], list[float]]:
    got: list[httpx.Response] = []
    took: list[float] = []

    def post() -> None:
        t0 = time.monotonic()
        got.append(httpx.post(url, json=CHAT, timeout=60))
        took.append(time.monotonic() - t0)

    thread = threading.Thread(target=post, daemon=True)
    thread.start()
    return thread, got, took


def test_a_request_during_a_restart_waits_past_the_connect_retries_and_is_served(tmp_path: Path) -> None:
    """Before: the refused connection was tried again for the connect timeout (2 s here), then a 502, and
    the backend marked down. Now, while the restart runs, the request waits for the server and is served
    by it once it listens again (5 s later here)."""
    port, upstream = free_port(), FakeOpenAIUpstream()
    first = UvicornThread(upstream.app, port=port).__enter__()
    with gateway(tmp_path, port) as (gw, settings):
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        _restarting(settings)
        first.__exit__(None, None, None)  # the restart stopped it
        thread, got, took = _post_in_thread(f"{gw}/v1/chat/completions")
        time.sleep(5.0)  # past the 2 s of connect retries
        assert thread.is_alive(), got and got[0].text
        with UvicornThread(upstream.app, port=port):  # its new start listens
            thread.join(15)
            assert got and got[0].status_code == 200, got[0].text
            assert took[0] > 5.0
            backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
            assert backend["healthy"] is True and backend["failures"] == 0, backend
    assert len(upstream.bodies) == 2


def test_a_backend_known_down_waits_for_its_restart_instead_of_the_503_at_once(tmp_path: Path) -> None:
    """A backend already marked down (a request gave up on it) whose restart then begins: the next
    request waits for it (before: the all-down 503 at once) and is served once it is back."""
    port, upstream = free_port(), FakeOpenAIUpstream()
    first = UvicornThread(upstream.app, port=port).__enter__()
    with gateway(tmp_path, port) as (gw, settings):
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        first.__exit__(None, None, None)  # stopped by hand: no restart runs
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 502
        t0 = time.monotonic()
        down = httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10)
        assert down.status_code == 503 and time.monotonic() - t0 < 2.0  # marked down: at once
        assert down.json()["error"]["code"] == "backend_down"
        _restarting(settings)
        thread, got, _took = _post_in_thread(f"{gw}/v1/chat/completions")
        time.sleep(3.0)
        assert thread.is_alive(), got and got[0].text
        with UvicornThread(upstream.app, port=port):
            thread.join(15)
            assert got and got[0].status_code == 200, got[0].text


@pytest.mark.parametrize("how", ["restart-ended", "no-wait"])
def test_no_wait_when_the_restart_is_over_or_restart_wait_s_is_0(tmp_path: Path, how: str) -> None:
    """A restart whose process is gone (its start failed) brings nothing back, and `restart_wait_s: 0`
    asks for no wait: the 503 at once, as before."""
    port = free_port()
    first = UvicornThread(FakeOpenAIUpstream().app, port=port).__enter__()
    with gateway(tmp_path, port, restart_wait_s=0 if how == "no-wait" else 30) as (gw, settings):
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        first.__exit__(None, None, None)
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 502
        if how == "restart-ended":
            gone = subprocess.Popen(["true"])
            gone.wait()
            _restarting(settings, gone.pid)
        else:
            _restarting(settings)
        t0 = time.monotonic()
        r = httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10)
        assert r.status_code == 503 and r.json()["error"]["code"] == "backend_down", r.text
        assert time.monotonic() - t0 < 2.0


def test_a_url_backend_is_not_waited_for(tmp_path: Path) -> None:
    """The wait follows an llmdeck server's record: a `url:` backend has none (the 503 at once)."""
    from llmdeck.gateway.comeback import coming_back
    from llmdeck.gateway.config import ResolvedBackend

    assert coming_back(ResolvedBackend(url="http://127.0.0.1:9", label="x", served_model=None)) is False


def test_a_client_that_hangs_up_during_the_wait_is_not_sent_when_the_server_is_back(tmp_path: Path) -> None:
    """The refused connection is tried again a look a second while the restart runs: a client that left
    meanwhile ends those tries (before: its request was sent to the server once back, a generation for
    nobody, for up to restart_wait_s)."""
    port, upstream = free_port(), FakeOpenAIUpstream()
    first = UvicornThread(upstream.app, port=port).__enter__()
    with gateway(tmp_path, port) as (gw, settings):
        assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
        _restarting(settings)
        first.__exit__(None, None, None)
        with contextlib.suppress(httpx.TimeoutException):  # the client gives up after 3.5 s
            httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=3.5)
        time.sleep(1.5)  # the gateway's next look sees the hang-up
        with UvicornThread(upstream.app, port=port):
            time.sleep(3.0)
    assert len(upstream.bodies) == 1


def test_a_server_ready_between_two_looks_is_asked_once_more_not_given_the_503(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen under load (evidence/lifecycle/drain): the wait's probe failed just before the new start was
    ready; at the next look it was ready, so no longer 'coming back', and the waiting requests got the
    503 after 29 s, 4 ms before the backend answered. Now the wait asks once more before the 503."""
    import asyncio

    from llmdeck.gateway import comeback

    looks = iter([True, False])  # coming back, then ready (its record says so)
    probes = iter([False, True])  # the first probe is too early; it answers at the next

    async def any_back(states: object) -> bool:
        return next(looks)

    class Router:
        async def recheck(self, *args: object) -> bool:
            return next(probes)

    monkeypatch.setattr(comeback, "any_back", any_back)
    monkeypatch.setattr(comeback, "POLL_S", 0.01)
    wait = comeback.waiter(None, Router(), [], 0.5, 30.0, asyncio.Event().wait)  # type: ignore[arg-type]
    assert asyncio.run(wait()) is True


def test_new_requests_wait_while_a_restart_lets_the_running_ones_finish(tmp_path: Path) -> None:
    """`llmdeck restart` notes its stop, then lets the server's running requests finish (runtime/drain.py)
    while the server still answers: requests sent from then on had gone to it too, so steady traffic kept
    it busy till the drain's limit (or came just as it stopped) and were cut. Now a request a second or
    more after the note finds the backend held, and waits for the new start (here: the old upstream
    stopped, a new one on its port). No health round runs in this test: the request's own look holds it."""
    from datetime import UTC, datetime

    port, old, new = free_port(), FakeOpenAIUpstream(), FakeOpenAIUpstream()
    engine = subprocess.Popen(["sleep", "120"], start_new_session=True)  # the live server's process
    first = UvicornThread(old.app, port=port).__enter__()
    live = {"pid": engine.pid, "argv": ["sleep", "120"], "ready_at": datetime.now(UTC)}
    try:
        with gateway(tmp_path, port, **live) as (gw, settings):
            assert httpx.post(f"{gw}/v1/chat/completions", json=CHAT, timeout=10).status_code == 200
            _restarting(settings)  # the restart's note; its drain runs, the server answers still
            time.sleep(1.1)  # the backend is looked at once a second at most
            thread, got, _ = _post_in_thread(f"{gw}/v1/chat/completions")
            time.sleep(2.0)
            assert thread.is_alive() and len(old.bodies) == 1, got and got[0].text  # held, not sent
            status = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
            assert status["healthy"] is False and "being restarted" in status["last_error"], status
            first.__exit__(None, None, None)  # the restart stops it
            engine.kill()
            (settings.logs_dir / "coder.log").write_text("# llmdeck: starting\n")  # its new start's log
            with UvicornThread(new.app, port=port):
                thread.join(15)
                assert got and got[0].status_code == 200, got[0].text
    finally:
        engine.kill()
    assert len(old.bodies) == 1 and len(new.bodies) == 1
