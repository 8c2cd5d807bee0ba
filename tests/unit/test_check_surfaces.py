"""Unit tests of the Claude Code / Codex probes (Messages and Responses surfaces) and the output cap.

Each test answers the probe's requests from a FAKE server: an in-process ``httpx.MockTransport``
handler that plays one behaviour of a server (a missing surface, a template that refuses a second
system message, a stream without ``response.completed``, a reply cap). The real engine is in
test_check_surfaces_integration.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from llmdeck.checks import probes_surfaces as ps
from llmdeck.checks.client_probes import probe_client_context, probes_for
from llmdeck.checks.http import Http
from llmdeck.checks.probe_base import ProbeContext
from llmdeck.checks.probes_caps import probe_client_output_cap, probe_client_own_cap
from llmdeck.checks.results import ServerFacts
from llmdeck.checks.traffic import Recording, load_recording
from repo_paths import ROOT

Handler = Callable[[httpx.Request], httpx.Response]


def sse(events: list[dict[str, Any]]) -> httpx.Response:
    text = "".join(f"event: {e.get('type')}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx.Response(200, content=text.encode(), headers={"content-type": "text/event-stream"})


def ctx_for(handler: Handler, mml: int = 32768) -> ProbeContext:
    """A probe context whose HTTP client talks to the FAKE handler."""
    http = Http("http://fake.invalid", None, timeout=5)
    http.client = httpx.Client(base_url=http.base_url, transport=httpx.MockTransport(handler))
    facts = ServerFacts(base_url=http.base_url, model="m", max_model_len=mml, suggested_tool_parser="hermes")
    return ProbeContext(http=http, facts=facts, client="claude-code", requested_model=None)


def rec(client: str) -> Recording:
    found = load_recording(client)
    assert found is not None
    return found


def message_events(*blocks: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """An Anthropic stream: message_start, each (type, start fields, deltas) block, message_stop."""
    usage = {"input_tokens": 12, "output_tokens": 1}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"usage": usage}}]
    for i, (kind, start, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": i, "content_block": {"type": kind, **start}})
        events += [{"type": "content_block_delta", "index": i, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}
    )
    return [*events, {"type": "message_stop"}]


TEXT = ("text", {"text": ""}, [{"type": "text_delta", "text": "Hi"}])


def not_found(request: httpx.Request) -> httpx.Response:
    return httpx.Response(404, json={"detail": "Not Found"})


def test_claude_code_and_codex_get_their_surface_probes() -> None:
    assert rec("claude-code").surface == "messages" and rec("codex").surface == "responses"
    assert {
        "messages_stream",
        "messages_tools",
        "messages_thinking",
        "messages_count_tokens",
        "messages_system",
        "client_context",
        "client_output_cap",
    } <= set(probes_for(rec("claude-code")))
    assert {"responses_stream", "responses_tools", "client_context"} <= set(probes_for(rec("codex")))
    assert "client_tool_stream" in probes_for(rec("opencode"))


def test_messages_stream_passes_and_a_server_without_the_surface_fails_saying_so() -> None:
    out = ps.probe_messages_stream(ctx_for(lambda r: sse(message_events(TEXT))), rec("claude-code"))
    assert out.status == "pass" and "end_turn" in out.summary
    out = ps.probe_messages_stream(ctx_for(not_found), rec("claude-code"))
    assert out.status == "fail" and "has no /v1/messages" in out.summary and "Messages API" in out.summary
    assert out.fix is not None and "vLLM >= 0.12" in out.fix and "gateway" in out.fix
    out = ps.probe_responses_stream(ctx_for(not_found), rec("codex"))
    assert out.status == "fail" and "has no /v1/responses" in out.summary


def test_messages_tool_round_trip_and_a_tool_call_left_in_text() -> None:
    seen: list[dict[str, Any]] = []

    def tool_use(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        partial = [
            {"type": "input_json_delta", "partial_json": '{"city": '},
            {"type": "input_json_delta", "partial_json": '"Paris"}'},
        ]
        return sse(
            message_events(("tool_use", {"id": "toolu_1", "name": "get_weather", "input": {}}, partial))
        )

    out = ps.probe_messages_tools(ctx_for(tool_use), rec("claude-code"))
    assert out.status == "pass" and "{'city': 'Paris'}" in out.summary
    back = seen[1]["messages"]
    assert back[1]["content"][0]["type"] == "tool_use" and back[2]["content"][0]["tool_use_id"] == "toolu_1"
    as_text = ("text", {"text": ""}, [{"type": "text_delta", "text": '<tool_call>{"name": "get_weather"}'}])
    # with a tool parser (vLLM 0.32 does not force tool_choice here): the random model's cut call
    out = ps.probe_messages_tools(ctx_for(lambda r: sse(message_events(as_text))), rec("claude-code"))
    assert out.status == "inconclusive" and "unparsed call in text" in out.summary
    no_parser = ctx_for(lambda r: sse(message_events(as_text)))
    no_parser.facts.tool_parser = False
    out = ps.probe_messages_tools(no_parser, rec("claude-code"))
    assert out.status == "fail" and out.fix is not None and "--tool-call-parser hermes" in out.fix


def test_a_template_refusing_a_second_system_message_names_the_fix() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        err = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "System message must be at the beginning."},
        }
        return httpx.Response(400, json=err)

    out = ps.probe_messages_system(ctx_for(refuse), rec("claude-code"))
    assert out.status == "fail" and "System message must be at the beginning" in out.summary
    assert out.fix is not None and "--chat-template" in out.fix
    assert (
        ps.probe_messages_system(ctx_for(lambda r: sse(message_events(TEXT))), rec("claude-code")).status
        == "pass"
    )


def test_thinking_blocks_pass_and_thoughts_in_text_need_the_reasoning_parser() -> None:
    think = ("thinking", {"thinking": ""}, [{"type": "thinking_delta", "thinking": "2+3=5"}])
    out = ps.probe_messages_thinking(ctx_for(lambda r: sse(message_events(think, TEXT))), rec("claude-code"))
    assert out.status == "pass"
    inline = ("text", {"text": ""}, [{"type": "text_delta", "text": "<think>2+3</think>5"}])
    out = ps.probe_messages_thinking(ctx_for(lambda r: sse(message_events(inline))), rec("claude-code"))
    assert out.status == "fail" and out.fix is not None and "--reasoning-parser" in out.fix
    ctx = ctx_for(lambda r: sse(message_events()))  # a model that ends at once (the EOS-biased tiny one)
    ctx.facts.thinking_template = True
    assert ps.probe_messages_thinking(ctx, rec("claude-code")).status == "inconclusive"


def test_a_stream_whose_model_ends_at_once_is_inconclusive_not_a_broken_stream() -> None:
    from llmdeck.checks.probes_basic import probe_streaming_usage

    def chat(tokens: int) -> Handler:
        def handle(request: httpx.Request) -> httpx.Response:
            chunks = [{"choices": [{"delta": {"role": "assistant"}}]}, {"choices": [{"delta": {}}]}]
            chunks.append({"choices": [], "usage": {"completion_tokens": tokens}})
            text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            return httpx.Response(200, content=text.encode(), headers={"content-type": "text/event-stream"})

        return handle

    assert probe_streaming_usage(ctx_for(chat(1))).status == "inconclusive"
    assert probe_streaming_usage(ctx_for(chat(9))).status == "fail"  # tokens made, none streamed


def test_count_tokens_counts_the_recorded_prompt_and_its_absence_warns() -> None:
    def count(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/messages/count_tokens"
        body = json.loads(request.content)
        assert len(body["tools"]) == rec("claude-code").agent.tools and body["model"] == "m"
        return httpx.Response(200, json={"input_tokens": 18000})

    assert ps.probe_messages_count_tokens(ctx_for(count), rec("claude-code")).data == {"input_tokens": 18000}
    assert ps.probe_messages_count_tokens(ctx_for(not_found), rec("claude-code")).status == "warn"


def response_events(call: bool, completed: bool = True) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {}}]
    if call:
        item = {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        }
        events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    else:
        events.append({"type": "response.output_text.delta", "delta": "Hi"})
    if completed:
        usage = {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}
        events.append({"type": "response.completed", "response": {"usage": usage}})
    return events


def test_responses_stream_needs_response_completed() -> None:
    assert (
        ps.probe_responses_stream(ctx_for(lambda r: sse(response_events(False))), rec("codex")).status
        == "pass"
    )
    out = ps.probe_responses_stream(
        ctx_for(lambda r: sse(response_events(False, completed=False))), rec("codex")
    )
    assert out.status == "fail" and "response.completed" in out.summary


def test_responses_function_calls_over_three_turns_with_store_false() -> None:
    bodies: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return sse(response_events(True))

    out = ps.probe_responses_tools(ctx_for(server), rec("codex"))
    assert out.status == "pass" and len(bodies) == 3 and all(b["store"] is False for b in bodies)
    kinds = [i["type"] for i in bodies[2]["input"]]
    assert kinds == [
        "message",
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
    ]

    def second_turn_refused(request: httpx.Request) -> httpx.Response:
        if any(i["type"] == "function_call_output" for i in json.loads(request.content)["input"]):
            return httpx.Response(400, json={"error": {"message": "bad input item"}})
        return sse(response_events(True))

    out = ps.probe_responses_tools(ctx_for(second_turn_refused), rec("codex"))
    assert out.status == "fail" and "Turn 2" in out.summary and out.fix and "vllm#33089" in out.fix


def capped(cap: int | None) -> Handler:
    """A FAKE vLLM whose generation config caps replies at ``cap`` tokens (None: no cap)."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["ignore_eos"] is True
        got = body["max_tokens"] if cap is None else min(cap, body["max_tokens"])
        choice = {"message": {"content": "1 2 3"}, "finish_reason": "length"}
        return httpx.Response(200, json={"choices": [choice], "usage": {"completion_tokens": got}})

    return handle


@pytest.mark.parametrize(
    ("client", "wants"), [("claude-code", "max_tokens 32000"), ("opencode", "max_tokens 4096")]
)
def test_a_server_side_output_cap_is_judged_against_the_clients_max_tokens(client: str, wants: str) -> None:
    out = probe_client_output_cap(ctx_for(capped(48)), rec(client))
    assert out.status == "fail" and "caps replies at 48 tokens" in out.summary and wants in out.summary
    assert out.fix is not None and "max_new_tokens" in out.fix and out.data["cap"] == 48
    assert probe_client_output_cap(ctx_for(capped(None)), rec(client)).status == "pass"


@pytest.mark.parametrize(
    ("client", "words"),
    [
        ("cline", "exits 1 after one HTTP 400"),
        ("opencode", "retries"),
        ("claude-code", "claude -p` exits 1"),
        ("codex", "codex exec` exits 1"),
    ],
)
def test_a_too_small_context_says_what_that_client_does_then(client: str, words: str) -> None:
    def tokenize(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"count": rec(client).agent.prompt_tokens})

    out = probe_client_context(ctx_for(tokenize, mml=2048), rec(client))
    assert out.status == "fail" and words in out.summary and "retries forever" not in out.summary
    assert out.fix is not None and "--max-model-len" in out.fix


def test_a_tool_use_cut_at_max_tokens_is_the_models_not_the_servers() -> None:
    cut = (
        "tool_use",
        {"id": "toolu_1", "name": "get_weather", "input": {}},
        [{"type": "input_json_delta", "partial_json": '{"ci'}],
    )
    events = message_events(cut)
    events[-2]["delta"]["stop_reason"] = "max_tokens"
    out = ps.probe_messages_tools(ctx_for(lambda r: sse(events)), rec("claude-code"))
    assert out.status == "inconclusive" and "cut at max_tokens" in out.summary
    # a delta without its content_block_start breaks the SDK's parser: the server's fault
    broken = [e for e in events if e["type"] != "content_block_start"]
    out = ps.probe_messages_tools(ctx_for(lambda r: sse(broken)), rec("claude-code"))
    assert out.status == "fail" and "content_block_start" in out.summary


def test_vllm_022_refusing_the_system_role_names_upgrade_and_the_gateway_fold() -> None:
    """vLLM 0.22.0's Messages API on the H200 (evidence/device/agents/): Claude Code's second system message
    is a validation error; the probes say so and name the gateway's `fold_system`."""
    from llmdeck.checks.client_probes import probe_client_request

    words = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, 'role'), "
        "'msg': \"Input should be 'user' or 'assistant'\", 'input': 'system'}"
    )

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": words, "type": "BadRequestError", "code": 400}})

    for out in (
        ps.probe_messages_system(ctx_for(refuse), rec("claude-code")),
        probe_client_request(ctx_for(refuse), rec("claude-code")),
    ):
        assert out.status == "fail" and "system" in out.summary, out
        assert out.fix is not None and "fold_system: true" in out.fix and "Upgrade vLLM" in out.fix, out.fix


def test_a_random_models_cut_function_arguments_are_resent_as_valid_json() -> None:
    """vLLM 0.22 parses resent arguments into the template: the random model's cut string (seen on the
    H200: 400 `Unterminated string`) would test the model, not the server; valid ones go back as they came."""
    assert ps._json_args('{"city": "Par') == ps.TOOL_ARGS
    assert ps._json_args(None) == ps.TOOL_ARGS
    assert ps._json_args('{"city": "Tokyo"}') == '{"city": "Tokyo"}'


def vllm_032(context: int) -> Handler:
    """A FAKE vLLM 0.32 on /v1/messages: a cap over ``context`` refused with its real 400 body (tests/
    fixtures/gateway), else a stream; it records whether the probe read past the first event."""

    refused = (
        ROOT / "tests" / "fixtures" / "gateway" / "vllm-0.32-messages-400-max-tokens.json"
    ).read_bytes()

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["stream"] is True
        if body["max_tokens"] > context:
            return httpx.Response(400, content=refused, headers={"content-type": "application/json"})
        return sse(message_events(TEXT))

    return handle


def test_claude_codes_own_cap_set_up_by_hand_warns_where_the_server_refuses_it() -> None:
    """Claude Code without `llmdeck connect` asks max_tokens 32000: a 16k server refuses every request
    (vLLM 0.32's 400); the other probes send small caps and had passed it."""
    out = probe_client_own_cap(ctx_for(vllm_032(16384), mml=16384), rec("claude-code"))
    assert out.status == "warn" and "asks 32000 output tokens" in out.summary, out
    assert out.fix is not None and "llmdeck connect claude-code" in out.fix and "gateway" in out.fix
    assert probe_client_own_cap(ctx_for(vllm_032(65536), mml=65536), rec("claude-code")).status == "pass"
    assert "client_own_cap" in probes_for(rec("claude-code"))


def test_a_client_that_sends_no_cap_of_its_own_has_nothing_to_refuse() -> None:
    assert rec("codex").max_tokens is None
    assert probe_client_own_cap(ctx_for(not_found), rec("codex")).status == "not_applicable"


def test_a_request_error_with_no_text_is_said_in_words() -> None:
    """A FAKE server whose connection breaks with an httpx error of no text: the probe had said "The
    request failed: ." (`exc or ...` never falls back: an exception is always true)."""
    from llmdeck.checks.probes import run_probe

    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("")

    result = run_probe(ctx_for(broken), "chat")
    assert result.status == "fail"
    assert (
        result.summary == "The request failed: the server closed the connection or broke the HTTP exchange."
    )
