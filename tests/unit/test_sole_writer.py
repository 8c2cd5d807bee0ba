"""One run at a time writes a result: two benches given one --out had each written it, the last one's
result replacing the other's (and two tunes in one folder mixed their trials). A second run is refused
at once, exit 2, before it measures anything; the lock lives in the state folder, not beside the file.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fuzz_helpers import assert_clean_failure, run_main


def _held(fuzz_env: dict[str, str], target: Path) -> object:
    from llmdeck.util.filelock import sole_writer

    return sole_writer(Path(fuzz_env["tmp"]) / "state" / "locks", target, "test run")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("what", "argv"),
    [
        ("bench", ["bench", "http://127.0.0.1:9", "--model", "x", "--num-prompts", "2"]),
        ("bench comparison", ["bench", "--compare", "http://127.0.0.1:9", "http://127.0.0.1:10",
                              "--model", "x"]),
        ("eval", ["eval", "--client", "opencode", "--agent-bin", "/bin/true", "--task", "fix-intervals",
                  "--server", "http://127.0.0.1:9", "--model", "x"]),
    ],
    ids=["bench", "bench-compare", "eval"],
)  # fmt: skip
def test_a_second_run_into_one_result_is_refused(
    what: str, argv: list[str], fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = Path(fuzz_env["tmp"]) / "result.json"
    with _held(fuzz_env, out):  # type: ignore[attr-defined]
        code, _out, err, elapsed = run_main([*argv, "--out", str(out)], capsys)
    assert_clean_failure(
        code, err, elapsed, want=2, needles=(f"Another {what} is writing", "another --out"), seconds=20
    )
    assert not out.exists()  # nothing written by the refused run
    assert not list(out.parent.glob("*.lock")), "no lock file beside the user's file"
    # once the first has ended, the lock is free: the run goes on (and fails on the closed port)
    code, _out, err, _ = run_main([*argv, "--out", str(out)], capsys)
    assert "Another" not in err


def test_a_second_tune_into_one_folder_is_refused(tmp_path: Path, tiny_model_dir: Path) -> None:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.errors import UsageError
    from llmdeck.settings import Settings
    from llmdeck.tune.search import run_tune
    from llmdeck.util.filelock import sole_writer
    from test_tune_parts import _req

    base = LaunchSpec(name="tuned", engine="venv", model=str(tiny_model_dir), python="/bin/false")
    req = _req(str(tiny_model_dir), machine="h200", trials=1).model_copy(update={"base": base})
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    t0 = time.monotonic()
    with sole_writer(settings.locks_dir, tmp_path / "out", "tune"), pytest.raises(UsageError) as info:
        run_tune(req, settings, tmp_path / "out", lambda _e: None)
    assert "Another tune is writing" in info.value.message and time.monotonic() - t0 < 20
    assert not (tmp_path / "out" / "trials.jsonl").exists()


@pytest.mark.parametrize("earlier", [False, True], ids=["no-file", "an-earlier-file"])
def test_an_eval_interrupted_before_it_wrote_does_not_name_a_result(
    earlier: bool,
    fuzz_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C before the first write had said 'the finished runs are in out.json', a file not there (or
    an earlier run's)."""
    import llmdeck.evals.runner as runner

    async def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_eval", interrupted)
    out = Path(fuzz_env["tmp"]) / "eval.json"
    if earlier:
        out.write_text("")  # empty: an output llmdeck may replace
    argv = ["eval", "--client", "opencode", "--agent-bin", "/bin/true", "--task", "fix-intervals"]
    code, _out, err, _ = run_main(
        [*argv, "--server", "http://127.0.0.1:9", "--model", "x", "--out", str(out)], capsys
    )
    flat = " ".join(err.split())
    assert code == 130 and "interrupted before anything was written" in flat and str(out) not in flat, flat


def test_the_lock_goes_when_the_run_ends_and_a_new_run_takes_a_fresh_one(tmp_path: Path) -> None:
    """One lock file per result (a bench's default --out is new each time) had piled up in locks/."""
    from llmdeck.errors import UsageError
    from llmdeck.util.filelock import sole_writer

    locks = tmp_path / "locks"
    with sole_writer(locks, tmp_path / "a.json", "bench"):
        (held,) = locks.iterdir()
        with pytest.raises(UsageError), sole_writer(locks, tmp_path / "a.json", "bench"):
            pass
        assert held.exists()  # the refused run removes nothing
        with sole_writer(locks, tmp_path / "b.json", "bench"):  # another result: its own lock
            assert len(list(locks.iterdir())) == 2
    assert not list(locks.iterdir())
    with sole_writer(locks, tmp_path / "a.json", "bench"):  # free again
        pass


@pytest.mark.timeout(120)
def test_a_second_tune_of_one_request_leaves_the_first_ones_trial_running(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Two `llmdeck tune` of one model and workload, given two --out: the second stopped the first's
    running trial server as "left by an interrupted run" (the first's trial then failed on a server
    gone). The second is refused at once now, the first's server left alone. The engine is
    fake_loading_engine_tune (a "Python" that answers the version probe and sleeps when asked to serve).
    """
    import threading

    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.errors import UsageError
    from llmdeck.runtime import launcher
    from llmdeck.runtime.engine_state import is_alive
    from llmdeck.runtime.state import StateStore
    from llmdeck.settings import Settings
    from llmdeck.tune.search import run_tune
    from llmdeck.tune.trial import server_name
    from test_tune_parts import _req

    python = tmp_path / "fake_loading_engine_tune.sh"
    python.write_text('#!/bin/sh\ncase "$1" in -c) echo 0.22.0; exit 0;; esac\nexec sleep 300\n')
    python.chmod(0o755)
    base = LaunchSpec(name="tuned", engine="venv", model=str(tiny_model_dir), python=str(python))
    req = _req(str(tiny_model_dir), machine="h200", trials=1, ready_timeout_s=100).model_copy(
        update={"base": base}
    )
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    store, name = StateStore(settings.servers_dir), server_name(req)
    first = threading.Thread(target=run_tune, args=(req, settings, tmp_path / "a", lambda _e: None))
    first.start()
    try:
        deadline = time.monotonic() + 60
        while not store.path(name).exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        trial = store.load(name)  # the first tune's trial server, loading
        with pytest.raises(UsageError) as info:
            run_tune(req, settings, tmp_path / "b", lambda _e: None)
        assert "Another tune of this model and workload" in info.value.message
        assert is_alive(trial), "the second tune stopped the first one's trial server"
    finally:
        if store.path(name).exists():
            launcher.down(name, settings)
        first.join(60)
