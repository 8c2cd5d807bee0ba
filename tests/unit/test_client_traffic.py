"""Recorded client traffic (checks/recordings), the context budget, and connect's limits (no engine)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from llmdeck.checks.surfaces import chat_view
from llmdeck.checks.traffic import (
    CONTEXT_MARGIN,
    budget,
    load_recording,
    parse_tool_stream,
    recommend_max_model_len,
    recordings,
    replay_body,
    tokenize_body,
)
from llmdeck.connect import connect_client
from llmdeck.connect import limits as limits_mod
from llmdeck.connect.configs import ServeInfo
from llmdeck.errors import OperationError
from repo_paths import ROOT

REC_DIR = ROOT / "src/llmdeck/checks/recordings"
RECORD_SH = ROOT / "evidence/clients/record.sh"


def test_at_least_three_real_clients_are_recorded_at_the_versions_record_sh_pins() -> None:
    recs = recordings()
    assert {"opencode", "continue", "cline"} <= set(recs)
    script = RECORD_SH.read_text()
    for name, var in [
        ("opencode", "OPENCODE"),
        ("continue", "CONTINUE"),
        ("cline", "CLINE"),
        ("aider", "AIDER"),
        ("claude-code", "CLAUDE"),
        ("codex", "CODEX"),
    ]:  # VAR_VERSION=${VAR_VERSION:-1.2.3}: the pin, which the environment may override
        pinned = re.search(rf"^{var}_VERSION=\${{{var}_VERSION:-([^}}\s]+)}}$", script, re.M)
        assert pinned and recs[name].client_version == pinned.group(1)
        assert (REC_DIR / f"{name}-{pinned.group(1)}.json").exists()


@pytest.mark.parametrize(
    ("client", "tools", "system_starts"),
    [
        ("opencode", 10, "You are opencode"),
        ("continue", 9, "You are an agent in the Continue CLI"),
        ("cline", 25, "You are Cline"),
        ("aider", 0, "Act as an expert software developer"),
    ],
)
def test_recording_keeps_the_clients_system_prompt_tools_and_parameters(
    client: str, tools: int, system_starts: str
) -> None:
    rec = load_recording(client)
    assert rec is not None
    body = rec.agent.body
    assert body["messages"][0]["role"] == "system"
    system = body["messages"][0]["content"]
    text = system if isinstance(system, str) else " ".join(p.get("text", "") for p in system)
    assert text.startswith(system_starts)
    assert rec.agent.tools == tools == len(body.get("tools") or [])
    assert body["stream"] is True
    assert rec.reads.source and rec.agent.prompt_tokens > 500


def test_recordings_hold_no_secrets_nor_local_paths() -> None:
    for path in REC_DIR.glob("*.json"):
        text = path.read_text()
        # Claude Code's prompt speaks of "authorization context"; Codex's has <root>...</root> tags
        assert "sk-recorder" not in text and "Bearer" not in text and '"authorization"' not in text.lower()
        assert "/tmp/llmdeck-record" not in text and "-tmp-llmdeck-record" not in text
        assert re.search(r"(?<!<)/root\b", text) is None, path.name


def test_recorded_token_counts_match_the_served_tokenizer(tiny_model_dir: Path) -> None:
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(tiny_model_dir))
    for rec in recordings().values():
        messages, tools = chat_view(rec.agent.path, rec.agent.body)
        ids = tok.apply_chat_template(
            messages, tools=tools or None, add_generation_prompt=True, tokenize=True
        )
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        assert len(ids) == rec.agent.prompt_tokens, rec.label


def test_opencode_cannot_work_in_4096_and_needs_16384() -> None:
    rec = load_recording("opencode")
    assert rec is not None
    small = budget(4096, rec.agent.prompt_tokens)
    assert not small.first_request_fits and small.turns == 0
    assert not budget(8192, rec.agent.prompt_tokens).usable
    big = budget(16384, rec.agent.prompt_tokens)
    assert big.ok and big.turns >= 4 and big.context == 16384 - CONTEXT_MARGIN and big.output == 4096
    assert recommend_max_model_len(rec.agent.prompt_tokens) == 16384


def test_replay_swaps_the_model_and_keeps_the_shape() -> None:
    rec = load_recording("opencode")
    assert rec is not None
    body = replay_body(rec, "served-name", max_tokens=8)
    assert body["model"] == "served-name" and body["max_tokens"] == 8
    assert body["tools"] == rec.agent.body["tools"] and body["stream_options"] == {"include_usage": True}
    assert rec.agent.body["model"] == "tiny-qwen3"  # the recording itself is untouched
    tok = tokenize_body(rec, "served-name")
    assert tok["tools"] == rec.agent.body["tools"] and tok["add_generation_prompt"] is True


def _delta(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta}]}


def test_tool_stream_parses_like_the_ai_sdk() -> None:
    good = [
        _delta(role="assistant"),
        _delta(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "read", "arguments": '{"a"'}}]),
        _delta(tool_calls=[{"index": 0, "function": {"arguments": ": 1}"}}]),
    ]
    calls, error, _ = parse_tool_stream(good)
    assert error is None and calls == [{"id": "c1", "name": "read", "arguments": '{"a": 1}'}]
    no_id = [_delta(tool_calls=[{"index": 0, "function": {"name": "read", "arguments": "{}"}}])]
    assert parse_tool_stream(no_id)[1] == "Expected 'id' to be a string."
    no_name = [_delta(tool_calls=[{"index": 0, "id": "c1", "function": {"arguments": "{}"}}])]
    assert parse_tool_stream(no_name)[1] == "Expected 'function.name' to be a string."
    text = parse_tool_stream([_delta(content="<tool_call>{}</tool_call>")])
    assert text[0] == [] and "<tool_call>" in text[2]


def test_tool_stream_of_the_wrong_json_shapes_says_what_a_client_would() -> None:
    """Chunks whose choices, delta or tool calls have the wrong JSON type are a client's parse error,
    not llmdeck's (they were an internal AttributeError or TypeError)."""
    skipped = [{"choices": "x"}, {"choices": ["x"]}, {"choices": [{"delta": "hi"}]}, _delta(content=5)]
    assert parse_tool_stream(skipped) == ([], None, "")
    call = {"id": "c1", "function": {"name": "read", "arguments": "{}"}}
    says = {
        "Expected each tool call delta to be an object.": ["x"],
        "Expected 'index' to be a number.": [{**call, "index": [0]}],
        "Expected 'id' to be a string.": [{**call, "id": 5}],
        "Expected 'function.name' to be a string.": [{**call, "function": "read"}],
        "Expected 'function.arguments' to be a string.": [
            {**call, "function": {"name": "r", "arguments": 5}}
        ],
    }
    for error, tool_calls in says.items():
        assert parse_tool_stream([_delta(tool_calls=tool_calls)])[1] == error


def info(mml: int) -> ServeInfo:
    return ServeInfo(base_url="http://127.0.0.1:9", model="m", max_model_len=mml, tool_calls=True)


def test_connect_refuses_when_the_base_prompt_does_not_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits_mod, "base_prompt_tokens", lambda i, c: (7208, "counted by the server"))
    with pytest.raises(OperationError) as exc:
        limits_mod.apply_client_limits("opencode", info(4096))
    assert exc.value.exit_code == 1
    assert "--max-model-len 16384" in (exc.value.hint or "")


def test_connect_writes_limits_the_client_compacts_within(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits_mod, "base_prompt_tokens", lambda i, c: (7208, "counted by the server"))
    limited = limits_mod.apply_client_limits("opencode", info(16384))
    result = connect_client("opencode", limited, print_only=True)
    model = result.config["provider"]["vllm"]["models"]["m"]
    assert model["limit"] == {"context": 16384 - CONTEXT_MARGIN, "output": 4096}
    # opencode compacts at context - output; the server refuses prompt + max_tokens(=output) > 16384
    assert model["limit"]["context"] - model["limit"]["output"] + 4096 < 16384
    assert any("opencode 1.18.33" in n and "turn" in n for n in result.notes)


def test_a_client_without_recording_keeps_the_generic_limits() -> None:
    plain = limits_mod.apply_client_limits("openclaw", info(4096))
    assert plain.context == 4096 and plain.output_limit == 1024


def test_recording_files_are_valid_json_with_the_schema() -> None:
    for path in REC_DIR.glob("*.json"):
        doc = json.loads(path.read_text())
        assert doc["kind"] == "llmdeck.client-recording" and doc["schema_version"] == 1
        assert path.name == f"{doc['client']}-{doc['client_version']}.json"


class fake_http:
    """Named for what it fakes: a server that streams the given chunks (probe logic only)."""

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self.chunks = chunks
        self.sent: list[Any] = []

    def stream(self, path: str, body: Any) -> Any:
        from llmdeck.checks.http import Reply
        from llmdeck.checks.results import Exchange

        self.sent.append(body)
        ex = Exchange(method="POST", path=path, status_code=200)
        return Reply(status_code=200, text="", exchange=ex, chunks=self.chunks, done=True)


def _ctx(chunks: list[dict[str, Any]], **facts: Any) -> Any:
    from llmdeck.checks.probes import ProbeContext
    from llmdeck.checks.results import ServerFacts

    server = ServerFacts(base_url="http://x", model="m", max_model_len=16384, **facts)
    return ProbeContext(http=fake_http(chunks), facts=server, client="opencode", requested_model=None)  # type: ignore[arg-type]


def test_thinking_is_judged_by_the_field_the_client_reads() -> None:
    from llmdeck.checks.client_probes import probe_client_thinking

    stream = [_delta(reasoning="Let me think"), _delta(content="5")]
    rec = load_recording("opencode")
    assert rec is not None
    assert probe_client_thinking(_ctx(stream, thinking_template=True), rec).status == "pass"
    old_sdk = rec.model_copy(deep=True)
    old_sdk.reads.reasoning = ["reasoning_content"]
    out = probe_client_thinking(_ctx(stream, thinking_template=True), old_sdk)
    assert out.status == "fail" and "enable_thinking" in (out.fix or "")
    cont = load_recording("continue")
    assert cont is not None
    dropped = probe_client_thinking(_ctx(stream, thinking_template=True, thinking_default=True), cont)
    assert dropped.status == "warn" and "--default-chat-template-kwargs" in (dropped.fix or "")
    raw = probe_client_thinking(_ctx([_delta(content="<think>hm</think>5")], thinking_template=True), rec)
    assert raw.status == "fail" and "--reasoning-parser qwen3" in (raw.fix or "")


def test_a_tool_call_stream_without_ids_breaks_the_clients_parser() -> None:
    from llmdeck.checks.client_probes import probe_client_tool_stream

    rec = load_recording("opencode")
    assert rec is not None
    no_id = [_delta(tool_calls=[{"index": 0, "function": {"name": "skill", "arguments": "{}"}}])]
    ctx = _ctx(no_id, suggested_tool_parser="hermes")
    out = probe_client_tool_stream(ctx, rec)
    assert out.status == "fail" and "Expected 'id'" in out.summary
    assert out.fix and "--tool-call-parser hermes" in out.fix
    sent = ctx.http.sent[0]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "skill"}}
    assert len(sent["tools"]) == 10 and sent["model"] == "m"
    good = [
        _delta(tool_calls=[{"index": 0, "id": "c", "function": {"name": "skill", "arguments": '{"n": 1}'}}])
    ]
    assert probe_client_tool_stream(_ctx(good), rec).status == "pass"
