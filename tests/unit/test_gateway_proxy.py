"""The gateway's proxying against tiny FAKE upstreams (tests/gateway_fakes.py): streaming without buffering,
silent and unreachable backends, retries, mid-stream death, disconnects, keys, limits, metrics.

The gateway runs for real (uvicorn on a free port); only the upstreams are fakes.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cli_helpers import run_cli
from gateway_fakes import (
    FakeOpenAIUpstream,
    UvicornThread,
    fake_dying_stream_server,
    fake_html_server,
    fake_silent_server,
)
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore
from llmdeck.settings import Settings
from llmdeck.util.net import free_port

FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 1, response_s: 1, idle_s: 2}\n"
    "health: {interval_s: 60, timeout_s: 0.5}\n"
)


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state")


@contextlib.contextmanager
def gateway(yaml_text: str, settings: Settings, tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    loaded = parse_config(yaml_text, source=path, settings=settings)
    with UvicornThread(build_app(loaded)) as server:
        yield server.url


@contextlib.contextmanager
def fake(mode: str = "normal") -> Iterator[FakeOpenAIUpstream]:
    upstream = FakeOpenAIUpstream(mode=mode)
    with UvicornThread(upstream.app) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


def chat(model: str = "a", **extra: object) -> dict[str, object]:
    return {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}


def test_defaults_override_and_alias_reach_the_upstream(settings: Settings, tmp_path: Path) -> None:
    with fake() as up:
        cfg = (
            f"routes:\n  - model: a\n    backends: ['{up.url}']\n"  # type: ignore[attr-defined]
            "    defaults:\n      chat_template_kwargs: {enable_thinking: false}\n      max_tokens: 64\n"
            "    override: {temperature: 0, top_k: null}\n" + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            r = httpx.post(
                f"{gw}/v1/chat/completions",
                json=chat(max_tokens=8, top_k=5, temperature=1, chat_template_kwargs={"x": 1}),
                headers={"Authorization": "Bearer nope"},
            )
            assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2
            sent = up.bodies[-1]
            assert sent["model"] == "fake-served"  # the alias became the backend's served name
            assert sent["max_tokens"] == 8 and sent["temperature"] == 0 and "top_k" not in sent
            assert sent["chat_template_kwargs"] == {"x": 1, "enable_thinking": False}
            assert "authorization" not in up.headers[-1]  # the client's key never goes upstream
            models = httpx.get(f"{gw}/v1/models").json()["data"]
            assert [m["id"] for m in models] == ["a"] and models[0]["max_model_len"] == 1024
            assert httpx.post(f"{gw}/v1/chat/completions", json=chat("zzz")).status_code == 404
            # pass-through of another /v1 path, routed by its model
            r = httpx.post(f"{gw}/v1/embeddings", json={"model": "a", "input": "x"})
            assert r.status_code == 200 and up.bodies[-1]["model"] == "fake-served"
            assert "max_tokens" not in up.bodies[-1]  # defaults are for (chat) completions only


@pytest.mark.parametrize("asked", [None, "identity"])
def test_the_backend_is_asked_for_no_compression(
    settings: Settings, tmp_path: Path, asked: str | None
) -> None:
    """The client's Accept-Encoding is dropped; httpx then asked the backend for "gzip, deflate": a
    backend that compresses (nginx in front of it) had its gzip relayed to a client that never asked."""
    with fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            headers = {"Accept-Encoding": asked} if asked else {}
            assert httpx.post(f"{gw}/v1/chat/completions", json=chat(), headers=headers).status_code == 200
        assert up.headers[-1]["accept-encoding"] == "identity"  # type: ignore[attr-defined]


def test_stream_is_relayed_chunk_by_chunk(settings: Settings, tmp_path: Path) -> None:
    """The first event reaches the client while the upstream still holds the rest."""
    with fake("hold") as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with (
            gateway(cfg, settings, tmp_path) as gw,
            httpx.stream("POST", f"{gw}/v1/chat/completions", json=chat(stream=True), timeout=5) as r,
        ):
            chunks = r.iter_raw()
            first = next(chunks)
            assert b"first" in first and not up.finished.is_set()  # the upstream has not finished
            up.release.set()
            rest = b"".join(chunks)
            assert b"second" in rest and rest.endswith(b"data: [DONE]\n\n")
        assert up.outcome == "done"


def test_silent_backend_gives_504_within_seconds(settings: Settings, tmp_path: Path) -> None:
    with fake_silent_server(answer_probe=True) as silent:  # up by its probes, silent to requests
        cfg = f"routes:\n  - model: a\n    backends: ['{silent}']\n" + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            for stream in (True, False):
                t0 = time.monotonic()
                r = httpx.post(f"{gw}/v1/chat/completions", json=chat(stream=stream), timeout=10)
                assert r.status_code == 504 and time.monotonic() - t0 < 8  # 1 s timeout; loaded CI: slack
                assert r.json()["error"]["type"] == "upstream_error"
                # after the whole answer's timeout (response_s) the SDKs' two retries would wait it twice
                # more; a stream's first-byte timeout is short, a retry may well be answered
                assert r.headers.get("x-should-retry") == (None if stream else "false")


def test_unreachable_backend_then_next_replica(settings: Settings, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{dead}']\n" + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            r = httpx.post(f"{gw}/v1/chat/completions", json=chat(), timeout=10)
            assert r.status_code == 503 and r.json()["error"]["code"] == "backend_down"
        cfg = f"routes:\n  - model: a\n    backends: ['{dead}', '{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            for _ in range(3):  # the dead one is tried first at most once, then it is marked down
                assert httpx.post(f"{gw}/v1/chat/completions", json=chat(), timeout=10).status_code == 200
            status = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"]
            assert status[0]["healthy"] is False and status[1]["healthy"] is True


def test_a_backend_that_fails_its_first_probe_is_down_not_healthy(settings: Settings, tmp_path: Path) -> None:
    """The gateway probes before it serves: a backend that never answered shows down, not "healthy"."""
    dead = f"http://127.0.0.1:{free_port()}"
    with fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{dead}', '{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            backends = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"]
    assert [b["healthy"] for b in backends] == [False, True]
    assert "cannot connect" in backends[0]["last_error"]


def test_a_backend_never_checked_shows_unchecked() -> None:
    from llmdeck.gateway.config import ResolvedBackend
    from llmdeck.gateway.routing import BackendState

    state = BackendState(ResolvedBackend(url="http://127.0.0.1:9", label="b", served_model=None))
    assert state.snapshot()["healthy"] is None  # not "healthy": nothing checked it yet
    state.mark_up()
    assert state.snapshot()["healthy"] is True


def test_every_backend_down_gets_503_at_once(settings: Settings, tmp_path: Path) -> None:
    """Known down (a silent backend: its probes time out) and still down when re-probed: a 503 within
    the probe's timeout, not the whole answer's (60 s here), streamed or not, in each API's shape."""
    slow = (
        "timeouts: {connect_s: 1, first_byte_s: 60, response_s: 60, idle_s: 60}\n"
        "health: {interval_s: 60, timeout_s: 0.5}\n"
    )
    with fake_silent_server() as silent:
        cfg = f"routes:\n  - model: a\n    backends: ['{silent}']\n" + slow
        with gateway(cfg, settings, tmp_path) as gw:
            for stream in (False, True, False):
                t0 = time.monotonic()
                r = httpx.post(f"{gw}/v1/chat/completions", json=chat(stream=stream), timeout=30)
                assert r.status_code == 503 and time.monotonic() - t0 < 10, r.text  # not first_byte_s' 60
                error = r.json()["error"]
                assert error["code"] == "backend_down" and silent in error["message"]
                assert (
                    "no answer to /v1/models within 0.5 s" in error["message"]
                    and "Python" not in error["message"]
                )
                assert int(r.headers["retry-after"]) >= 1
            body = {"model": "a", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
            r = httpx.post(f"{gw}/v1/messages", json=body, timeout=30)
            assert r.status_code == 503 and r.json()["error"]["type"] == "overloaded_error"


def test_a_recovered_backend_is_used_before_the_next_periodic_probe(
    settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    cfg = f"routes:\n  - model: a\n    backends: ['http://127.0.0.1:{port}']\n" + FAST  # probes: every 60 s
    with gateway(cfg, settings, tmp_path) as gw:
        assert httpx.post(f"{gw}/v1/chat/completions", json=chat(), timeout=10).status_code == 503
        upstream = FakeOpenAIUpstream()
        with UvicornThread(upstream.app, port=port):
            time.sleep(1.1)  # a backend probed within the last second is not probed again
            r = httpx.post(f"{gw}/v1/chat/completions", json=chat(), timeout=10)
            assert r.status_code == 200 and upstream.bodies
            status = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"]
            assert status[0]["healthy"] is True


def test_a_web_page_is_no_model_reply(settings: Settings, tmp_path: Path) -> None:
    """A 200 HTML page (a captive portal, a website's URL) is a 502 that says so; a replica serves."""
    with fake_html_server() as html, fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{html}']\n" + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            for stream in (False, True):
                time.sleep(1.1)  # marked down by the last one: re-probed (a JSON /v1/models: up), then tried
                r = httpx.post(f"{gw}/v1/chat/completions", json=chat(stream=stream), timeout=10)
                assert r.status_code == 502 and r.headers["content-type"] == "application/json", r.text
                message = r.json()["error"]["message"]
                assert "text/html" in message and "web page" in message and "<html" not in r.text
        cfg = f"routes:\n  - model: a\n    backends: ['{html}', '{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            for _ in range(3):  # the HTML one answers first at most once, then it is marked down
                r = httpx.post(f"{gw}/v1/chat/completions", json=chat(), timeout=10)
                assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hi"


def test_backend_dying_mid_stream_ends_with_error_event(settings: Settings, tmp_path: Path) -> None:
    with fake_dying_stream_server() as dying, fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{dying}', '{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            served_by_dying = False
            for _ in range(2):  # round robin: one of the first two requests goes to the dying one
                with httpx.stream(
                    "POST", f"{gw}/v1/chat/completions", json=chat(stream=True), timeout=10
                ) as r:
                    body = b"".join(r.iter_raw())
                if b"part0" in body:
                    served_by_dying = True
                    last = body.strip().split(b"\n\n")[-1]
                    assert json.loads(last[len(b"data: ") :])["error"]["code"] == "stream_broken"
                    break
            assert served_by_dying
            r = httpx.post(f"{gw}/v1/chat/completions", json=chat(stream=True), timeout=10)
            assert b"second" in r.content  # the gateway kept serving, on the other backend
            metrics = httpx.get(f"{gw}/metrics").text
            assert 'reason="stream_broken"' in metrics


@pytest.mark.parametrize("mode", ["forever", "flood"])  # a trickle, and a flood that fills the buffers
def test_client_disconnect_cancels_upstream(settings: Settings, tmp_path: Path, mode: str) -> None:
    with fake(mode) as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            with httpx.stream("POST", f"{gw}/v1/chat/completions", json=chat(stream=True), timeout=5) as r:
                assert b"first" in next(r.iter_raw())
            # leaving the block closed our connection mid-stream
            # 20 s, under the flood's 30: three threads of one process share a GIL and a loaded CI
            # machine's 2 cores (5 s was once too short there; 0.0 to 5.1 s measured under load)
            assert up.finished.wait(20) and up.outcome == "client_gone"
            deadline = time.monotonic() + 15  # loaded CI: the gateway's thread shares the GIL
            while time.monotonic() < deadline:
                backend = httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]
                if backend["outstanding"] == 0:
                    break
                time.sleep(0.05)
            assert backend["outstanding"] == 0
            assert 'status="499"' in httpx.get(f"{gw}/metrics").text


def test_keys_models_and_rpm(settings: Settings, tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    alice = store.create("alice", models=["a"], rpm=2)
    bob = store.create("bob")
    carol = store.create("carol")
    with fake() as up:
        cfg = (
            f"routes:\n  - model: a\n    backends: ['{up.url}']\n"  # type: ignore[attr-defined]
            f"  - model: b\n    backends: ['{up.url}']\n"  # type: ignore[attr-defined]
            "keys_file: keys.json\n" + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            url = f"{gw}/v1/chat/completions"
            assert httpx.post(url, json=chat()).status_code == 401
            assert (
                httpx.post(url, json=chat(), headers={"Authorization": "Bearer sk-llmdeck-wrong"}).status_code
                == 401
            )
            # a stale Bearer beside a good x-api-key (Claude Code, both variables set): the good one counts
            both = {"Authorization": "Bearer sk-llmdeck-stale", "x-api-key": carol}
            assert httpx.post(url, json=chat(), headers=both).status_code == 200
            wrong = httpx.post(url, json=chat(), headers={**both, "x-api-key": "sk-llmdeck-bad"})
            assert "read from Authorization and x-api-key" in wrong.json()["error"]["message"]
            h_alice = {"Authorization": f"Bearer {alice}"}
            assert httpx.post(url, json=chat("b"), headers=h_alice).status_code == 403
            ids = [m["id"] for m in httpx.get(f"{gw}/v1/models", headers=h_alice).json()["data"]]
            assert ids == ["a"]
            assert httpx.get(f"{gw}/v1/models").status_code == 401
            assert [httpx.post(url, json=chat(), headers=h_alice).status_code for _ in range(2)] == [200, 200]
            limited = httpx.post(url, json=chat(), headers=h_alice)
            assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 60
            assert (
                httpx.post(url, json=chat("b"), headers={"Authorization": f"Bearer {bob}"}).status_code == 200
            )
            metrics = httpx.get(f"{gw}/metrics").text
            assert 'key="alice"' in metrics and 'status="429"' in metrics and alice not in metrics
            assert 'llmdeck_gateway_tokens_total{key="alice",kind="completion",route="a"} 4.0' in metrics
            store.revoke("bob")
            time.sleep(1.1)  # the key ring re-reads the file at most once a second
            assert (
                httpx.post(url, json=chat("b"), headers={"Authorization": f"Bearer {bob}"}).status_code == 401
            )
            # a keys file that turns to bytes that are not UTF-8 (it had answered 500 with a traceback):
            # the keys read last stay in force
            store.path.write_bytes(b"\x00\xff\xfe binary")
            time.sleep(1.1)
            h_carol = {"Authorization": f"Bearer {carol}"}
            assert httpx.post(url, json=chat("b"), headers=h_carol).status_code == 200


def test_the_first_key_made_closes_a_running_open_gateway(settings: Settings, tmp_path: Path) -> None:
    """`keys create` on an open gateway ("no restart needed"): requests without a key had gone on
    getting 200 (till a /metrics scrape happened to re-read the keys file)."""
    with fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            url = f"{gw}/v1/chat/completions"
            assert httpx.post(url, json=chat()).status_code == 200  # open: no keys file
            key = KeyStore(settings.state_dir / "gateway" / "keys.json").create("dave")
            time.sleep(1.2)  # the keys file is looked at once a second at most
            assert httpx.post(url, json=chat()).status_code == 401
            assert httpx.post(url, json=chat(), headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_gateway_up_status_down_in_background(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cli_helpers import run_cli

    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    port = free_port()
    with fake() as up:
        cfg = tmp_path / "gw.yaml"
        cfg.write_text(f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST)  # type: ignore[attr-defined]
        code, out, err = run_cli(["gateway", "up", "--config", str(cfg), "--port", str(port)], capsys)
        assert code == 0, err
        try:
            assert f"127.0.0.1:{port}/v1" in out
            body = {"model": "a", "messages": [{"role": "user", "content": "PROMPT-TEXT-42"}]}
            assert httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body).status_code == 200
            assert run_cli(["gateway", "up", "--config", str(cfg), "--port", str(port)], capsys)[0] == 2
            code, out, _ = run_cli(["gateway", "status", "--json"], capsys)
            data = json.loads(out)
            assert code == 0 and data["state"] == "running" and data["keys_required"] is False
            assert data["routes"][0]["requests"] == 1 and data["routes"][0]["backends"][0]["healthy"] is True
            code, out, _ = run_cli(["gateway", "status"], capsys)
            assert code == 0 and "fake-served" in out
            from llmdeck.gateway.service import gateway_target

            target = gateway_target(Settings(state_dir=tmp_path / "state"))  # `connect --server gateway`
            assert target is not None and target.base_url == f"http://127.0.0.1:{port}"
        finally:
            code, out, _ = run_cli(["gateway", "down"], capsys)
        assert code == 0 and "stopped" in out
        log_file = tmp_path / "state" / "logs" / "gateway.log"
        assert log_file.stat().st_mode & 0o777 == 0o600  # as the servers' logs (it had been 0644)
        log = log_file.read_text()
        assert "POST /v1/chat/completions route=a key=- backend=" in log and "status=200" in log
        assert "PROMPT-TEXT-42" not in log  # no prompts in the access log


def test_two_gateway_ups_at_once_start_one_gateway_and_record_it(tmp_path: Path) -> None:
    """Both had checked "none recorded" and spawned one; the record could name the one that lost the
    port while the other served on, unrecorded (status "dead", down "gone"). One at a time now."""
    import concurrent.futures

    from llmdeck.errors import AlreadyExistsError, UsageError
    from llmdeck.gateway.service import load_record, start_background, stop

    settings = Settings(state_dir=tmp_path / "state")
    cfg = tmp_path / "gw.yaml"
    cfg.write_text("routes:\n  - model: a\n    backends: ['http://127.0.0.1:9']\n" + FAST)
    port = free_port()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [
            pool.submit(start_background, cfg, "127.0.0.1", port, settings, insecure=False) for _ in range(2)
        ]
        outcomes = [r.exception() or r.result() for r in runs]
    try:
        started = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(started) == 1 and all(
            isinstance(o, AlreadyExistsError | UsageError | type(started[0])) for o in outcomes
        )
        record = load_record(settings)
        assert record is not None and record.pid == started[0].pid  # type: ignore[union-attr]
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
    finally:
        stop(settings)


def test_each_replica_gets_its_own_served_name(settings: Settings, tmp_path: Path) -> None:
    first, second = FakeOpenAIUpstream(served="name-one"), FakeOpenAIUpstream(served="name-two")
    with UvicornThread(first.app) as one, UvicornThread(second.app) as two:
        cfg = f"routes:\n  - model: a\n    backends: ['{one.url}', '{two.url}']\n" + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            for _ in range(2):
                assert httpx.post(f"{gw}/v1/chat/completions", json=chat(), timeout=10).status_code == 200
    assert [b["model"] for b in first.bodies + second.bodies] == ["name-one", "name-two"]


def test_two_routes_on_one_server_share_its_key(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key one route's entry names goes with every entry of that server (the first entry's, keyless,
    had been sent for both: the keyed route's requests went without its key); two keys for one server
    are refused naming both lines."""
    from llmdeck.errors import ConfigError

    monkeypatch.setenv("K_ONE", "sk-one")
    monkeypatch.setenv("K_TWO", "sk-two")
    with fake() as up:
        url = up.url  # type: ignore[attr-defined]
        cfg = (
            f"routes:\n  - {{model: plain, backends: ['{url}']}}\n"
            f"  - {{model: keyed, backends: [{{url: '{url}', api_key_env: K_ONE}}]}}\n" + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            for alias in ("keyed", "plain"):
                assert (
                    httpx.post(f"{gw}/v1/chat/completions", json=chat(alias), timeout=10).status_code == 200
                )
    assert [h.get("authorization") for h in up.headers[-2:]] == ["Bearer sk-one"] * 2
    two = cfg.replace("['" + url + "']", "[{url: '" + url + "', api_key_env: K_TWO}]")
    with pytest.raises(ConfigError) as exc:
        parse_config(two, source=tmp_path / "gw.yaml", settings=settings)
    assert "gw.yaml:3" in exc.value.message and "gw.yaml:2" in exc.value.message, exc.value.message
    assert "sk-" not in exc.value.message + str(exc.value.hint)


def test_two_routes_on_one_server_each_send_their_own_model(settings: Settings, tmp_path: Path) -> None:
    """One vLLM serving a base model and a LoRA adapter (`--lora-modules sql=...`), a route each: the
    routes share the server's state (health, load) but each sends its own `model:` (the first route's
    had gone for both: the adapter's alias was answered by the base model, silently); a route without
    one sends the name the server lists first."""
    with fake() as up:
        url = up.url  # type: ignore[attr-defined]
        cfg = (
            f"routes:\n  - {{model: base, backends: [{{url: '{url}', model: Qwen/Qwen3-8B}}]}}\n"
            f"  - {{model: sql, backends: [{{url: '{url}', model: sql-lora}}]}}\n"
            f"  - {{model: learned, backends: ['{url}']}}\n" + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            for alias in ("sql", "base", "learned", "sql"):
                r = httpx.post(f"{gw}/v1/chat/completions", json=chat(alias), timeout=10)
                assert r.status_code == 200, r.text
            status = httpx.get(f"{gw}/gateway/status", timeout=10).json()
    assert [b["model"] for b in up.bodies] == ["sql-lora", "Qwen/Qwen3-8B", "fake-served", "sql-lora"]
    shown = {r["model"]: r["backends"][0] for r in status["routes"]}
    assert {alias: b["served_model"] for alias, b in shown.items()} == {
        "base": "Qwen/Qwen3-8B", "sql": "sql-lora", "learned": "fake-served"
    }  # fmt: skip
    assert {b["requests"] for b in shown.values()} == {4}  # one server's state, shared


def test_check_names_a_key_limited_to_other_aliases(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check --model b` with a key allowed only `a` had said "restart the server with
    --served-model-name b"; the gateway serves b, to other keys."""
    alice = KeyStore(tmp_path / "keys.json").create("alice", models=["a"])
    with fake() as up:
        routes = "".join(f"  - model: {m}\n    backends: ['{up.url}']\n" for m in "ab")  # type: ignore[attr-defined]
        with gateway("routes:\n" + routes + "keys_file: keys.json\n" + FAST, settings, tmp_path) as gw:
            code, _, err = run_cli(
                ["check", gw, "--api-key", alice, "--model", "b", "--timeout", "5"], capsys
            )
    assert code == 2 and "does not serve 'b'" in err and "llmdeck gateway" in err
    assert "keys create NAME --models b" in err and "--served-model-name" not in err and alice not in err


def _backend(gw: str) -> dict[str, object]:
    return httpx.get(f"{gw}/gateway/status").json()["routes"][0]["backends"][0]  # type: ignore[no-any-return]


def test_what_the_client_sends_that_httpx_would_not_encode_is_no_500(
    settings: Settings, tmp_path: Path
) -> None:
    """A header that is not ASCII (``X-Title: Café app``) gave a 500 with a traceback and left the
    backend counted busy for good; it reaches the backend as sent. A lone surrogate or a body nested
    deeper than the encoder follows gave a 500 too: now a 400 in the API's shape."""
    with fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            url = f"{gw}/v1/chat/completions"
            title = "Café app クライアント".encode()
            r = httpx.post(url, json=chat(), headers=[(b"X-Title", title)])
            assert r.status_code == 200 and up.headers[-1]["x-title"] == title.decode("latin-1")
            surrogate = b'{"model": "a", "messages": [], "a": "\\ud800"}'
            deep = [b'{"model": "a", "x": ' + b"[" * n + b"]" * n + b"}" for n in range(900, 1001, 20)]
            for body, words in (
                (surrogate, "lone UTF-16 surrogate"),
                *((d, "nests too deeply") for d in deep),
            ):
                for path in ("/v1/chat/completions", "/v1/messages"):
                    r = httpx.post(gw + path, content=body, headers={"content-type": "application/json"})
                    sent = (
                        r.status_code in (200, 501) and body is not surrogate
                    )  # the fake has no /v1/messages
                    assert sent or (r.status_code == 400 and words in r.text), (path, r.text)
            assert _backend(gw)["outstanding"] == 0
            assert 'llmdeck_gateway_in_flight{route="a"} 0.0' in httpx.get(f"{gw}/metrics").text


@pytest.mark.parametrize(
    "kind", ["text/plain", "application/x-www-form-urlencoded", "application/octet-stream"]
)
def test_a_json_body_sent_as_text_plain_gets_the_alias_and_the_routes_rules(
    kind: str, settings: Settings, tmp_path: Path
) -> None:
    """A browser's fetch sends JSON as text/plain: it had reached the backend unread, with the alias
    for a model name and without the route's defaults (an override cap skipped the same way);
    `curl -d '{...}'` sends it as a form, which had been told "Say which model in the body's `model`"."""
    with fake() as up:
        cfg = (
            f"routes:\n  - model: a\n    backends: ['{up.url}']\n"  # type: ignore[attr-defined]
            "    override: {max_tokens: 64}\n" + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            body = json.dumps(chat(max_tokens=100000)).encode()
            r = httpx.post(f"{gw}/v1/chat/completions", content=body, headers={"content-type": kind})
            assert r.status_code == 200 and up.bodies[-1]["model"] == "fake-served"
            assert up.bodies[-1]["max_tokens"] == 64


@pytest.mark.parametrize(
    "path",
    ["/v1/../tokenize", "/v1/%2e%2e/tokenize", "/v1/..%2ftokenize", "/v1/chat/completions/../../../sleep"],
)
def test_a_path_that_steps_out_of_v1_is_refused(settings: Settings, tmp_path: Path, path: str) -> None:
    """``/v1/../tokenize`` had reached the backend's /tokenize (any path: vLLM's /sleep, /collective_rpc)
    with the gateway's backend key."""
    with fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            port = int(gw.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                body = json.dumps(chat()).encode()
                head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                sock.sendall(head.encode() + f"content-length: {len(body)}\r\n\r\n".encode() + body)
                reply = ""  # headers and body can come in two reads (as in test_gateway_bad_peers)
                while "steps out of its endpoint" not in reply and (chunk := sock.recv(65536)):
                    reply += chunk.decode()
    assert reply.startswith("HTTP/1.1 400") and "steps out of its endpoint" in reply and not up.bodies


@pytest.mark.parametrize(
    ("method", "path", "status", "words"),
    [
        ("POST", "/chat/completions", 404, "The API is under /v1"),
        ("POST", "/health", 405, "POST is not allowed on /health"),
        ("PUT", "/metrics", 405, "PUT is not allowed on /metrics"),
        # had been sent on to the backend, whose own error page (HTML, from a plain HTTP server) came back
        ("PUT", "/v1/chat/completions", 405, "PUT is not allowed on /v1/chat/completions"),
        ("PATCH", "/v1/messages", 405, "PATCH is not allowed on /v1/messages"),
    ],
)
def test_no_such_endpoint_is_an_api_error_not_plain_text(
    settings: Settings, tmp_path: Path, method: str, path: str, status: int, words: str
) -> None:
    cfg = "routes:\n  - model: a\n    backends: ['http://127.0.0.1:9']\n" + FAST
    with gateway(cfg, settings, tmp_path) as gw:
        r = httpx.request(method, gw + path)
    assert r.status_code == status and words in r.json()["error"]["message"]


def test_a_stream_no_one_asked_for_is_bounded_by_the_response_timeout(
    settings: Settings, tmp_path: Path
) -> None:
    """A request without ``stream`` answered with an event stream that pings forever had stayed open
    past response_s (1 s here): the deadline was dropped for any event stream."""
    with fake("forever") as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        # the health probe's 0.5 s had run out on a loaded CI box: the backend counted down, a 503
        cfg = cfg.replace("timeout_s: 0.5", "timeout_s: 5")
        with gateway(cfg, settings, tmp_path) as gw:
            t0 = time.monotonic()
            r = httpx.post(f"{gw}/v1/chat/completions", json=chat(), timeout=10)
            assert time.monotonic() - t0 < 15 and b"stopped mid-stream" in r.content  # the fake: 30 s


def test_a_body_the_encoder_cannot_follow_is_the_clients_mistake() -> None:
    """Parsed, but nested past what ``json.dumps`` follows where the gateway sends it on: a 500 had
    followed (RecursionError); now UnsendableBody, which ``forward`` answers as a 400."""
    from llmdeck.gateway.routing import BackendState
    from llmdeck.gateway.upstream import UnsendableBody, Upstream

    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    up = Upstream("POST", "/v1/chat/completions", [], b"", 1.0, {"model": "a", "x": nested})
    state = BackendState.__new__(BackendState)
    state.model_name = lambda: None  # type: ignore[method-assign]
    with pytest.raises(UnsendableBody, match="nests too deeply"):
        up.content_for(state)


def test_a_backend_urls_password_and_token_are_not_shown(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``http://user:PW@host`` and ``?api_key=`` had been printed in the access log, the "marked
    down" warning and /gateway/status (which any key holder may read)."""
    with fake() as up:
        host = up.url.split("//", 1)[1]  # type: ignore[attr-defined]
        cfg = (
            f"routes:\n  - model: a\n    backends: ['http://user:SECRETPW@{host}', "
            "'http://127.0.0.1:9/?api_key=SECRETQ']\n" + FAST
        )
        with caplog.at_level("INFO"), gateway(cfg, settings, tmp_path) as gw:
            assert httpx.post(f"{gw}/v1/chat/completions", json=chat()).status_code == 200
            status = httpx.get(f"{gw}/gateway/status").text
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("llmdeck")]  # httpx's: WARNING up
    shown = status + "\n".join(ours)
    assert any("user:<redacted>@" in line for line in ours)
    assert "user:<redacted>@" in status and "SECRETPW" not in shown and "SECRETQ" not in shown


def test_a_revoked_keys_series_leave_metrics_and_the_totals_stay(settings: Settings, tmp_path: Path) -> None:
    """`llmdeck keys revoke bob`: bob's labelled series stayed on /metrics until the gateway restarted
    (and a new key named bob inherited the old one's rpm window). Now they go at the keys file's
    re-read; the per-route totals (the latency histogram, the dashboard's sums over keys) do not drop."""
    from llmdeck.gateway.ui_sources import sample_routes

    store = KeyStore(tmp_path / "keys.json")
    alice, bob = store.create("alice"), store.create("bob", rpm=1)
    with fake() as up:
        cfg = f"routes:\n  - model: a\n    backends: ['{up.url}']\nkeys_file: keys.json\n" + FAST  # type: ignore[attr-defined]
        path = tmp_path / "gateway.yaml"
        path.write_text(cfg, encoding="utf-8")
        app = build_app(parse_config(cfg, source=path, settings=settings))
        metrics = app.state.gateway.metrics
        with UvicornThread(app) as server:
            url = f"{server.url}/v1/chat/completions"
            for key in (alice, bob):
                assert (
                    httpx.post(url, json=chat(), headers={"Authorization": f"Bearer {key}"}).status_code
                    == 200
                )
            before = httpx.get(f"{server.url}/metrics").text
            assert 'key="bob"' in before
            totals = sample_routes(metrics)["a"]
            store.revoke("bob")
            time.sleep(1.1)  # the key ring re-reads the file at most once a second
            after = httpx.get(f"{server.url}/metrics").text
            assert 'key="bob"' not in after
            for line in before.splitlines():  # alice's series and the route's totals are as they were
                if 'key="alice"' in line or 'seconds_count{route="a"}' in line:
                    assert line in after.splitlines()
            assert sample_routes(metrics)["a"] == totals
            bob = store.create("bob", rpm=1)  # a new key of that name: its own rpm window
            time.sleep(1.1)
            assert httpx.post(url, json=chat(), headers={"Authorization": f"Bearer {bob}"}).status_code == 200


def test_a_request_let_in_before_its_key_was_revoked_ends_in_the_totals_only(
    settings: Settings, tmp_path: Path
) -> None:
    """A request authenticated before `keys revoke bob` that finished after the keys file's re-read had
    labelled bob's series again: back on /metrics, never to go (the re-read that removes them was past).
    Now such a late finish counts in the route's totals only (what the dashboard sums)."""
    from llmdeck.gateway.proxy import RequestCtx
    from llmdeck.gateway.ui_sources import sample_routes

    store = KeyStore(tmp_path / "keys.json")
    store.create("alice")
    store.create("bob")
    cfg = "routes:\n  - model: a\n    backends: ['http://127.0.0.1:9']\nkeys_file: keys.json\n" + FAST
    app = build_app(parse_config(cfg, source=tmp_path / "gateway.yaml", settings=settings))
    st = app.state.gateway
    late = RequestCtx(st.metrics, "POST", "/v1/chat/completions", route="a", key="bob")
    store.revoke("bob")
    st.keys.refresh(force=True)  # the re-read: bob's series (none yet) leave /metrics
    late.ttft()
    late.finish(200, usage={"prompt_tokens": 7, "completion_tokens": 3})
    RequestCtx(st.metrics, "GET", "/v1/models", route="a", key="alice").finish(200)
    page = st.metrics.render().decode()
    assert 'key="bob"' not in page and 'key="alice"' in page
    totals = sample_routes(st.metrics)["a"]
    assert (totals.requests, totals.prompt, totals.completion) == (2, 7, 3)
    assert totals.ttft[float("inf")] == 1


def test_an_alias_in_another_case_is_its_route_unless_two_share_it(
    settings: Settings, tmp_path: Path
) -> None:
    """Ollama matches model names in any case (a client's config may say `Qwen3:30B` for `qwen3:30b`): the
    gateway's routes do too, after the exact name, and the request counts under the route's own alias. Two
    aliases that differ in case alone keep their exact names only (which one was meant is not guessed)."""
    store = KeyStore(tmp_path / "keys.json")
    alice, bob = store.create("alice", models=["qwen3:30b"]), store.create("bob")
    with fake() as up:
        url_ = up.url  # type: ignore[attr-defined]
        cfg = (
            f"routes:\n  - model: qwen3:30b\n    backends: ['{url_}']\n"
            f"  - model: Coder\n    backends: ['{url_}']\n  - model: coder\n    backends: ['{url_}']\n"
            "keys_file: keys.json\n" + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            url, h_alice = f"{gw}/v1/chat/completions", {"Authorization": f"Bearer {alice}"}
            assert httpx.post(url, json=chat("Qwen3:30B"), headers=h_alice).status_code == 200
            assert up.bodies[-1]["model"] == "fake-served"
            metrics = httpx.get(f"{gw}/metrics", headers=h_alice).text
            assert 'route="qwen3:30b"' in metrics and "Qwen3:30B" not in metrics
            h_bob = {"Authorization": f"Bearer {bob}"}
            assert httpx.post(url, json=chat("coder"), headers=h_bob).status_code == 200
            missing = httpx.post(url, json=chat("CODER"), headers=h_bob)
            assert (
                missing.status_code == 404 and "'CODER' does not exist" in missing.json()["error"]["message"]
            )


def test_the_sdks_models_retrieve_gets_the_alias(settings: Settings, tmp_path: Path) -> None:
    """`GET /v1/models/{model}` (the OpenAI SDK's `models.retrieve`; Ollama answers it too) had gone to the
    catch-all and, with several routes, got a 400 asking for the body's `model`. Now: the alias's entry (in
    any case, a name with slashes too), a 404 for one the key may not use or that does not exist."""
    import openai

    store = KeyStore(tmp_path / "keys.json")
    alice = store.create("alice", models=["Qwen/Qwen3-8B"])
    with fake() as up:
        url_ = up.url  # type: ignore[attr-defined]
        cfg = (
            f"routes:\n  - model: Qwen/Qwen3-8B\n    backends: ['{url_}']\n"
            f"  - model: b\n    backends: ['{url_}']\nkeys_file: keys.json\n" + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            client = openai.OpenAI(base_url=f"{gw}/v1", api_key=alice, max_retries=0)
            model = client.models.retrieve("qwen/qwen3-8b")
            assert (model.id, model.object, model.owned_by) == ("Qwen/Qwen3-8B", "model", "llmdeck")
            for name in ("b", "nope"):
                with pytest.raises(openai.NotFoundError) as info:
                    client.models.retrieve(name)
                assert "does not exist here (models: Qwen/Qwen3-8B)" in str(info.value)
            assert httpx.get(f"{gw}/v1/models/b").status_code == 401  # no key: as /v1/models


def test_cors_answers_a_browsers_preflight_only_when_configured(settings: Settings, tmp_path: Path) -> None:
    """`cors: {allow_origins: [...]}` lets a page on that origin call the gateway; without it no CORS
    header is sent (a browser then refuses the page's request, as it should)."""
    ask = {"Origin": "http://app.local", "Access-Control-Request-Method": "POST"}
    with fake() as up:
        base = f"routes:\n  - model: a\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(base + "cors:\n  allow_origins: ['http://app.local']\n", settings, tmp_path) as gw:
            pre = httpx.options(f"{gw}/v1/chat/completions", headers=ask)
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://app.local"
            other = httpx.options(
                f"{gw}/v1/chat/completions", headers={**ask, "Origin": "http://evil.example"}
            )
            assert "access-control-allow-origin" not in other.headers
        with gateway(base, settings, tmp_path) as gw:
            sent = httpx.post(
                f"{gw}/v1/chat/completions", json=chat(), headers={"Origin": "http://app.local"}
            )
            assert sent.status_code == 200 and "access-control-allow-origin" not in sent.headers
