"""The committed H200 eval run (evidence/eval/h200/): two serving configurations of the seeds' coding
model shape, read back with llmdeck's own loader and compared by `report`, as the README says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli_helpers import run_cli
from repo_paths import ROOT

H200 = ROOT / "evidence" / "eval" / "h200"


def test_both_h200_runs_load_and_differ_only_in_the_kv_cache(capsys: Any, tmp_path: Path) -> None:
    from llmdeck.evals.results import load_eval_result

    fp8, bf16 = (load_eval_result(H200 / f"eval-{c}.json") for c in ("fp8", "bf16"))
    for res in (fp8, bf16):
        assert res.status == "complete" and res.suite == "core" and res.client_version == "1.18.33"
        assert res.target.server_version == "0.22.0" and res.host.gpus == ["NVIDIA H200"]
        assert [r.status for r in res.runs] == ["done"] * 5
        assert res.summary.tests_passed == 16 and res.summary.tests_total == 42
        for run in res.runs:  # the transcript of every turn is committed beside the result
            n = len(run.agent.turns) if run.agent else 0
            logs = H200 / f"{res.server_cache_config['cache_dtype'].replace('auto', 'bf16')}-keep"
            stdouts = list((logs / f"{run.task}-1" / "logs").glob("agent-stdout-*.txt"))
            assert n >= 1 and len(stdouts) == n  # one agent invocation per turn here (no tool calls)
    assert fp8.server_cache_config["cache_dtype"] == "fp8"
    assert bf16.server_cache_config["cache_dtype"] == "auto"
    blocks = [int(r.server_cache_config["num_gpu_blocks"]) for r in (fp8, bf16)]
    assert blocks == [28456, 14228] and blocks[0] == 2 * blocks[1]
    code, _, err = run_cli(
        [
            "report",
            str(H200 / "eval-fp8.json"),
            str(H200 / "eval-bf16.json"),
            "--html",
            str(tmp_path / "c.html"),
        ],
        capsys,
    )
    assert code == 0, err
    page = (tmp_path / "c.html").read_text()
    assert "2 serving configurations" in page and "28456" in page and "14228" in page
