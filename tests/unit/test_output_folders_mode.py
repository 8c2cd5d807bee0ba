"""Folders llmdeck makes for output the user names, under ``umask 000``: one that can hold a secret is
0700 as llmdeck's state is; plain results follow the umask as ``mkdir -p`` would (never group- or
world-writable where llmdeck already said so: util/atomic's results folders).

- ``tune --out DIR``: the trials' engine logs are copied there (logs/trial-NNN.log, world-readable
  copies of 0600 logs) — DIR and DIR/logs had been 0777 under umask 000, 0755 otherwise;
- ``eval --keep DIR``: each run's agent output, from an agent that ran with the server's key in its
  environment — DIR and DIR/TASK-N had been 0777;
- a file written with ``secret=True`` (a client config holding a key, `connect --file NEW/x.json`):
  the folder made for it had been 0755, listable by everyone."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmdeck.engines.spec import LaunchSpec
from llmdeck.settings import Settings
from llmdeck.tune.schema import TrialsHeader, TuneRequest
from llmdeck.tune.slo import parse_slo_targets
from llmdeck.tune.workload import load_shape
from llmdeck.util.atomic import atomic_write_text


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _header() -> TrialsHeader:
    req = TuneRequest.model_validate(
        {
            "base": LaunchSpec(name="tuned", engine="venv", model="Qwen3-0.6B"),
            "model_ref": "Qwen3-0.6B",
            "workload": "agent",
            "load": load_shape("agent", concurrency=4),
            "slo": parse_slo_targets("ttft_p99=2s"),
            "budget_s": 600,
            "trials": 3,
        }
    )
    return TrialsHeader(fingerprint=req.fingerprint(), request=req, space=[])


@pytest.mark.usefixtures("umask_000")
def test_a_tune_out_folder_and_its_logs_are_0700(tmp_path: Path) -> None:
    from llmdeck.tune.trial import keep_log
    from llmdeck.tune.trials import open_out_dir

    out = tmp_path / "results" / "tune-a"
    open_out_dir(out, _header(), resume=False)
    assert (_mode(out.parent), _mode(out)) == (0o700, 0o700)
    settings = Settings(state_dir=tmp_path / "state")
    settings.logs_dir.mkdir(parents=True)
    (settings.logs_dir / "tuned.log").write_text("INFO non-default args: {...}\n", encoding="utf-8")
    mine = tmp_path / "mine"  # an --out the user made beforehand (left as it is), logs/ made in it
    mine.mkdir(mode=0o755)
    assert keep_log("tuned", 1, settings, mine, time.time() - 60) == "logs/trial-001.log"
    assert (_mode(mine), _mode(mine / "logs")) == (0o755, 0o700)
    copy = mine / "logs" / "trial-001.log"
    assert _mode(copy) == 0o600 and copy.read_text(encoding="utf-8").startswith("INFO non-default")


@pytest.mark.usefixtures("umask_000")
def test_a_kept_eval_run_is_0700(tmp_path: Path) -> None:
    from llmdeck.evals.results import TaskRun
    from llmdeck.evals.session import keep_run

    ws, logs = tmp_path / "ws", tmp_path / "logs"
    ws.mkdir()
    logs.mkdir()
    (logs / "prompt-1.stdout").write_text("printenv\nOPENAI_API_KEY=sk-...\n", encoding="utf-8")
    keep = tmp_path / "kept"
    keep_run(ws, logs, keep, TaskRun(task="fizzbuzz", repeat=1))
    assert (_mode(keep), _mode(keep / "fizzbuzz-1")) == (0o700, 0o700)
    assert (keep / "fizzbuzz-1" / "logs" / "prompt-1.stdout").is_file()


@pytest.mark.usefixtures("umask_000")
def test_a_folder_made_for_a_secret_file_is_0700_and_for_a_result_0755(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "client" / "conf" / "opencode.json", '{"apiKey": "sk-x"}\n', secret=True)
    assert (_mode(tmp_path / "client"), _mode(tmp_path / "client" / "conf")) == (0o700, 0o700)
    assert _mode(tmp_path / "client" / "conf" / "opencode.json") == 0o600
    atomic_write_text(tmp_path / "runs" / "bench.json", "{}\n")  # plain results: as before
    assert _mode(tmp_path / "runs") == 0o755


@pytest.mark.usefixtures("umask_000")
def test_a_plain_folder_llmdeck_marks_follows_the_umask(tmp_path: Path) -> None:
    """A migration's specs or a tiny model hold no secret: made as `mkdir -p` makes them."""
    from llmdeck.util.owned import mark_made

    mark_made(tmp_path / "migrated", "llmdeck migrate ollama")
    assert _mode(tmp_path / "migrated") == 0o777
