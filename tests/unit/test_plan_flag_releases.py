"""Which vLLM release takes which flag (plan/data/vllm_flags.json, from each release's own parser) and the
rules on it: a flag no vLLM takes, one the target does not take yet or any more, argparse's abbreviations."""

from __future__ import annotations

import json
import subprocess
import sys

from llmdeck.plan.flag_releases import flag_table
from llmdeck.plan.flags import parse_vllm_flags
from repo_paths import ROOT
from test_plan_lint import found, plan

CLI = ROOT / "evidence" / "plan" / "vllm-cli"


def test_the_table_is_the_dumps() -> None:
    built = subprocess.run(
        [sys.executable, str(CLI / "flag_table.py")], capture_output=True, text=True, check=True
    ).stdout
    shipped = (ROOT / "src" / "llmdeck" / "plan" / "data" / "vllm_flags.json").read_text(encoding="utf-8")
    assert built == shipped, (
        "rebuild: python evidence/plan/vllm-cli/flag_table.py > src/llmdeck/plan/data/vllm_flags.json"
    )
    for dump in CLI.glob("vllm*.json"):
        d = json.loads(dump.read_text(encoding="utf-8"))
        release = flag_table().release_for(d["vllm_version"])
        assert release is not None and {
            f for f in flag_table().flags if flag_table().takes(release, f)
        } == set(d["flags"])


def test_a_misspelt_flag_is_the_error_vllm_stops_with() -> None:
    (f,) = found(plan("Qwen3-0.6B", ["--max-model-length", "4096"], vllm_version="0.32.0"), "flag-unknown")
    assert f.severity == "error" and f.message.startswith("vLLM 0.32.0 has no --max-model-length flag")
    assert f.fix == "--max-model-len (the nearest spelling)"
    # the target unknown: a misspelling of a flag vLLM has is still an error (with a value or without:
    # `--max-model-length 4096` had been a warning, `--enable-prefix-cachng` an error), a name unlike any
    # a warning (a newer vLLM may have it), with a value or without (without, it had been an error)
    (w,) = found(plan("Qwen3-0.6B", ["--max-model-length", "4096"]), "flag-unknown")
    assert w.severity == "error" and w.message.startswith("No vLLM 0.22.0-0.34.0 has a --max-model-length")
    for args in (["--frobnicate-widgets", "3"], ["--frobnicate-widgets"]):
        (n,) = found(plan("Qwen3-0.6B", args), "flag-unknown")
        assert n.severity == "warning" and n.fix == "check the spelling against `vllm serve --help`"
    (a,) = found(plan("Qwen3-0.6B", ["--enable", "x"], vllm_version="0.22.0"), "flag-unknown")
    assert "`ambiguous option`" in a.message and a.fix == "write the whole flag"


def test_a_flag_of_another_release() -> None:
    (gone,) = found(
        plan("Qwen3-0.6B", ["--max-num-partial-prefills", "2"], vllm_version="0.32.0"),
        "flag-not-in-target-vllm",
    )
    assert gone.message.startswith(
        "--max-num-partial-prefills is gone from vLLM 0.27.0 on; vLLM 0.32.0 stops"
    )
    assert (
        found(plan("Qwen3-0.6B", ["--max-num-partial-prefills", "2"], vllm_version="0.26.0"), gone.rule) == []
    )
    (new,) = found(plan("Qwen3-0.6B", ["--prefix-match-unit", "16"], vllm_version="0.25.1"), gone.rule)
    assert "came with vLLM 0.26.0; vLLM 0.25.1 stops" in new.message
    # an unknown target or one newer than every dump: not guessed at
    assert found(plan("Qwen3-0.6B", ["--max-num-partial-prefills", "2"]), gone.rule) == []
    assert (
        found(plan("Qwen3-0.6B", ["--max-num-partial-prefills", "2"], vllm_version="0.35.0"), gone.rule) == []
    )


def test_an_abbreviation_is_read_as_vllms_argparse_reads_it() -> None:
    flags = parse_vllm_flags(["--max-model", "4096", "--gpu_memory", "0.5", "--enable-prefix"])
    assert flags.values == {
        "max-model-len": "4096",
        "gpu-memory-utilization": "0.5",
        "enable-prefix-caching": True,
    }
    p = plan("Qwen3-0.6B", ["--max-model", "4096"], vllm_version="0.32.0")
    assert p.settings.max_model_len == 4096 and found(p, "flag-unknown") == []
