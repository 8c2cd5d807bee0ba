"""An Ollama request's ``keep_alive`` (seconds or a Go duration; negative: keep loaded; 0: unload after
the request) as a model on demand's idle limit: read as Ollama's ``Duration.UnmarshalJSON`` reads it, set
by the gateway's Ollama routes, obeyed by the manager's idle stop and told by ``/api/ps``. Models start
through FakeLifecycle (tests/unit/test_gateway_manager.py): no engine."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from llmdeck.gateway.ollama_keepalive import FOREVER, keep_alive_s
from llmdeck.gateway.ollama_shapes import OllamaRequestError
from test_gateway_manager import FakeLifecycle, _loaded, _manager, _model, run


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (0, 0.0),
        ("0", 0.0),
        ("0s", 0.0),
        ("0m", 0.0),
        (0.0, 0.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("+10s", 10.0),
        (300, 300.0),
        (90.7, 90.0),  # whole seconds, as Ollama's int(t)
        ("300", 300.0),  # a number in a string: seconds (curl examples send "-1")
        (-1, FOREVER),
        ("-1", FOREVER),
        ("-5m", FOREVER),
        (" 10m ", 600.0),
        (1e300, FOREVER),  # past any date /api/ps can write
        ("99999999999h", FOREVER),
        ("1" * 60, FOREVER),
    ],
)
def test_keep_alive_is_read_as_ollama_reads_it(value: Any, seconds: float | None) -> None:
    assert keep_alive_s(value) == seconds


@pytest.mark.parametrize("value", [True, [], {}, "five", "5x", "", "m", "1h 30m", "5m-", math.nan, "9" * 80])
def test_a_bad_keep_alive_says_what_it_takes(value: Any) -> None:
    with pytest.raises(OllamaRequestError, match=r'keep_alive` must be a duration such as "5m"'):
        keep_alive_s(value)


def test_the_idle_stop_follows_the_last_keep_alive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """keep_alive 2 s stops a model with no ttl_s once idle past it; -1 keeps one past its ttl_s; none
    gives the route's ttl_s back; a stop forgets it."""
    fake = FakeLifecycle(monkeypatch)
    mgr = _manager(tmp_path, {"a": "", "b": ", ttl_s: 60"}, "{memory_gib: 10}")

    async def go() -> None:
        a, b = _model(mgr, "a"), _model(mgr, "b")
        for m in (a, b):
            assert await mgr.acquire(m) is None
            mgr.release(m)
        a.keep_alive_s, b.keep_alive_s = 2.0, FOREVER
        await mgr._expire()
        assert (a.state, b.state) == ("running", "running")  # a: idle < 2 s
        a.last_used = b.last_used = time.time() - 120  # both idle past 2 s and past b's ttl_s 60
        await mgr._expire()
        assert (a.state, b.state) == ("stopped", "running")  # b: kept loaded by its keep_alive -1
        assert a.keep_alive_s is None  # a new start begins with the route's limit
        b.keep_alive_s = None  # the next Ollama request sent none: ttl_s 60 again
        await mgr._expire()
        assert b.state == "stopped"

    run(go)
    assert [c for c in fake.calls if c[0] == "stop"] == [("stop", "a"), ("stop", "b")]
    said = [e.reason for e in mgr.events.newest() if e.kind == "evict"]
    assert any("keep_alive 2 s" in r for r in said) and any("ttl_s 60" in r for r in said), said


def test_a_model_kept_by_keep_alive_is_evicted_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Room for a third model: the one an Ollama client pinned (-1) stays though least recently used."""
    fake = FakeLifecycle(monkeypatch)
    mgr = _manager(tmp_path, {"a": "", "b": "", "c": ""}, "{memory_gib: 7}")  # two 3.2 GiB fit, not three

    async def go() -> None:
        for name in ("a", "b"):
            m = _model(mgr, name)
            assert await mgr.acquire(m) is None
            mgr.release(m)
        a, b, c = _model(mgr, "a"), _model(mgr, "b"), _model(mgr, "c")
        a.keep_alive_s = FOREVER
        a.last_used, b.last_used = time.time() - 60, time.time()
        assert await mgr.acquire(c) is None
        mgr.release(c)
        assert (a.state, b.state, c.state) == ("running", "stopped", "running")

    run(go)
    assert [c for c in fake.calls if c[0] == "stop"] == [("stop", "b")]


def test_ollama_routes_set_the_keep_alive_and_ps_tells_when_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load with keep_alive "1h30m" sets the model's limit (over its ttl_s 600) and /api/ps's
    expires_at; -1 drops expires_at (never idle-stopped); a request without it gives ttl_s back; a bad one
    is a 400 that changes nothing."""
    from llmdeck.gateway.app import build_app

    FakeLifecycle(monkeypatch)
    loaded, settings = _loaded(tmp_path, {"a": ", ttl_s: 600"}, "{memory_gib: 10}")
    with TestClient(build_app(loaded, settings=settings)) as client:
        model = _model(client.app.state.gateway.manager, "a")  # type: ignore[attr-defined]

        def load(keep_alive: Any) -> Any:
            body = {"model": "a"} if keep_alive is None else {"model": "a", "keep_alive": keep_alive}
            return client.post("/api/generate", json=body)

        assert load("1h30m").json()["done_reason"] == "load" and model.keep_alive_s == 5400
        deadline = time.monotonic() + 10
        while model.state != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        (entry,) = client.get("/api/ps").json()["models"]
        left = _seconds_until(entry["expires_at"])
        assert 5300 < left <= 5400, entry
        bad = load("soon")
        assert bad.status_code == 400 and "keep_alive" in bad.json()["error"] and model.keep_alive_s == 5400
        load(-1)
        assert model.keep_alive_s == FOREVER and "expires_at" not in client.get("/api/ps").json()["models"][0]
        status = client.get("/gateway/status").json()["models"][0]
        assert status["keep_alive_s"] == -1  # JSON has no infinity: Ollama's own -1
        load(None)
        assert model.keep_alive_s is None
        assert 500 < _seconds_until(client.get("/api/ps").json()["models"][0]["expires_at"]) <= 600


def _seconds_until(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - time.time()


def test_keep_alive_0_with_a_prompt_answers_then_stops_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ollama's "unload after this request": the chat is answered (by a FAKE OpenAI upstream on the spec's
    port), then the model on demand is stopped within a few seconds; the reply was not cut by it."""
    from urllib.parse import urlsplit

    import ollama

    from gateway_fakes import UvicornThread
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.gateway.app import build_app
    from llmdeck.gateway.config import parse_config
    from llmdeck.settings import Settings
    from test_gateway_proxy import fake

    lifecycle = FakeLifecycle(monkeypatch)
    with fake() as up:
        port = urlsplit(up.url).port  # type: ignore[attr-defined]
        spec = LaunchSpec(name="a", engine="cpu", model=str(tmp_path / "m"), port=port)
        (tmp_path / "a.json").write_text(spec.model_dump_json(), encoding="utf-8")
        text = "routes:\n  - {model: a, backends: [{spec: a.json, min_resident_s: 0}]}\n"
        text += "budget: {memory_gib: 10}\n"
        settings = Settings(state_dir=tmp_path / "st")
        loaded = parse_config(text, source=tmp_path / "gw.yaml", settings=settings)
        with UvicornThread(build_app(loaded, settings=settings)) as gw:
            client = ollama.Client(host=gw.url, timeout=20)
            said = client.chat(model="a", messages=[{"role": "user", "content": "hi"}], keep_alive=0)
            assert said.done and said.message.content
            deadline = time.monotonic() + 10
            while ("stop", "a") not in lifecycle.calls and time.monotonic() < deadline:
                time.sleep(0.1)
            assert [c for c in lifecycle.calls if c[0] in ("start", "stop")] == [
                ("start", "a"),
                ("stop", "a"),
            ]
            assert time.monotonic() < deadline - 6, "stopped, but not within ~4 s of the reply"
