"""Preflight of a Granite 4.0-H start on a venv: the venv's transformers decides whether vLLM < 0.26 dies.

vLLM 0.22.0 stopped on the H200 with KeyError: 'linear_attention' (evidence/plan/families/results-round2
rows 14-15): it builds Granite's layers by the legacy names that transformers >= 5.13 renames. Preflight
reads both versions (the transformers one from package metadata, nothing imported) and stops the start
before the weights load; with an older transformers, or vLLM >= 0.26, it lets it go.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime.preflight import run_preflight
from llmdeck.runtime.preflight.vllm_version import check_granite_layer_names, probe_venv_transformers
from llmdeck.settings import Settings
from repo_paths import ROOT

TINY = ROOT / "evidence" / "plan" / "families" / "configs" / "granite-4.0-h-tiny"


def _fake_python(vllm: str, transformers: str | None) -> object:
    """A stand-in for the venv's Python: answers the two version probes (no vLLM here to ask)."""

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        if "transformers" in argv[2]:
            if transformers is None:
                return subprocess.CompletedProcess(argv, 1, "", "PackageNotFoundError: transformers")
            return subprocess.CompletedProcess(argv, 0, f"{transformers}\n", "")
        return subprocess.CompletedProcess(argv, 0, f"{vllm}\n", "")

    return run


@pytest.mark.parametrize(
    ("vllm", "transformers", "stops"),
    [
        ("0.22.0", "5.19.0", True),  # what pip installs beside vLLM 0.22 today: the H200's failure
        ("0.25.1", "5.13.0", True),
        ("0.22.0", "5.12.1", False),  # the names are still the legacy ones
        ("0.26.0", "5.19.0", False),  # vLLM takes both spellings
        ("0.22.0", None, False),  # unknown: not guessed
    ],
)
def test_preflight_stops_granite_where_vllm_would_die(
    vllm: str, transformers: str | None, stops: bool, tmp_path: Path
) -> None:
    model = tmp_path / "granite"
    model.mkdir()
    (model / "config.json").write_bytes((TINY / "config.json").read_bytes())
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = LaunchSpec(name="g", engine="venv", model=str(model), port=18999, python="/usr/bin/python3")
    report = run_preflight(
        spec, need_bytes=None, settings=settings, run=_fake_python(vllm, transformers),  # type: ignore[arg-type]
        ollama_url="http://127.0.0.1:9",
    )  # fmt: skip
    found = [f for f in report.findings if f.id == "granite-layer-names"]
    assert bool(found) is stops
    if stops:
        assert found[0].severity == "error" and "KeyError: 'linear_attention'" in found[0].message
        assert "vllm>=0.26" in (found[0].fix or "") and "<5.13" in (found[0].fix or "")


def test_only_granite_is_asked() -> None:
    assert check_granite_layer_names("Qwen3ForCausalLM", "0.22.0", "5.19.0", where="x") == []


def test_the_transformers_probe_reads_a_real_venv() -> None:
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("no dev venv")
    version = probe_venv_transformers(str(python))
    assert version is not None and version[0].isdigit()
    assert probe_venv_transformers("/nonexistent/python") is None
