"""Ollama's native API on the gateway: requests rewritten as OpenAI's, real vLLM 0.32 replies (recorded from
the CPU engine: tests/fixtures/gateway/vllm-0.32-*) rewritten as Ollama's, and the routes against a tiny
FAKE OpenAI upstream (tests/gateway_fakes.py) driven by Ollama's own Python client. The real vLLM behind
the gateway: tests/integration/test_gateway_ollama_integration.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest

from llmdeck.gateway.capabilities import capabilities
from llmdeck.gateway.ollama_replies import NdjsonStream, whole_reply
from llmdeck.gateway.ollama_shapes import OllamaRequestError, chat_body, generate_body
from llmdeck.settings import Settings
from repo_paths import TEST_FIXTURES
from test_gateway_proxy import FAST, fake, gateway

GW = TEST_FIXTURES / "gateway"


def _lines(kind: Any, name: str) -> list[dict[str, Any]]:
    stream = NdjsonStream(kind, "m", 0.0)
    raw = (GW / name).read_bytes()
    out = b"".join(stream.feed(raw[i : i + 7]) for i in range(0, len(raw), 7)) + stream.end()  # cut anywhere
    return [json.loads(line) for line in out.splitlines()]


def test_chat_body_in_openai_terms() -> None:
    body = chat_body(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "weather?", "images": ["iVBORw0KGgo="]},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"function": {"name": "a", "arguments": {"x": 1}}},
                    {"function": {"name": "b", "arguments": {}}},
                ]},
                {"role": "tool", "content": "B", "tool_name": "b"},
                {"role": "tool", "content": "A"},
            ],
            "options": {"num_predict": -1, "num_ctx": 8192, "repeat_penalty": 1.1, "top_k": 20,
                        "stop": ["x"]},
            "format": {"type": "object"},
            "think": False,
        }
    )  # fmt: skip
    msgs = body["messages"]
    assert msgs[0]["content"][1]["image_url"]["url"] == "data:image/png;base64,iVBORw0KGgo="
    calls = msgs[1]["tool_calls"]
    assert calls[0]["function"]["arguments"] == '{"x": 1}' and calls[1]["id"] == "call_1_1"
    assert msgs[2]["tool_call_id"] == "call_1_1"  # by its tool_name
    assert msgs[3]["tool_call_id"] == "call_1_0"  # no name: the oldest call still open
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}  # Ollama's default
    assert "max_tokens" not in body and "num_ctx" not in body  # -1: no limit; runtime options: vLLM's flags
    assert body["repetition_penalty"] == 1.1 and body["top_k"] == 20 and body["stop"] == ["x"]
    assert body["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    # Ollama's Python client sends `"tools": []` with every chat; vLLM refuses an empty list (a 400)
    assert "tools" not in chat_body({"model": "m", "messages": [], "tools": []})


def test_generate_body() -> None:
    kind, body = generate_body({"model": "m", "prompt": "hi", "system": "be brief", "stream": False,
                                "options": {"num_predict": 5}, "format": "json",
                                "think": "high"})  # fmt: skip
    assert kind == "generate" and body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert body["max_tokens"] == 5 and body["stream"] is False and "stream_options" not in body
    assert body["response_format"] == {"type": "json_object"} and body["reasoning_effort"] == "high"
    assert generate_body({"model": "m", "prompt": "Once", "raw": True}) == (
        "raw",
        {"model": "m", "prompt": "Once", "stream": True, "stream_options": {"include_usage": True}},
    )


@pytest.mark.parametrize(
    ("req", "said"),
    [
        ({"messages": "hi"}, "`messages` must be a list"),
        ({"messages": [{"content": "x"}]}, "messages[0] must be an object with a `role`"),
        ({"messages": [], "stream": "yes"}, "`stream` must be true or false"),
        ({"messages": [], "tools": {}}, "`tools` must be a list"),
        ({"messages": [], "format": "yaml"}, '`format` must be "json" or a JSON schema'),
        ({"messages": [], "think": "max"}, "`think` must be"),
        ({"messages": [], "options": [1]}, "`options` must be an object"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content` must be text"),
        ({"messages": [{"role": "user", "images": "abc"}]}, "`images` must be a list"),
        ({"messages": [{"role": "assistant", "tool_calls": [{}]}]}, "tool_calls[0] must have a `function`"),
    ],
)
def test_chat_requests_that_cannot_be_served_say_why(req: dict[str, Any], said: str) -> None:
    with pytest.raises(OllamaRequestError, match=None) as exc:
        chat_body({"model": "m", **req})
    assert said in str(exc.value)


@pytest.mark.parametrize("field", ["suffix", "template", "context"])
def test_generate_fields_without_an_openai_counterpart_are_refused(field: str) -> None:
    with pytest.raises(OllamaRequestError) as exc:
        generate_body({"model": "m", "prompt": "x", field: "def f():" if field != "context" else [1, 2]})
    assert field in str(exc.value)


def test_a_real_stream_of_text_becomes_ollamas_lines() -> None:
    lines = _lines("chat", "vllm-0.32-chat-stream-content.sse")
    text = "".join(line["message"]["content"] for line in lines)
    assert text == "(sockfd-successtrecht Unfortunately amplitude市场的"
    assert all(line["done"] is False for line in lines[:-1]) and lines[-1]["done"] is True
    last = lines[-1]
    assert last["done_reason"] == "length" and last["prompt_eval_count"] == 15 and last["eval_count"] == 6
    assert last["total_duration"] >= last["eval_duration"] >= 0 and "prompt_eval_duration" in last


def test_reasoning_arrives_as_thinking_and_raw_as_response() -> None:
    lines = _lines("chat", "vllm-0.32-chat-stream-reasoning.sse")
    assert "".join(x["message"].get("thinking", "") for x in lines).startswith("(sockfd-success")
    assert all(x["message"]["content"] == "" for x in lines)
    raw = _lines("raw", "vllm-0.32-completions-stream.sse")
    assert "".join(x["response"] for x in raw) == "(sockfd distratrecht Unfortunately"
    assert raw[-1]["eval_count"] == 4


def test_tool_calls_come_whole_with_an_object_for_arguments() -> None:
    lines = _lines("chat", "vllm-0.32-chat-stream-tool.sse")
    calls = [c for x in lines for c in x["message"].get("tool_calls", [])]
    # vLLM 0.32's arguments here are the JSON text '""' (no object): kept as text, not dropped
    assert calls == [{"function": {"name": "get_weather", "arguments": {"arguments": '""'}}}]
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop"
    whole = json.loads(whole_reply("chat", "m", (GW / "vllm-0.32-chat-tool.json").read_bytes(), 0.0))
    assert whole["message"]["tool_calls"] == calls and whole["eval_count"] == 27 and whole["done"] is True


def test_a_stream_error_event_ends_the_stream_in_ollamas_shape() -> None:
    stream = NdjsonStream("chat", "m", 0.0)
    said = {"error": {"message": "The backend stopped mid-stream: boom.", "code": "stream_broken"}}
    event = b"data: " + json.dumps(said).encode() + b"\n\n"
    out = stream.feed(event) + stream.end()
    assert [json.loads(x) for x in out.splitlines()] == [{"error": "The backend stopped mid-stream: boom."}]


# ---- the routes, driven by Ollama's own Python client (ollama 0.6.3) against a FAKE OpenAI upstream ----


def test_ollamas_client_through_the_gateway(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state")
    with fake() as up:
        cfg = f"routes:\n  - model: qwen3:8b\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            client = ollama.Client(host=gw, timeout=10)
            reply = client.chat(model="Qwen3:8B", messages=[{"role": "user", "content": "hi"}], stream=False)
            assert reply.message.content == "hi" and reply.done and reply.eval_count == 2
            sent = up.bodies[-1]
            assert sent["model"] == "fake-served" and sent["stream"] is False
            parts = list(client.generate(model="qwen3:8b", prompt="hi", stream=True))
            assert "".join(p.response or "" for p in parts) == "firstsecond" and parts[-1].done
            assert [m.model for m in client.list().models] == ["qwen3:8b"]
            assert client.show("qwen3:8b").capabilities == ["completion", "tools"]
            assert client.ps().models[0].model == "qwen3:8b"  # probed healthy
            with pytest.raises(ollama.ResponseError) as exc:
                client.chat(model="llama3", messages=[{"role": "user", "content": "hi"}])
            assert exc.value.status_code == 404
            assert "llama3" in exc.value.error and "qwen3:8b" in exc.value.error
            with pytest.raises(ollama.ResponseError) as exc:
                client.pull("llama3")
            assert exc.value.status_code == 501 and "llmdeck fetch" in exc.value.error
            assert httpx.get(f"{gw}/api/version").json()["version"]
            # llmdeck's own Ollama detection (doctor, up's preflight, the budget's tenants, migrate) must
            # not take the gateway on Ollama's port for Ollama: its models would be counted twice, or
            # unloaded with keep_alive 0 (the gateway's own models stopped)
            from llmdeck.errors import EndpointError
            from llmdeck.migrate.ollama_api import read_inventory
            from llmdeck.runtime.tenants import ollama_ps

            status = ollama_ps(gw)
            assert not status.reachable and not status.models and "llmdeck's gateway" in (status.error or "")
            with pytest.raises(EndpointError, match="is llmdeck's gateway"):
                read_inventory(gw)
            r = httpx.get(f"{gw}/api/chat")
            assert r.status_code == 405 and r.json() == {"error": "GET is not allowed on /api/chat; POST it."}


def test_curl_style_requests_and_loading(tmp_path: Path) -> None:
    """The seed's `curl -d` sends a form content type: still read as JSON, and sent on as JSON. A request
    with no prompt is Ollama's "load the model": answered without a backend call. Keys apply."""
    settings = Settings(state_dir=tmp_path / "state")
    with fake() as up:
        cfg = f"routes:\n  - model: m\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            form = {"Content-Type": "application/x-www-form-urlencoded"}
            body = json.dumps({"model": "m:latest", "prompt": "hi", "stream": False})  # Ollama's `m`
            r = httpx.post(f"{gw}/api/generate", content=body, headers=form)
            assert r.status_code == 200 and r.json()["response"] == "hi", r.text
            assert up.headers[-1]["content-type"] == "application/json"
            sent = len(up.bodies)
            r = httpx.post(f"{gw}/api/generate", json={"model": "m", "keep_alive": 0})
            assert r.status_code == 400 and "llmdeck down NAME" in r.json()["error"]  # not its to stop
            assert len(up.bodies) == sent
            r = httpx.post(f"{gw}/api/chat", json={"model": "m", "messages": []})
            assert r.json()["done_reason"] == "load" and r.json()["message"]["content"] == ""
            r = httpx.post(f"{gw}/api/chat", content=b"{nope")
            assert r.status_code == 400 and r.json() == {"error": "The request body is not valid JSON."}
            r = httpx.post(f"{gw}/api/generate", json={"model": "m", "prompt": "x", "suffix": "y"})
            assert r.status_code == 400 and "fill-in-the-middle" in r.json()["error"]
        from llmdeck.gateway.keys import KeyStore

        key = KeyStore(tmp_path / "keys.json").create("ci")
        with gateway(cfg + "keys_file: keys.json\n", settings, tmp_path) as gw:
            r = httpx.get(f"{gw}/api/tags")
            assert r.status_code == 401 and "API key" in r.json()["error"]
            ok = ollama.Client(host=gw, headers={"Authorization": f"Bearer {key}"})
            assert [m.model for m in ok.list().models] == ["m"]


def test_keep_alive_0_stops_a_model_on_demand_and_a_load_starts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed frees Ollama's memory with `keep_alive: 0`; said to the gateway it frees a model on demand
    (the eviction path: drained, then stopped), and a request with no prompt starts it again."""
    import asyncio

    from llmdeck.gateway.ui_actions import keep_alive
    from test_gateway_manager import FakeLifecycle, _manager, _model, run

    fake = FakeLifecycle(monkeypatch)
    mgr = _manager(tmp_path, {"a": ""}, "{memory_gib: 10}")

    async def go() -> None:
        a, tasks = _model(mgr, "a"), set[Any]()
        assert await mgr.acquire(a) is None and a.state == "running"
        mgr.release(a)
        assert keep_alive(mgr, a, True, tasks, "ollama") == "stop"
        await asyncio.gather(*tasks)
        assert a.state == "stopped" and keep_alive(mgr, a, True, tasks, "ollama") is None  # nothing to do
        assert keep_alive(mgr, a, False, tasks, "ollama") == "start"
        await asyncio.wait_for(a.task, 10)
        assert a.state == "running"

    run(go)
    assert [c for c in fake.calls if c[0] in ("start", "stop")] == [
        ("start", "a"),
        ("stop", "a"),
        ("start", "a"),
    ]
    assert any(e.kind == "stopped" and e.reason == "ollama" for e in mgr.events.newest())


def test_a_client_that_hangs_up_mid_stream_ends_the_backends_stream(tmp_path: Path) -> None:
    """The rewritten stream keeps the relay's disconnect watch: the backend's request is closed (vLLM then
    aborts the generation), not left generating for nobody."""
    settings = Settings(state_dir=tmp_path / "state")
    with fake("hold") as up:
        cfg = f"routes:\n  - model: m\n    backends: ['{up.url}']\n" + FAST  # type: ignore[attr-defined]
        with gateway(cfg, settings, tmp_path) as gw:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            with httpx.stream("POST", f"{gw}/api/chat", json=body, timeout=5) as r:
                first = json.loads(next(r.iter_lines()))
                assert first["message"]["content"] == "first" and first["done"] is False
            assert up.finished.wait(5)
    assert up.outcome == "client_gone"


@pytest.mark.parametrize("kind", ["chat", "generate"])
def test_the_streams_template_writes_what_the_dict_writer_does(kind: Any) -> None:
    from llmdeck.gateway.ollama_replies import _line, _piece

    stream = NdjsonStream(kind, 'q"3\\', 0.0)
    stream._now = b"T"
    for text, thinking in (('a"b\n\x00', ""), ("", "thinking ü ✓"), ("x", "y")):
        want = json.loads(_line(_piece(kind, 'q"3\\', text, thinking, done=False)))
        assert json.loads(stream._text_line(text, thinking)) == want | {"created_at": "T"}


def test_embed_requests_and_vllms_recorded_embeddings_reply() -> None:
    from llmdeck.gateway.ollama_replies import embed_reply
    from llmdeck.gateway.ollama_shapes import embed_body

    body = embed_body({"model": "m", "input": ["a", "b"], "dimensions": 64}, "embed")
    assert body == {"model": "m", "input": ["a", "b"], "truncate_prompt_tokens": -1, "dimensions": 64}
    assert "truncate_prompt_tokens" not in embed_body(
        {"model": "m", "input": "a", "truncate": False}, "embed"
    )
    assert embed_body({"model": "m", "prompt": "a"}, "embeddings") == {"model": "m", "input": "a"}
    for bad, said in (({"input": [1]}, "`input` must be text"), ({"input": "a", "dimensions": "8"}, "whole")):
        with pytest.raises(OllamaRequestError, match=said):
            embed_body({"model": "m", **bad}, "embed")
    recorded = (GW / "vllm-0.32-embeddings.json").read_bytes()  # CPU vLLM 0.32, --runner pooling
    vectors = [d["embedding"] for d in json.loads(recorded)["data"]]
    reply = json.loads(embed_reply("embed", "m", recorded, 0.0))
    assert reply["embeddings"] == vectors and len(vectors) == 2 and reply["prompt_eval_count"] == 3
    assert json.loads(embed_reply("embeddings", "m", recorded, 0.0)) == {"embedding": vectors[0]}


def test_ollamas_embed_through_the_gateway(tmp_path: Path) -> None:
    from gateway_fakes import fake_raw_reply

    recorded = (GW / "vllm-0.32-embeddings.json").read_bytes()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(recorded)
    with fake_raw_reply(head + recorded) as url:  # a FAKE backend answering vLLM's recorded reply
        cfg = f"routes:\n  - model: nomic-embed-text\n    backends: ['{url}']\n" + FAST
        with gateway(cfg, Settings(state_dir=tmp_path / "state"), tmp_path) as gw:
            reply = ollama.Client(host=gw, timeout=10).embed(model="nomic-embed-text", input=["a", "b"])
    assert [len(v) for v in reply.embeddings] == [128, 128] and reply.prompt_eval_count == 3


def test_a_backend_without_embeddings_is_told_in_words() -> None:
    from llmdeck.gateway.surfaces import api_of, missing_surface_message

    assert api_of("/v1/embeddings") == "embeddings"
    said = missing_surface_message("embeddings", "http://b:8000")
    assert said is not None and "--runner pooling" in said and "upgrade" not in said


def test_a_backend_that_dies_mid_stream_ends_ollamas_stream_with_an_error_line(tmp_path: Path) -> None:
    """Ollama ends a failed stream with a line ``{"error": …}``, which its clients raise; a stream that just
    stopped would read as a reply without its end."""
    from gateway_fakes import fake_dying_stream_server

    with fake_dying_stream_server() as url:  # a FAKE backend: two events, then its socket closes
        cfg = f"routes:\n  - model: m\n    backends: ['{url}']\n" + FAST
        with gateway(cfg, Settings(state_dir=tmp_path / "state"), tmp_path) as gw:
            parts: list[Any] = []
            with pytest.raises(ollama.ResponseError) as exc:
                say = [{"role": "user", "content": "hi"}]
                for part in ollama.Client(host=gw, timeout=10).chat(model="m", messages=say, stream=True):
                    parts.append(part)
    assert [p.message.content for p in parts] == ["part0", "part1"]
    assert "The backend stopped mid-stream" in exc.value.error


def test_ps_shows_a_model_on_demand_with_its_memory_and_expiry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed checks `curl /api/ps` for what holds memory: a model on demand shows the bytes it holds and,
    with a ttl_s, when it goes if idle; a stopped one is not listed."""
    from llmdeck.gateway.app import GatewayState
    from llmdeck.gateway.keys import KeyRing, KeyStore
    from llmdeck.gateway.manager import ModelManager
    from llmdeck.gateway.ollama_app import ps_entry
    from llmdeck.gateway.routing import Router
    from test_gateway_manager import FakeLifecycle, _loaded, _model, run

    FakeLifecycle(monkeypatch)
    loaded, settings = _loaded(tmp_path, {"a": ", ttl_s: 600"}, "{memory_gib: 10}")
    mgr = ModelManager(loaded, settings)
    st = GatewayState(loaded, Router(loaded), KeyRing(KeyStore(tmp_path / "keys.json")), manager=mgr)
    assert ps_entry(st, "a") is None  # not started yet

    async def go() -> None:
        a = _model(mgr, "a")
        assert await mgr.acquire(a) is None
        mgr.release(a)

    run(go)
    entry = ps_entry(st, "a")
    assert entry is not None and entry["size"] == entry["size_vram"] == _model(mgr, "a").held("unified")
    assert entry["size"] > 0 and entry["expires_at"] > entry["modified_at"]


@pytest.mark.parametrize("status", [200, 400])
def test_a_backend_reply_nested_too_deep_is_an_answer_not_a_dropped_connection(
    tmp_path: Path, status: int
) -> None:
    """A hostile backend's JSON nested past Python's decoder (a RecursionError, no ValueError) had ended
    the request with a traceback and a broken connection; now it is an Ollama error the client reads."""
    from gateway_fakes import fake_raw_reply

    deep = b'{"choices":[{"message":{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}}]}"
    head = b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (
        status,
        len(deep),
    )
    with fake_raw_reply(head + deep) as url:  # a FAKE hostile backend
        cfg = f"routes:\n  - model: m\n    backends: ['{url}']\n" + FAST
        with gateway(cfg, Settings(state_dir=tmp_path / "state"), tmp_path) as gw:
            body = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "x"}]}
            r = httpx.post(f"{gw}/api/chat", json=body, timeout=10)
    assert r.status_code == status and len(r.json()["error"]) < 2100


_LMO = ["--language-model-only"]


@pytest.mark.parametrize(
    ("flag_lists", "expected"),
    [
        ([], ["completion", "tools"]),  # a URL backend: its flags are not known
        ([["--max-model-len", "4096"]], ["completion"]),
        ([["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]], ["completion", "tools"]),
        ([["--reasoning-parser=qwen3", "--enable-auto-tool-choice"]], ["completion", "tools", "thinking"]),
        ([["--runner", "pooling", "--convert", "embed"]], ["embedding"]),
        ([["--convert", "embed"]], ["embedding"]),
        ([["--enable-auto-tool-choice"], []], ["completion"]),  # what every backend can do
        ([["--max-model-len"]], ["completion"]),  # flags llmdeck cannot read: the least is claimed
    ],
)
def test_capabilities_follow_the_servers_flags(flag_lists: list[list[str]], expected: list[str]) -> None:
    assert capabilities([(flags, False) for flags in flag_lists]) == expected


@pytest.mark.parametrize(
    ("backends", "expected"),
    [
        ([([], True)], ["completion", "vision"]),
        ([(["--enable-auto-tool-choice"], True)], ["completion", "vision", "tools"]),
        ([(_LMO, True)], ["completion"]),  # the vision tower is not loaded
        ([(["--limit-mm-per-prompt", '{"image": 0}'], True)], ["completion"]),
        ([(["--limit-mm-per-prompt", '{"image": 0, "video": 0}'], True)], ["completion"]),
        ([(["--limit-mm-per-prompt", "image=0"], True)], ["completion"]),  # the older form
        ([(["--limit-mm-per-prompt", '{"image": 2}'], True)], ["completion", "vision"]),
        ([(["--limit-mm-per-prompt", '{"image": 0.5}'], True)], ["completion", "vision"]),
        ([([], True), ([], False)], ["completion"]),  # one backend cannot see images
        ([(["--runner", "pooling"], True)], ["embedding"]),
    ],
)
def test_vision_for_a_vision_tower_not_turned_off(
    backends: list[tuple[list[str], bool]], expected: list[str]
) -> None:
    assert capabilities(backends) == expected


def test_a_vision_tower_is_read_from_the_model_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.formats.model_folder import has_vision_tower

    for var in ("HF_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no HF cache: a hub name is not known

    (tmp_path / "vl").mkdir()
    (tmp_path / "vl" / "config.json").write_text('{"vision_config": {"depth": 2}, "text_config": {}}')
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "config.json").write_text('{"hidden_size": 8}')
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    found = {name: has_vision_tower(str(tmp_path / name)) for name in ("vl", "text", "bad", "none")}
    assert found == {"vl": True, "text": False, "bad": False, "none": False}
    assert not has_vision_tower("Qwen/Qwen2.5-VL-7B-Instruct")  # a hub name: not known, not claimed


def test_a_hub_names_vision_tower_is_read_from_the_hf_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`llmdeck fetch` (or vLLM itself) put the model in the HF cache: its snapshot's config tells."""
    from llmdeck.formats.model_folder import has_vision_tower

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for repo, config in (("Qwen/Qwen2.5-VL-7B-Instruct", '{"vision_config": {}}'), ("Qwen/Qwen3-8B", "{}")):
        snap = tmp_path / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / "abc123"
        snap.mkdir(parents=True)
        (snap / "config.json").write_text(config)
    assert has_vision_tower("Qwen/Qwen2.5-VL-7B-Instruct")
    assert not has_vision_tower("Qwen/Qwen3-8B") and not has_vision_tower("Qwen/not-fetched")
    assert not has_vision_tower("a/b/c") and not has_vision_tower("../x")


def test_show_reads_the_capabilities_of_a_model_on_demand(tmp_path: Path) -> None:
    """A model the gateway starts: its launch spec's flags say what it can do (it had claimed tools for
    every model, an embedding one too, and an editor offered it for agent work)."""
    from starlette.testclient import TestClient

    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.gateway.app import build_app
    from llmdeck.gateway.config import parse_config

    settings = Settings(state_dir=tmp_path / "st")
    args = {
        "chat": ["--enable-auto-tool-choice", "--reasoning-parser", "qwen3"],
        "emb": ["--runner", "pooling"],
        "vl": [],  # its folder's config.json has a vision_config
    }
    (tmp_path / "vl").mkdir()
    (tmp_path / "vl" / "config.json").write_text('{"vision_config": {"depth": 2}}', encoding="utf-8")
    lines = ["routes:"]
    for i, (name, vllm_args) in enumerate(args.items()):
        model = tmp_path / ("vl" if name == "vl" else "m")
        spec = LaunchSpec(name=name, engine="cpu", model=str(model), port=9100 + i, vllm_args=vllm_args)
        (tmp_path / f"{name}.json").write_text(spec.model_dump_json(), encoding="utf-8")
        lines.append(f"  - {{model: {name}, backends: [{{spec: {name}.json}}]}}")
    text = "\n".join([*lines, "budget: {memory_gib: 10}"]) + "\n"
    loaded = parse_config(text, source=tmp_path / "gw.yaml", settings=settings)
    client = TestClient(build_app(loaded, settings=settings))  # no lifespan: nothing is started
    said = {m: client.post("/api/show", json={"model": m}).json()["capabilities"] for m in args}
    assert said == {
        "chat": ["completion", "tools", "thinking"],
        "emb": ["embedding"],
        "vl": ["completion", "vision"],
    }


def test_a_url_backend_says_what_it_can_in_its_config(tmp_path: Path) -> None:
    """A URL's vLLM flags are not known: `capabilities:` in its config entry is what /api/show says (a
    server without a tool parser had been shown with `tools`, and an Ollama client sent it tools);
    without it, `completion, tools` (each route its own, on one URL too). On a `spec:` or `server:`
    backend, or with a name Ollama does not use, the config is refused naming the line."""
    from starlette.testclient import TestClient

    from llmdeck.errors import ConfigError
    from llmdeck.gateway.app import build_app
    from llmdeck.gateway.config import parse_config

    settings = Settings(state_dir=tmp_path / "st")
    text = """routes:
  - {model: plain, backends: [{url: "http://127.0.0.1:9", capabilities: [completion, thinking, completion]}]}
  - {model: guess, backends: ["http://127.0.0.1:9"]}
"""
    loaded = parse_config(text, source=tmp_path / "gw.yaml", settings=settings)
    client = TestClient(build_app(loaded, settings=settings))  # no lifespan: nothing is probed
    said = {m: client.post("/api/show", json={"model": m}).json()["capabilities"] for m in ("plain", "guess")}
    assert said == {"plain": ["completion", "thinking"], "guess": ["completion", "tools"]}
    (tmp_path / "s.json").write_text('{"name": "s", "engine": "cpu", "model": "/m"}', encoding="utf-8")
    url, budget = "url: 'http://127.0.0.1:9'", "budget: {memory_gib: 9}"
    bad = {
        "on a spec": "  - {model: s, backends: [{spec: s.json, capabilities: [tools]}]}\n" + budget,
        "a name Ollama does not use": "  - {model: p, backends: [{" + url + ", capabilities: [chat]}]}",
        "empty": "  - {model: p, backends: [{" + url + ", capabilities: []}]}",
    }
    for why, route in bad.items():
        with pytest.raises(ConfigError) as exc:
            parse_config("routes:\n" + route + "\n", source=tmp_path / "gw.yaml", settings=settings)
        assert "gw.yaml:2" in exc.value.message, (why, exc.value.message)
        assert "capabilities" in exc.value.message, (why, exc.value.message)
