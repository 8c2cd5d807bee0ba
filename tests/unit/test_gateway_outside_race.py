"""Two requests that race the look at a model's record file after `llmdeck restart NAME` saved a new
start: the first one asks whether the server is new (a read of the record, a process check: for a
container `docker inspect`, ~100 ms), the other came meanwhile. The engines are FAKE
(tests/unit/test_gateway_manager.py's FakeLifecycle); the restarted server is a real process."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from llmdeck.gateway import lifecycle, outside
from test_gateway_manager import FakeLifecycle, _manager, _model, _real_engines_run, run
from test_gateway_manager_restart import _restart


@pytest.fixture()
def engine() -> Any:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_request_racing_the_first_look_at_a_restart_waits_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: Any
) -> None:
    """Before: the first request noted the record file's change at once and went to look; a second one
    that came while it looked found the change noted, the model still "running", and was sent to the
    loading server (the 502 "cannot connect" the change was for). Now it waits for that look."""
    fake = FakeLifecycle(monkeypatch)
    _real_engines_run(monkeypatch, fake)
    monkeypatch.setattr(outside, "POLL_S", 0.05)
    mgr = _manager(tmp_path, {"a": ""})
    slow = lifecycle.successor

    def slow_successor(record: Any, settings: Any) -> Any:
        time.sleep(0.2)  # `docker inspect` of a container's record
        return slow(record, settings)

    monkeypatch.setattr(lifecycle, "successor", slow_successor)

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)
        _restart(mgr, "a", engine.pid, ready=False)
        fake.up.discard("a")  # the restart stopped the old engine
        first = asyncio.create_task(mgr.acquire(a))
        await asyncio.sleep(0.05)  # the first one is looking
        second = asyncio.create_task(mgr.acquire(a))
        await asyncio.sleep(0.4)
        assert a.state == "starting"
        assert not second.done(), "a request was let in to the loading server"
        assert not first.done()
        _restart(mgr, "a", engine.pid, ready=True)
        assert await first is None and await second is None
        assert a.state == "running" and a.inflight == 2
        mgr.release(a)
        mgr.release(a)

    run(go)
    assert fake.calls == [("start", "a")]
