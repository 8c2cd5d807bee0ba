"""The gateway's Anthropic Messages and OpenAI Responses surfaces against tiny FAKE upstreams
(tests/gateway_surface_fakes.py): aliases, per-API defaults/override, keys (Bearer and x-api-key), limits,
Anthropic-shaped errors, usage and TTFT in /metrics, response-id routing, a backend lacking a surface,
hang-ups, the probes of `/` and the access log of every request (#34, #40).

The gateway runs for real (uvicorn on a free port); only the upstreams are fakes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway_fakes import UvicornThread, fake_dying_stream_server, fake_silent_server
from gateway_surface_fakes import FakeSurfacesUpstream
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore
from llmdeck.gateway.metrics import END_MARKERS, UsageSniffer
from llmdeck.settings import Settings
from repo_paths import ROOT

FAST = (
    "timeouts: {connect_s: 1, first_byte_s: 2, response_s: 2, idle_s: 3}\n"
    "health: {interval_s: 60, timeout_s: 0.5}\n"
)
MSG = [{"role": "user", "content": "hi"}]


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
def upstream(**kw: Any) -> Iterator[tuple[FakeSurfacesUpstream, str]]:
    fake = FakeSurfacesUpstream(**kw)
    with UvicornThread(fake.app) as server:
        yield fake, server.url


def route(alias: str, url: str, extra: str = "") -> str:
    return f"  - model: {alias}\n    backends: ['{url}']\n{extra}"


def messages(model: str = "a", **extra: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 16, "messages": MSG, **extra}


def test_alias_and_defaults_per_api(settings: Settings, tmp_path: Path) -> None:
    generic = (
        "    defaults: {max_tokens: 64, stop: ['X'], chat_template_kwargs: {enable_thinking: false}}\n"
        "    override: {temperature: 0.1}\n"
    )
    own = "    responses:\n      defaults: {max_output_tokens: 99}\n      override: {top_p: 0.5}\n"
    with upstream() as (up, url):
        cfg = "routes:\n" + route("a", url, generic) + route("b", url, generic + own) + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            r = httpx.post(f"{gw}/v1/messages?beta=true", json=messages(max_tokens=5, temperature=1))
            assert r.status_code == 200 and r.json()["usage"] == {"input_tokens": 9, "output_tokens": 8}
            assert httpx.post(
                f"{gw}/v1/messages/count_tokens", json={"model": "a", "messages": MSG}
            ).json() == {
                "input_tokens": 9,
                "context_management": None,
            }
            for alias in ("a", "b"):
                assert (
                    httpx.post(f"{gw}/v1/responses", json={"model": alias, "input": "hi"}).status_code == 200
                )
    sent = up.bodies("/v1/messages")[0]
    assert sent is not None and sent["model"] == "fake-served"
    assert sent["max_tokens"] == 5 and sent["stop_sequences"] == ["X"] and sent["temperature"] == 0.1
    assert sent["chat_template_kwargs"] == {"enable_thinking": False} and "stop" not in sent
    assert up.requests[0][1] == "/v1/messages"  # the ?beta=true query went along (the path is the same)
    assert up.bodies("/v1/messages/count_tokens") == [{"model": "fake-served", "messages": MSG}]
    generic_resp, own_resp = up.bodies("/v1/responses")
    assert generic_resp == {
        "model": "fake-served",
        "input": "hi",
        "max_output_tokens": 64,
        "stop": ["X"],
        "chat_template_kwargs": {"enable_thinking": False},
        "temperature": 0.1,
    }
    assert own_resp == {"model": "fake-served", "input": "hi", "max_output_tokens": 99, "top_p": 0.5}


def _anthropic(r: httpx.Response, status: int, kind: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    return str(body["error"]["message"])


def test_keys_limits_and_anthropic_errors(settings: Settings, tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    alice = store.create("alice", models=["a"], rpm=2)
    with upstream() as (up, url):
        cfg = "routes:\n" + route("a", url) + route("b", url) + "keys_file: keys.json\n" + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            m = f"{gw}/v1/messages"
            assert "x-api-key" in _anthropic(httpx.post(m, json=messages()), 401, "authentication_error")
            wrong = httpx.post(m, json=messages(), headers={"x-api-key": "sk-llmdeck-wrong"})
            assert "not valid" in _anthropic(wrong, 401, "authentication_error")
            key = {"x-api-key": alice}
            assert httpx.post(m, json=messages(), headers=key).status_code == 200
            bearer = {"Authorization": f"Bearer {alice}"}
            assert (
                httpx.post(
                    f"{m}/count_tokens", json={"model": "a", "messages": MSG}, headers=bearer
                ).status_code
                == 200
            )
            _anthropic(httpx.post(m, json=messages("b"), headers=key), 403, "permission_error")
            _anthropic(httpx.post(m, json=messages("nope"), headers=key), 404, "not_found_error")
            bad = httpx.post(m, content=b"{", headers={**key, "content-type": "application/json"})
            _anthropic(bad, 400, "invalid_request_error")
            limited = httpx.post(m, json=messages(), headers=key)
            _anthropic(limited, 429, "rate_limit_error")
            assert 1 <= int(limited.headers["retry-after"]) <= 60
            # Responses (and chat) keep OpenAI's shape
            r = httpx.post(f"{gw}/v1/responses", json={"model": "a", "input": "hi"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert all("x-api-key" not in h and "authorization" not in h for *_, h in up.requests)  # key not relayed


def _sample(metrics: str, name: str, **labels: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_usage_and_ttft_in_metrics(settings: Settings, tmp_path: Path) -> None:
    with upstream() as (_, url):
        cfg = "routes:\n" + route("claude", url) + route("codex", url) + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            for stream in (False, True):
                with httpx.stream("POST", f"{gw}/v1/messages", json=messages("claude", stream=stream)) as r:
                    assert r.status_code == 200 and r.read()
                body = {"model": "codex", "input": "hi", "stream": stream}
                with httpx.stream("POST", f"{gw}/v1/responses", json=body) as r:
                    assert r.status_code == 200 and r.read()
            text = httpx.get(f"{gw}/metrics").text
    tokens = "llmdeck_gateway_tokens_total"
    assert _sample(text, tokens, route="claude", kind="prompt") == 18
    assert _sample(text, tokens, route="claude", kind="completion") == 16
    assert _sample(text, tokens, route="codex", kind="prompt") == 22
    assert _sample(text, tokens, route="codex", kind="completion") == 8
    for alias in ("claude", "codex"):
        assert _sample(text, "llmdeck_gateway_upstream_ttft_seconds_count", route=alias) == 2


def test_sniffer_reads_split_anthropic_and_responses_streams() -> None:
    anthropic = (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":9,'
        b'"output_tokens":1}}}\n\nevent: message_delta\ndata: {"type":"message_delta","usage":'
        b'{"output_tokens":8}}\n\n'
    )
    responses = (
        b'event: response.created\ndata: {"type":"response.created","response":{"usage":null}}\n\n'
        b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":'
        b'{"input_tokens":11,"output_tokens":4}}}\n\n'
    )
    for stream, want in (
        (anthropic, {"input_tokens": 9, "output_tokens": 8}),
        (responses, {"input_tokens": 11, "output_tokens": 4}),
    ):
        for cut in range(1, len(stream), 7):
            sniffer = UsageSniffer(sse=True)
            sniffer.feed(stream[:cut])
            sniffer.feed(stream[cut:])
            assert sniffer.finish() == want, cut


def test_response_ids_route_back_to_their_backend(settings: Settings, tmp_path: Path) -> None:
    with upstream(served="one") as (one, url1), upstream(served="two") as (two, url2):
        cfg = (
            "routes:\n"
            + route("a", url1)
            + route("b", url2)
            + f"  - model: both\n    backends: ['{url1}', '{url2}']\n"
            + FAST
        )
        with gateway(cfg, settings, tmp_path) as gw:
            rid = httpx.post(f"{gw}/v1/responses", json={"model": "b", "input": "hi"}).json()["id"]
            got = httpx.get(f"{gw}/v1/responses/{rid}")
            assert got.status_code == 200 and got.json()["by"] == "two"
            assert httpx.post(f"{gw}/v1/responses/{rid}/cancel").status_code == 200
            assert httpx.delete(f"{gw}/v1/responses/{rid}").status_code == 200
            unknown = httpx.get(f"{gw}/v1/responses/resp_never")
            assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "response_not_found"
            # streamed: the id comes from response.created; a previous_response_id follows it
            with httpx.stream(
                "POST", f"{gw}/v1/responses", json={"model": "both", "input": "x", "stream": True}
            ) as r:
                r.read()
            first = next(m.group(1) for m in [re.search(r'"id": "(resp_\w+)"', r.text)] if m)
            owner = "one" if first.startswith("resp_one") else "two"
            for name in ("both", "Both", "Both", "Both"):  # the alias in another case follows it too
                follow = {"model": name, "input": "y", "previous_response_id": first}
                served = httpx.post(f"{gw}/v1/responses", json=follow).json()["model"]
                assert served == owner
    by_id = [(m, p) for m, p, *_ in two.requests if p.startswith(f"/v1/responses/{rid}")]
    assert by_id == [
        ("GET", f"/v1/responses/{rid}"),
        ("POST", f"/v1/responses/{rid}/cancel"),
        ("DELETE", f"/v1/responses/{rid}"),
    ]
    assert not any(p.startswith(f"/v1/responses/{rid}") for _, p, *_ in one.requests)


def test_only_route_serves_unknown_response_id(settings: Settings, tmp_path: Path) -> None:
    with upstream() as (up, url), gateway("routes:\n" + route("a", url) + FAST, settings, tmp_path) as gw:
        r = httpx.get(f"{gw}/v1/responses/resp_elsewhere")  # not ours, but there is one backend to ask
        assert r.status_code == 404 and "not found" in r.json()["error"]["message"]
    assert up.requests[-1][:2] == ("GET", "/v1/responses/resp_elsewhere")


@pytest.mark.parametrize("missing", ["json", "text", "405"])
def test_backend_lacking_a_surface_is_named(settings: Settings, tmp_path: Path, missing: str) -> None:
    with (
        upstream(missing=missing) as (_, url),
        gateway("routes:\n" + route("a", url) + FAST, settings, tmp_path) as gw,
    ):
        sent = httpx.post(f"{gw}/v1/messages", json=messages())
        msg = _anthropic(sent, 501, "api_error")
        assert sent.headers["x-should-retry"] == "false"  # the SDKs' two retries would meet the same 501
        assert url in msg and "/v1/messages" in msg and "vLLM >= 0.12" in msg and "chat-completions" in msg
        count = httpx.post(f"{gw}/v1/messages/count_tokens", json={"model": "a", "messages": MSG})
        assert "count_tokens" in _anthropic(count, 501, "api_error")
        r = httpx.post(f"{gw}/v1/responses", json={"model": "a", "input": "hi"})
        assert r.status_code == 501 and r.json()["error"]["code"] == "surface_missing"
        assert r.headers["x-should-retry"] == "false"
        assert url in r.json()["error"]["message"] and "/v1/responses" in r.json()["error"]["message"]


def test_a_503_no_retry_will_help_is_no_overloaded_error_on_messages() -> None:
    """A 503 reads as Anthropic's overloaded_error ("retry soon"); a model that cannot fit the budget or
    whose start failed says ``x-should-retry: false``, and had still been typed overloaded_error, which
    clients retry by its type. It is api_error now, with the header kept; other 503s stay overloaded."""
    from llmdeck.gateway.proxy import openai_error
    from llmdeck.gateway.refusals import NO_RETRY
    from llmdeck.gateway.surfaces import reshape_error

    final = reshape_error(openai_error(503, "cannot fit", "service_unavailable", **NO_RETRY), "messages")
    assert json.loads(bytes(final.body))["error"]["type"] == "api_error"
    assert final.headers["x-should-retry"] == "false"
    busy = reshape_error(
        openai_error(503, "down", "service_unavailable", **{"Retry-After": "10"}), "messages"
    )
    assert json.loads(bytes(busy.body))["error"]["type"] == "overloaded_error"
    assert busy.headers["retry-after"] == "10"


def test_a_backend_past_its_timeout_is_anthropics_timeout_error(settings: Settings, tmp_path: Path) -> None:
    """Anthropic's 504 is ``timeout_error`` (its errors page); the gateway had said ``api_error``, the
    type of its 500s (the anthropic SDK's GatewayTimeoutError then carried ``type: api_error``)."""
    with (
        fake_silent_server(answer_probe=True) as hung,
        gateway("routes:\n" + route("a", hung) + FAST, settings, tmp_path) as gw,
    ):
        r = httpx.post(f"{gw}/v1/messages", json=messages(), timeout=10)
        msg = _anthropic(r, 504, "timeout_error")
        assert "no answer within 2 s" in msg
        assert r.headers["x-should-retry"] == "false"  # the whole answer's wait: not three times over


def test_api_error_404_is_relayed_not_called_missing(settings: Settings, tmp_path: Path) -> None:
    served = "routes:\n  - model: a\n    backends: [{url: '%s', model: not-served}]\n"
    with upstream() as (_, url), gateway(served % url + FAST, settings, tmp_path) as gw:
        r = httpx.post(f"{gw}/v1/messages/count_tokens", json={"model": "a", "messages": MSG})
        assert r.status_code == 404 and r.json()["error"]["message"] == "no such model"


def test_messages_stream_hang_up_reaches_the_backend(settings: Settings, tmp_path: Path) -> None:
    with (
        upstream(forever=True) as (up, url),
        gateway("routes:\n" + route("a", url) + FAST, settings, tmp_path) as gw,
    ):
        with httpx.stream("POST", f"{gw}/v1/messages", json=messages(stream=True), timeout=10) as r:
            for chunk in r.iter_raw():
                if b"message_start" in chunk:
                    break
        assert up.finished.wait(10) and up.outcome == "client_gone"


def test_a_hang_up_after_the_last_event_is_a_complete_reply_not_an_abort(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Codex closes its connection at `response.completed`, before the backend ends the stream: the
    access log must say 200 (seen as 499 in CI's real Codex run through the gateway), while a hang-up
    before the end stays 499."""
    body = {"model": "a", "input": "hi", "stream": True}
    with (
        upstream(forever=True) as (_, url),
        gateway("routes:\n" + route("a", url) + FAST, settings, tmp_path) as gw,
        caplog.at_level(logging.INFO, "llmdeck.gateway.access"),
    ):
        with httpx.stream("POST", f"{gw}/v1/responses", json=body, timeout=10) as r:
            seen = b""
            for chunk in r.iter_raw():
                seen += chunk
                if b"response.completed" in seen and seen.endswith(b"\n\n"):
                    break
        with httpx.stream("POST", f"{gw}/v1/messages", json=messages(stream=True), timeout=10) as r:
            for chunk in r.iter_raw():
                if b"message_start" in chunk:
                    break
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(_access(caplog, "POST")) < 2:
            time.sleep(0.05)
    lines = _access(caplog, "POST")
    assert any(x.startswith("POST /v1/responses") and "status=200" in x for x in lines), lines
    assert any(x.startswith("POST /v1/messages") and "status=499" in x for x in lines), lines


def _access(caplog: pytest.LogCaptureFixture, method: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "llmdeck.gateway.access" and r.getMessage().startswith(method)
    ]


def test_sniffer_marks_the_end_of_a_stream_split_anywhere() -> None:
    end = b'event: response.completed\ndata: {"type":"response.completed","response":{}}\n\n'
    for cut in range(1, len(end)):
        sniffer = UsageSniffer(sse=True)
        sniffer.feed(b'data: {"type":"response.output_text.delta","delta":"hi"}\n\n' + end[:cut])
        sniffer.feed(end[cut:])
        assert sniffer.completed, cut
    for stream in (b"data: [DONE]\n\n", b"event: message_stop\ndata: {}\n\n"):
        sniffer = UsageSniffer(sse=True)
        sniffer.feed(stream)
        assert sniffer.completed
    sniffer = UsageSniffer(sse=True)
    sniffer.feed(b'data: {"choices":[{"delta":{"content":"data: [DONE]"}}]}\n\n')
    assert not sniffer.completed


def test_messages_stream_broken_ends_with_anthropic_error_event(settings: Settings, tmp_path: Path) -> None:
    with fake_dying_stream_server() as url:
        cfg = "routes:\n" + route("a", url) + FAST
        with (
            gateway(cfg, settings, tmp_path) as gw,
            httpx.stream("POST", f"{gw}/v1/messages", json=messages(stream=True), timeout=10) as r,
        ):
            text = r.read().decode()
    assert 'event: error\ndata: {"type": "error", "error": {"type": "api_error"' in text


def test_root_probes_and_every_request_logged(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.create("ci")
    with upstream() as (_, url):
        cfg = "routes:\n" + route("a", url) + "keys_file: keys.json\n" + FAST
        with gateway(cfg, settings, tmp_path) as gw, caplog.at_level(logging.INFO, "llmdeck.gateway.access"):
            assert httpx.head(f"{gw}/").status_code == 200 and httpx.get(f"{gw}/").status_code == 200
            assert httpx.get(f"{gw}/v1/models").status_code == 401
            assert httpx.get(f"{gw}/v1/models", headers={"x-api-key": key}).status_code == 200
            wrong = httpx.get(f"{gw}/v1/models", headers={"Authorization": "Bearer sk-llmdeck-wrong"})
            assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
            time.sleep(0.1)
    lines = [r.getMessage() for r in caplog.records if r.name == "llmdeck.gateway.access"]
    assert [ln.split(" ms=")[0] for ln in lines] == [
        "HEAD / route=- key=- backend=- status=200",
        "GET / route=- key=- backend=- status=200",
        "GET /v1/models route=- key=- backend=- status=401 outcome=unauthorized",
        "GET /v1/models route=- key=ci backend=- status=200",
        "GET /v1/models route=- key=- backend=- status=401 outcome=unauthorized",
    ]
    assert key not in "\n".join(lines)


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_overhead_benchmark_reads_both_apis_through_the_gateway(
    settings: Settings, tmp_path: Path, api: str
) -> None:
    """benchmarks/_surfaces.py against the fake paced server, direct and through the gateway."""
    import asyncio
    import subprocess
    import sys

    bench = ROOT / "benchmarks"
    sys.path.insert(0, str(bench))
    from _surfaces import PATHS, body_for, one_api

    from llmdeck.util.net import free_port

    port = free_port()
    argv = [sys.executable, str(bench / "fake_paced_server.py"), "--port", str(port), "--ttft-ms", "5"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        with gateway("routes:\n" + route("bench", url) + FAST, settings, tmp_path) as gw:

            async def both() -> list[dict[str, Any]]:
                async with httpx.AsyncClient(timeout=10) as client:
                    return [
                        await one_api(client, base + PATHS[api], body_for(api, model, "hi", 6), {}, api)
                        for base, model in ((url, "fake-paced"), (gw, "bench"))
                    ]

            results = asyncio.run(both())
            metrics = httpx.get(f"{gw}/metrics").text
    finally:
        proc.terminate()
        proc.wait(10)
    assert [(r["ok"], r["events"]) for r in results] == [(True, 6), (True, 6)]
    assert all(r["ttft"] is not None and r["ttft"] < r["total"] for r in results)
    assert _sample(metrics, "llmdeck_gateway_tokens_total", route="bench", kind="completion") == 6


def test_fold_system_moves_claude_codes_second_system_message(settings: Settings, tmp_path: Path) -> None:
    """`messages: {fold_system: true}`: Claude Code's mid-conversation system message (which vLLM 0.22's
    Messages API refuses; 2.1.197 sends a string, 2.1.332 a list of text blocks, then a string once a tool
    ran) reaches the backend as the end of the top-level `system`; without the flag the body is relayed
    as sent."""
    body = messages(
        system=[{"type": "text", "text": "You are Claude Code."}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "system", "content": "Available agent types: claude"},
            {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
        ],
    )
    folded = "    messages:\n      fold_system: true\n"
    with upstream() as (up, url):
        cfg = "routes:\n" + route("a", url) + route("b", url, folded) + FAST
        with gateway(cfg, settings, tmp_path) as gw:
            for alias in ("a", "b"):
                assert httpx.post(f"{gw}/v1/messages", json={**body, "model": alias}).status_code == 200
            counted = httpx.post(f"{gw}/v1/messages/count_tokens", json={**body, "model": "b"})
            assert counted.status_code == 200
    (count,) = up.bodies("/v1/messages/count_tokens")  # counted as it will be sent (H200: 400 unfolded)
    assert count is not None and [m["role"] for m in count["messages"]] == ["user"]
    plain, fixed = up.bodies("/v1/messages")
    assert plain is not None and [m["role"] for m in plain["messages"]] == ["user", "system", "system"]
    assert fixed is not None and [m["role"] for m in fixed["messages"]] == ["user"]
    assert fixed["system"] == [
        {"type": "text", "text": "You are Claude Code."},
        {"type": "text", "text": "Available agent types: claude"},
        {"type": "text", "text": "# Environment"},
    ]


@pytest.mark.parametrize(
    ("system", "content"),
    [({"type": "text", "text": "KEEP-ME"}, "x"), (5, "x"), ("s", {"type": "text", "text": "KEEP-ME"})],
)
def test_fold_system_leaves_a_body_it_cannot_fold_as_sent(system: Any, content: Any) -> None:
    """A `system` (or a system message's content) that is an object or a number had been dropped
    (KEEP-ME gone, 5 became []): such a body goes on as sent, for the backend's own error."""
    from llmdeck.gateway.surfaces import fold_system_messages

    body = {
        "system": system,
        "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": content}],
    }
    before = repr(body)
    fold_system_messages(body)
    assert repr(body) == before


@pytest.mark.parametrize("marker", [m.decode() for m in END_MARKERS])
def test_every_end_marker_ends_the_stream_for_the_sniffer(marker: str) -> None:
    """UsageSniffer.feed looks for three words before the exact markers (a per-chunk saving): every marker
    must hold one of them, or a stream that ended would count as aborted at a client's hang-up."""
    sniffer = UsageSniffer(sse=True)
    sniffer.feed(b'data: {"x": 1}\n\n')
    assert not sniffer.completed
    sniffer.feed(marker.encode() + b"\n\n")
    assert sniffer.completed


@pytest.mark.parametrize(
    ("data", "end"),
    [
        (b"data: 1\n\n", 9),  # whole events: the fast path
        (b"data: 1\n\ndata: 2", 9),  # a part of the next held back
        (b"data: 1\r\n\r\ndata: 2", 11),
        (b"data: 1\r\rdata: 2\r", 9),
        (b"data: 1\r\n\n", 10),  # CRLF then an LF blank line: an end too
        (b"data: 1\n", 0),
        (b"", 0),
    ],
)
def test_event_end_finds_the_last_whole_event(data: bytes, end: int) -> None:
    from llmdeck.gateway.relay import event_end

    assert event_end(data) == end


def test_the_responses_trail_numbers_after_the_last_event_it_saw() -> None:
    """The trail reads the last sequence_number only when a broken stream is ended."""
    from llmdeck.gateway.surfaces import ResponsesTrail

    trail = ResponsesTrail()
    for n in range(3):
        trail.feed(f'event: x\ndata: {{"type": "x", "sequence_number": {n}}}\n\n'.encode())
    trail.feed(b": a comment, no number\n\n")
    assert trail.numbered({"type": "error"})["sequence_number"] == 3
    assert trail.numbered({"type": "response.failed"})["sequence_number"] == 4
