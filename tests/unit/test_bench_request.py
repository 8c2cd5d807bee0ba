"""BenchRequest (issue 16): one args model per run — the CLI fills it, the library builds the
scenarios and options, and the result file embeds it (never the API key)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from llmdeck.bench.request import BenchRequest, build_options, build_scenarios
from llmdeck.bench.runner import TargetInfo, new_result


def test_sweep_points_get_names_and_fresh_seeds() -> None:
    req = BenchRequest(
        target="http://127.0.0.1:8000", request_rates=[1.0, None], max_concurrencies=[4], seed=7
    )
    specs = build_scenarios(req)
    assert [s.name for s in specs] == ["random-512-256-r1.0-c4", "random-512-256-rinf-c4"]
    assert (
        [s.seed for s in specs] == [7, 8] and specs[0].request_rate == 1.0 and specs[1].max_concurrency == 4
    )


def test_prompts_imply_jsonl_and_multi_turn_talks_chat(tmp_path: Path) -> None:
    assert BenchRequest(target="x:1", prompts=tmp_path / "p.jsonl").normalized().workload == "jsonl"
    assert BenchRequest(target="x:1", workload="multi-turn").normalized().endpoint == "chat"
    # agent-sessions: chat sessions that keep --prefix-len (the shared system prompt) and --num-turns;
    # multi-turn drops the prefix (its sessions have no system prompt)
    req = BenchRequest(target="x:1", workload="agent-sessions", prefix_len=4096, num_turns=3, repeat=2)
    specs = build_scenarios(req)
    assert [(s.endpoint, s.prefix_len, s.num_turns) for s in specs] == [("chat", 4096, 3)] * 2
    assert specs[0].seed != specs[1].seed  # each repeat its own system prompt: no cross-run cache hits
    assert "prefix 4096 3 turns" in specs[0].label() and "sessions/s" not in specs[0].label()
    [mt] = build_scenarios(req.model_copy(update={"workload": "multi-turn", "repeat": 1}))
    assert mt.prefix_len == 0


def test_suite_and_repeats() -> None:
    specs = build_scenarios(BenchRequest(target="x:1", suite="smoke", repeat=2, temperature=0.0))
    assert specs and all(s.temperature == 0.0 for s in specs)
    assert len(specs) == 2 * len(build_scenarios(BenchRequest(target="x:1", suite="smoke")))


@pytest.mark.parametrize("bad", [{"input_len": 0}, {"burstiness": float("inf")}, {"workload": "nope"}])
def test_bad_values_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        BenchRequest.model_validate({"target": "x:1", **bad})


def test_result_embeds_the_request_without_the_key(tmp_path: Path) -> None:
    req = BenchRequest(target="http://127.0.0.1:8000", slo=["ttft_p99=10s"], num_prompts=3)
    options = build_options(req, out_path=tmp_path / "r.json", api_key="sk-secret-value")
    result = new_result(
        TargetInfo(base_url="http://127.0.0.1:8000", model="tiny"), build_scenarios(req), options, None
    )
    dumped = result.model_dump_json()
    assert result.request is not None and result.request["num_prompts"] == 3
    assert result.request["slo"] == ["ttft_p99=10s"] and "sk-secret-value" not in dumped
    assert options.slo["ttft_p99"] == 10.0
