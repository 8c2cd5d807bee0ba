"""Reading what the real agents print: aider 0.86.2's and opencode 1.18.33's own output, recorded from
`llmdeck eval` runs on the CPU engine (tests/fixtures/eval/, kept with --keep)."""

from __future__ import annotations

from pathlib import Path

from llmdeck.evals.agents import AgentSetup, StreamState, aider_argv, feed_aider, feed_opencode, opencode_argv
from llmdeck.evals.results import AgentRun
from repo_paths import TEST_FIXTURES

FIX = TEST_FIXTURES / "eval"


def _feed(name: str, fn: object, client: str) -> tuple[StreamState, list[object]]:
    state = StreamState(run=AgentRun(client=client))
    turns = []
    for i, line in enumerate((FIX / name).read_text().splitlines(keepends=True)):
        turn = fn(state, line, float(i))  # type: ignore[operator]
        if turn is not None:
            turns.append(turn)
    return state, turns


def test_aider_cut_by_a_token_limit_is_one_turn_with_its_estimates() -> None:
    state, turns = _feed("aider-0.86.2-fix-intervals-tiny.txt", feed_aider, "aider")
    assert len(turns) == 1 and turns[0].reason == "length"
    assert turns[0].tokens.input == 1022 and turns[0].tokens.output == 0
    assert any("Added intervals/merge.py to the chat." in e.text for e in state.run.transcript)


def test_aider_tokens_line() -> None:
    state = StreamState(run=AgentRun(client="aider"))
    turn = feed_aider(state, "Tokens: 2.1k sent, 1.0k cache write, 150 received. Cost: $0.00 message.\n", 1.0)
    assert turn is not None and (turn.tokens.input, turn.tokens.output) == (2100, 150)


def test_argv_of_both_clients(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "a.py").write_text("x = 1\n")
    (ws / ".git" / "HEAD").write_text("ref\n")
    setup = AgentSetup(
        ws, tmp_path / "home", "http://h:8000", "m", "sk-1", Path("/x/opencode"), "/py", max_model_len=16384
    )
    setup.home.mkdir()
    oc = opencode_argv(setup, "do it", None)
    assert oc[:4] == ["/x/opencode", "run", "--format", "json"] and oc[-1] == "do it" and "vllm/m" in oc
    assert "-s" in opencode_argv(setup, "more", "ses_1")
    ad = aider_argv(setup, "do it", followup=True)
    assert ad[ad.index("--openai-api-base") + 1] == "http://h:8000/v1" and ad[-1] == "a.py"
    assert "--restore-chat-history" in ad and "--model-metadata-file" in ad
    meta = (setup.home / "aider-model-metadata.json").read_text()
    assert '"openai/m"' in meta and '"max_input_tokens": 16384' in meta


def test_opencode_events_of_a_two_prompt_session() -> None:
    """Real `opencode run --format json` of the FEM task's two prompts (the second with -s SESSION)."""
    state, turns = _feed("opencode-1.18.33-fem-prompt1.jsonl", feed_opencode, "opencode")
    state.prompt = 1
    for i, line in enumerate((FIX / "opencode-1.18.33-fem-prompt2.jsonl").read_text().splitlines()):
        turn = feed_opencode(state, line, 10.0 + i)
        if turn is not None:
            turns.append(turn)
    run = state.run
    assert run.session_id == "ses_dce87637effeMUbXicab1WYiIw"
    assert [t.prompt for t in turns] == [0, 1] and [t.index for t in turns] == [1, 2]
    assert turns[1].reason == "length" and turns[1].tokens.input == 7916 and turns[1].tokens.reasoning == 48
    assert run.tokens.total == sum(t.tokens.total for t in turns) > 15000


def test_opencode_lines_that_are_not_events() -> None:
    state = StreamState(run=AgentRun(client="opencode"))
    assert feed_opencode(state, "not json\n", 0.0) is None
    assert feed_opencode(state, "[1, 2]\n", 0.0) is None
    assert feed_opencode(state, '{"type": "step_finish", "part": {"tokens": "x"}}\n', 0.0) is not None
    err = '{"type": "error", "error": {"name": "APIError", "data": {"message": "context length"}}}\n'
    assert feed_opencode(state, err, 1.0) is None
    assert state.run.transcript[-1].kind == "error" and "context length" in state.run.transcript[-1].text


def test_opencode_thinking_parts_land_in_the_transcript() -> None:
    """Real output of `opencode run --format json --thinking`: the (random) reasoning is kept."""
    state, turns = _feed("opencode-1.18.33-thinking.jsonl", feed_opencode, "opencode")
    kinds = [e.kind for e in state.run.transcript]
    assert kinds == ["reasoning"] and len(state.run.transcript[0].text) > 20
    assert len(turns) == 1 and turns[0].tokens.reasoning == 48 and turns[0].tokens.input == 7284
