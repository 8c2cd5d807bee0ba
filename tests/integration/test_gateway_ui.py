"""The dashboard (`/ui`, `/ui/api/state`, its actions) without an engine: auth (a non-loopback client
without a key gets 401 and no data), DNS rebinding, CSRF, the schema, the actions on models on demand
(``FakeLifecycle`` from test_gateway_manager stands in for the engine's start and stop), and the page in
headless chromium: a hostile alias shown as text, the buttons start and stop a model.
The engine's own run (two tiny models, a switch seen in the page) is in test_gateway_models_integration.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser_helpers import CHROMIUM, browser
from gateway_fakes import UvicornThread
from llmdeck.engines.spec import LaunchSpec
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.events import EventLog
from llmdeck.gateway.keys import KeyStore
from llmdeck.gateway.ui_schema import UiState
from llmdeck.gateway.ui_sources import quantile
from llmdeck.settings import Settings
from test_gateway_manager import FakeLifecycle

HOSTILE = "<script>console.error('xss-alias')</script>"
HOSTILE_IMG = "<img src=http://example.invalid/x.png onerror=console.error('xss-img')>"
FAST = "health: {interval_s: 60, timeout_s: 0.3}\ntimeouts: {connect_s: 0.5}\n"


def needs_chromium(test: Any) -> Any:
    """A test that drives the real headless chromium: an integration test (tests/integration)."""
    skip = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
    return pytest.mark.integration(skip(test))


def _app(tmp: Path, *, keys: bool = False, managed: bool = False, aliases: tuple[str, ...] = ("a",)) -> Any:
    lines = ["routes:"]
    for i, alias in enumerate(aliases):
        if managed:
            name = f"m{i}"
            spec = LaunchSpec(name=name, engine="cpu", model=str(tmp / "m"), port=9300 + i)
            (tmp / f"{name}.json").write_text(spec.model_dump_json(), encoding="utf-8")
            backend = f"[{{spec: {name}.json, min_resident_s: 0}}]"
        else:
            backend = "['http://127.0.0.1:9']"
        lines.append(f"  - model: {alias!r}\n    backends: {backend}")
    text = "\n".join(lines) + "\n" + FAST + ("budget: {memory_gib: 5}\n" if managed else "")
    if keys:
        text += "keys_file: keys.json\n"
    settings = Settings(state_dir=tmp / "state", results_dir=tmp / "runs")
    loaded = parse_config(text, source=tmp / "gw.yaml", settings=settings)
    return build_app(loaded, settings=settings)


def _remote(app: Any, method: str, path: str, **kw: Any) -> httpx.Response:
    """A request from 203.0.113.7 (TEST-NET-3: not loopback) straight into the ASGI app."""

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=("203.0.113.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gpu-box.lan:4000") as client:
            return await client.request(method, path, **kw)

    return asyncio.run(go())


ALL = [("GET", "/ui"), ("GET", "/ui/api/state"), ("GET", "/ui/static/dashboard.js")]


def test_a_non_loopback_client_without_a_key_gets_401_and_no_data(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    secret = store.create("ops")
    app = _app(tmp_path, keys=True, aliases=("secret-alias",))
    for method, path in [*ALL, ("POST", "/ui/api/models/m0/stop"), ("GET", "/ui/results/x.html")]:
        resp = _remote(app, method, path, headers={"X-Llmdeck-UI": "1"})
        assert resp.status_code == 401, (path, resp.text)
        assert "secret-alias" not in resp.text and "pools" not in resp.json()
        bad = _remote(app, method, path, headers={"Authorization": "Bearer sk-llmdeck-wrong"})
        assert bad.status_code == 401 and "secret-alias" not in bad.text
    assert "Basic" in _remote(app, "GET", "/ui").headers["www-authenticate"]  # the browser asks for a key
    for header in (f"Bearer {secret}", "Basic " + base64.b64encode(f"me:{secret}".encode()).decode()):
        ok = _remote(app, "GET", "/ui/api/state", headers={"Authorization": header})
        assert ok.status_code == 200 and ok.json()["routes"][0]["alias"] == "secret-alias"
        record = store.load().keys[0]
        assert secret not in ok.text and record.digest not in ok.text and record.hint not in ok.text
    open_app = _app(_mk(tmp_path / "open"))
    assert _remote(open_app, "GET", "/ui/api/state").status_code == 401  # no keys: loopback only


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    with UvicornThread(app) as server:
        yield server.url


def test_loopback_page_state_schema_and_headers(tmp_path: Path) -> None:
    (tmp_path / "runs" / "tune-agent").mkdir(parents=True)
    (tmp_path / "runs" / "tune-agent" / "report.html").write_text("<p>tune</p>", encoding="utf-8")
    (tmp_path / "runs" / "bench-1.html").write_text("<p>bench</p>", encoding="utf-8")
    with served(_app(tmp_path, aliases=("a", "b"))) as url:
        page = httpx.get(f"{url}/ui")
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
        assert '<script src="/ui/static/dashboard.js"' in page.text
        state = UiState.model_validate(httpx.get(f"{url}/ui/api/state").json())
        assert state.schema_version == 1 and [r.alias for r in state.routes] == ["a", "b"]
        host = next(p for p in state.pools if p.name == "host")
        assert host.total_bytes > 0 and {s.kind for s in host.segments} >= {"os", "page_cache", "free"}
        assert {r.kind: r.name for r in state.reports} == {
            "tune": "tune-agent/report.html",
            "bench": "bench-1.html",
        }
        report = httpx.get(url + next(r.href for r in state.reports if r.kind == "bench"))
        assert report.text == "<p>bench</p>" and "sandbox" in report.headers["content-security-policy"]
        for bad in ("/ui/results/../gw.yaml", "/ui/results/%2e%2e/gw.yaml", "/ui/results/x.html"):
            assert httpx.get(url + bad).status_code == 404, bad
        # a page of another site rebound to 127.0.0.1 by DNS: loopback client, foreign Host
        assert httpx.get(f"{url}/ui/api/state", headers={"Host": "evil.example:80"}).status_code == 403
        assert httpx.get(f"{url}/ui/api/models/m0/start").status_code == 405  # no GET side effects


def _state(url: str) -> dict[str, Any]:
    return {m["name"]: m for m in httpx.get(f"{url}/ui/api/state").json()["models"]}


def _wait(url: str, name: str, state: str, timeout_s: float = 10) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (m := _state(url)[name])["state"] == state:
            return m
        time.sleep(0.1)
    raise AssertionError(f"{name} not {state}: {_state(url)[name]}")


UI = {"X-Llmdeck-UI": "1", "Content-Type": "application/json"}


def test_actions_need_the_header_a_json_body_and_the_same_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLifecycle(monkeypatch)
    with served(_app(tmp_path, managed=True, aliases=("a", "b"))) as url:
        start = f"{url}/ui/api/models/m0/start"
        for headers, body in (
            ({}, "{}"),  # no custom header: what a form or an <img> of another site sends
            ({"X-Llmdeck-UI": "1", "Content-Type": "text/plain"}, "{}"),
            ({**UI, "Origin": "http://evil.example"}, "{}"),
            (UI, "[]"),
        ):
            resp = httpx.post(start, headers=headers, content=body)
            assert resp.status_code == 403 and resp.json()["error"]["code"] == "csrf", resp.text
        assert fake.calls == []
        assert httpx.post(f"{url}/ui/api/models/nope/start", headers=UI, content="{}").status_code == 404
        resp = httpx.post(start, headers={**UI, "Origin": url}, content="{}")
        assert resp.status_code == 202 and resp.json()["accepted"] is True
        _wait(url, "m0", "running")
        again = httpx.post(start, headers=UI, content="{}")
        assert again.status_code == 409 and "running" in again.json()["error"]["message"]
        assert httpx.post(f"{url}/ui/api/models/m0/sleep", headers=UI, content="{}").status_code == 409
        httpx.post(f"{url}/ui/api/models/m1/start", headers=UI, content="{}")  # evicts m0 (budget 5 GiB)
        _wait(url, "m1", "running")
        assert _state(url)["m0"]["state"] == "stopped"
        assert httpx.post(f"{url}/ui/api/models/m1/stop", headers=UI, content="{}").status_code == 202
        _wait(url, "m1", "stopped")
        events = httpx.get(f"{url}/ui/api/state").json()["events"]
        kinds = [(e["kind"], e["model"]) for e in reversed(events)]
        assert kinds[:3] == [("start", "m0"), ("ready", "m0"), ("evict", "m0")], kinds
        assert ("stopped", "m1") in kinds and fake.max_up == 1
        assert any("dashboard" in e["reason"] for e in events if e["kind"] == "stopped")


def test_the_page_writes_data_only_as_text() -> None:
    """No HTML sink in the page's script: every value goes through textContent / setAttribute."""
    from importlib.resources import files

    js = (files("llmdeck.gateway") / "ui" / "dashboard.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert sink not in js, sink
    html = (files("llmdeck.gateway") / "ui" / "index.html").read_text(encoding="utf-8")
    assert "http" not in html and "<script>" not in html  # nothing from elsewhere, no inline script


# version 1's fields, as docs/guide/dashboard.md documents them: a field may be added, never removed or
# renamed without bumping UI_SCHEMA_VERSION (other tools read this JSON)
V1 = {
    "": {"schema", "schema_version", "generated_at", "gateway", "pools", "budget", "models", "routes"},
    "gateway": {"uptime_s", "keys_required", "insecure", "version"},
    "pools": {"name", "kind", "source", "total_bytes", "budget", "segments"},
    "segments": {"kind", "name", "bytes", "planned_bytes", "measured_bytes", "state"},
    "models": {"name", "aliases", "state", "progress", "planned_bytes", "measured_bytes", "held_bytes"}
    | {"in_flight", "queue", "last_used", "starts", "evictions", "actions"},
    "routes": {"alias", "requests_per_s", "ttft_p50_ms", "ttft_p95_ms", "prompt_tokens", "window_s"},
    "events": {"seq", "at", "kind", "model", "reason", "code", "count"},
    "reports": {"name", "kind", "href", "modified", "bytes"},
}


def test_the_state_schema_keeps_version_1s_fields() -> None:
    from llmdeck.gateway.ui_schema import (
        UI_SCHEMA_VERSION,
        EventView,
        GatewayView,
        MemoryPool,
        ModelView,
        ReportLink,
        RouteView,
        Segment,
    )

    def names(model: Any) -> set[str]:
        return {f.alias or n for n, f in model.model_fields.items()}

    assert UI_SCHEMA_VERSION == 1
    found = {
        "": names(UiState),
        "gateway": names(GatewayView),
        "pools": names(MemoryPool),
        "segments": names(Segment),
        "models": names(ModelView),
        "routes": names(RouteView),
        "events": names(EventView),
        "reports": names(ReportLink),
    }
    for part, fields in V1.items():
        assert fields <= found[part], (part, fields - found[part])


def test_events_merge_repeated_refusals_and_quantiles_follow_buckets() -> None:
    log = EventLog(size=3)
    for _ in range(3):
        log.add("refused", "a", "queue full", "queue_full")
    log.add("start", "b", "needs 1 GiB")
    newest = log.newest()
    assert [(e.kind, e.count) for e in newest] == [("start", 1), ("refused", 3)]
    buckets = {0.1: 0.0, 0.25: 50.0, 0.5: 100.0, float("inf"): 100.0}
    assert quantile(0.5, buckets) == pytest.approx(0.25)
    assert quantile(0.95, buckets) == pytest.approx(0.475)
    assert quantile(0.5, {0.1: 0.0, float("inf"): 0.0}) is None
    assert quantile(0.99, {0.1: 0.0, float("inf"): 4.0}) == 0.1  # all above the last bound: that bound


@needs_chromium
def test_hostile_alias_is_text_in_chromium(tmp_path: Path) -> None:
    with served(_app(tmp_path, aliases=(HOSTILE, HOSTILE_IMG, "plain"))) as url, browser(tmp_path) as page:
        page.goto(f"{url}/ui")
        page.wait_for("document.querySelectorAll('#routes tbody tr').length === 3", 10)
        shown = page.eval("[...document.querySelectorAll('#routes tbody tr')].map(r => r.dataset.alias)")
        assert shown == [HOSTILE, HOSTILE_IMG, "plain"]
        assert page.eval("document.querySelector('#routes tbody').textContent").count(HOSTILE) == 1
        assert page.eval("document.querySelectorAll('main script, main img').length") == 0
        time.sleep(2.5)  # a second poll redraws it all
        page.pump()
        assert page.console == [] and page.exceptions == []
        assert page.requests and all(u.startswith(url) for u in page.requests), page.requests


@needs_chromium
def test_the_buttons_start_and_stop_a_model_in_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeLifecycle(monkeypatch)
    with served(_app(tmp_path, managed=True, aliases=("a", "b"))) as url, browser(tmp_path) as page:
        page.goto(f"{url}/ui")
        page.wait_for("document.querySelectorAll('#models tbody tr').length === 2", 10)
        page.eval("document.querySelector('tr[data-model=m0] button[data-action=start]').click()")
        page.wait_for("document.querySelector('tr[data-model=m0]').dataset.state === 'running'", 10)
        assert page.eval("!!document.querySelector('#pools .seg[data-kind=model][data-name=m0]')")
        page.eval("window.confirm = () => true")  # the stop asks first
        page.eval("document.querySelector('tr[data-model=m0] button[data-action=stop]').click()")
        page.wait_for("document.querySelector('tr[data-model=m0]').dataset.state === 'stopped'", 10)
        page.wait_for("!document.querySelector('#pools .seg[data-kind=model]')", 5)
        page.pump()
        assert page.console == [] and page.exceptions == []
