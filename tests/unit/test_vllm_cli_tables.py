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
    SHORT_ALIASES,
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
    assert set(d["boolean_flags"]) <= BOOLEAN_FLAGS, set(d["boolean_flags"]) - BOOLEAN_FLAGS
    assert {k: v for k, v in d["short_aliases"].items() if k != "-h"}.items() <= SHORT_ALIASES.items()
    assert set(d["choices"]["dtype"]) == set(MODEL_DTYPES)
    assert set(d["choices"]["kv-cache-dtype"]) <= set(KV_CACHE_DTYPES)
    assert set(d["quantization_methods"]) <= VLLM_QUANTIZATION_METHODS
    assert set(d.get("multi_value_flags", [])) <= MULTI_VALUE_FLAGS  # dumps since dump_cli wrote them


@pytest.mark.parametrize("dump", DUMPS, ids=[p.stem for p in DUMPS])
def test_every_boolean_flag_leaves_the_next_flag_alone(dump: Path) -> None:
    for name in _load(dump)["boolean_flags"]:
        f = parse_vllm_flags([f"--{name}", "--max-model-len", "8192"])
        assert f.get(name) is True and f.get_int("max-model-len") == 8192, name
