"""Parsing the vLLM flags after `--`, and rendering them back."""

from __future__ import annotations

import pytest

from llmdeck.errors import UsageError
from llmdeck.plan.flags import parse_vllm_flags


def test_space_and_equals_forms_and_booleans() -> None:
    f = parse_vllm_flags(
        [
            "--max-model-len=131072",
            "--kv-cache-dtype",
            "fp8",
            "--enable-prefix-caching",
            "--max_num_seqs",
            "8",
        ]
    )
    assert f.get_int("max-model-len") == 131072
    assert f.get("kv-cache-dtype") == "fp8"
    assert f.get_bool("enable-prefix-caching") is True
    assert f.get_int("max-num-seqs") == 8  # underscores normalised


def test_negated_boolean_and_explicit_false() -> None:
    f = parse_vllm_flags(["--no-enable-prefix-caching", "--enable-chunked-prefill=false", "--enforce-eager"])
    assert f.get_bool("enable-prefix-caching") is False
    assert f.get_bool("enable-chunked-prefill") is False
    assert f.get_bool("enforce-eager") is True
    assert f.to_argv() == ["--no-enable-prefix-caching", "--no-enable-chunked-prefill", "--enforce-eager"]


def test_json_values_and_short_alias() -> None:
    f = parse_vllm_flags(["--default-chat-template-kwargs", '{"enable_thinking": false}', "-tp", "2"])
    assert f.get_json("default-chat-template-kwargs") == {"enable_thinking": False}
    assert f.get_int("tensor-parallel-size") == 2


def test_pasted_vllm_serve_command_with_positional_model() -> None:
    f = parse_vllm_flags(["--", "vllm", "serve", "/models/x", "--port", "8001"])
    assert f.positional == ["/models/x"]
    assert f.get_int("port") == 8001
    assert f.to_argv() == ["--port", "8001"]


def test_value_missing_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="has no value"):
        parse_vllm_flags(["--max-model-len", "--enforce-eager"])
    with pytest.raises(UsageError, match="whole number"):
        parse_vllm_flags(["--max-model-len", "lots"]).get_int("max-model-len")


def test_round_trip() -> None:
    args = ["--max-model-len", "8192", "--enable-auto-tool-choice", "--no-enable-prefix-caching"]
    assert parse_vllm_flags(args).to_argv() == args
