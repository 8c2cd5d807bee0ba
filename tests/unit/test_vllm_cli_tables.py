"""llmdeck's tables of vLLM's command line (plan/vllm_cli.py) against the real parsers' dumps in
evidence/plan/vllm-cli/ (one per vLLM release llmdeck knows; dump_cli.py writes them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmdeck.plan.flags import parse_vllm_flags
from llmdeck.plan.quant import VLLM_QUANTIZATION_METHODS
from llmdeck.plan.vllm_cli import (
    BOOLEAN_FLAGS,
    KV_CACHE_DTYPES,
    MODEL_DTYPES,
    MULTI_VALUE_FLAGS,
    PAIRED_FLAGS,
    SHORT_ALIASES,
    paired_flag,
)
from repo_paths import ROOT

DUMPS = sorted((ROOT / "evidence" / "plan" / "vllm-cli").glob("vllm-*.json"))


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_a_dump_is_committed() -> None:
    assert any("0.32.0" in p.name for p in DUMPS)


@pytest.mark.parametrize("dump", DUMPS, ids=[p.stem for p in DUMPS])
def test_tables_cover_the_real_parser(dump: Path) -> None:
    d = _load(dump)
    opposite = {name for name in d["boolean_flags"] if paired_flag(name)}
    assert set(d["boolean_flags"]) - opposite <= BOOLEAN_FLAGS, (
        set(d["boolean_flags"]) - opposite - BOOLEAN_FLAGS
    )
    # every opposite spelling the parser takes is read as the flag it pairs with, and only those
    pairs = {k: v for k, v in d.get("inverse_flags", {}).items() if k not in BOOLEAN_FLAGS}
    assert {name: paired_flag(name) for name in opposite} == pairs
    assert {k: v for k, v in d["short_aliases"].items() if k != "-h"}.items() <= SHORT_ALIASES.items()
    assert set(d["choices"]["dtype"]) == set(MODEL_DTYPES)
    assert set(d["choices"]["kv-cache-dtype"]) <= set(KV_CACHE_DTYPES)
    assert set(d["quantization_methods"]) <= VLLM_QUANTIZATION_METHODS
    assert set(d.get("multi_value_flags", [])) <= MULTI_VALUE_FLAGS  # dumps since dump_cli wrote them


@pytest.mark.parametrize("dump", DUMPS, ids=[p.stem for p in DUMPS])
def test_every_boolean_flag_leaves_the_next_flag_alone(dump: Path) -> None:
    for name in _load(dump)["boolean_flags"]:
        f = parse_vllm_flags([f"--{name}", "--max-model-len", "8192"])
        paired = paired_flag(name)  # 0.33+'s --disable-x: --enable-x off
        assert f.get(paired or name) is (paired is None) and f.get_int("max-model-len") == 8192, name


def test_the_0_33_opposite_spelling_reads_as_the_flag_turned_off() -> None:
    """``--disable-prefix-caching`` (vLLM 0.33 on) is what ``--no-enable-prefix-caching`` is in every release:
    the planner sees prefix caching off, and the argv it renders any release takes."""
    f = parse_vllm_flags(
        ["--disable-prefix-caching", "--enable-sliding-window", "--disable-chunked-prefill=false"]
    )
    assert f.get_bool("enable-prefix-caching") is False and f.get_bool("disable-sliding-window") is False
    assert f.get_bool("enable-chunked-prefill") is True
    assert f.to_argv() == [
        "--no-enable-prefix-caching",
        "--no-disable-sliding-window",
        "--enable-chunked-prefill",
    ]
    assert "disable-log-requests" not in PAIRED_FLAGS and paired_flag("disable-log-requests") is None


def test_an_opposite_spelling_given_wrong_says_what_to_write() -> None:
    """A value that is no on/off word names the flag that turns it off; ``--no-`` of an opposite spelling
    (which no vLLM takes) names the flag it means."""
    from llmdeck.errors import UsageError

    with pytest.raises(UsageError) as bad:
        parse_vllm_flags(["--disable-prefix-caching=maybe"])
    assert (
        bad.value.hint
        == "Write --disable-prefix-caching to turn it on, --enable-prefix-caching to turn it off."
    )
    with pytest.raises(UsageError, match="no --no- form of --disable-prefix-caching") as neg:
        parse_vllm_flags(["--no-disable-prefix-caching", "--max-model-len", "8192"])
    assert neg.value.hint == "Write --enable-prefix-caching to turn it on."
    assert parse_vllm_flags(["--no-disable-sliding-window"]).get_bool("disable-sliding-window") is False
