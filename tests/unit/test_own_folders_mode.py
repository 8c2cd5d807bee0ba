"""Folders llmdeck makes are never group/world-writable, even under ``umask 000``: the state root had
been made 0777 there (its subfolders 0700), so any local user could rename ``servers/`` and plant
records llmdeck then trusted (pids to signal, log paths). A folder the user made is left as it is."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmdeck.engines.logfiles import open_log
from llmdeck.runtime.container_start import make_compile_cache
from llmdeck.runtime.state import StateStore
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.filelock import sole_writer
from llmdeck.util.localfile import ensure_dir


@pytest.fixture
def umask_000() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _not_writable_by_others(*paths: Path) -> None:
    for path in paths:
        assert _mode(path) & 0o022 == 0, f"{path} is {oct(_mode(path))}"


@pytest.mark.usefixtures("umask_000")
def test_the_state_root_made_for_the_records_is_0700(tmp_path: Path) -> None:
    state = tmp_path / "home" / ".local" / "state" / "llmdeck"
    StateStore(state / "servers").ensure_writable()
    assert _mode(state) == 0o700
    _not_writable_by_others(state.parent, state.parent.parent, state / "servers")


@pytest.mark.usefixtures("umask_000")
def test_the_state_root_made_for_a_log_or_a_lock_is_0700(tmp_path: Path) -> None:
    with open_log(tmp_path / "a" / "logs" / "x.log", ["vllm"]):
        pass
    assert _mode(tmp_path / "a") == 0o700
    with sole_writer(tmp_path / "b" / "locks", tmp_path / "out.json", "bench"):
        assert _mode(tmp_path / "b") == 0o700
        assert _mode(tmp_path / "b" / "locks") == 0o700


@pytest.mark.usefixtures("umask_000")
def test_a_results_folder_and_a_compile_cache_llmdeck_makes_are_not_writable_by_others(
    tmp_path: Path,
) -> None:
    atomic_write_json(tmp_path / "runs" / "deep" / "bench.json", {"kind": "x"})
    _not_writable_by_others(tmp_path / "runs", tmp_path / "runs" / "deep")
    from llmdeck.engines.spec import LaunchSpec

    cache = tmp_path / "cache" / "engine" / "docker-compile"
    make_compile_cache(LaunchSpec(name="s", model="m", compile_cache=str(cache)))
    _not_writable_by_others(tmp_path / "cache", tmp_path / "cache" / "engine", cache)


@pytest.mark.usefixtures("umask_000")
def test_a_folder_the_user_made_keeps_its_mode(tmp_path: Path) -> None:
    mine = tmp_path / "shared"
    mine.mkdir(mode=0o777)
    os.chmod(mine, 0o777)
    ensure_dir(mine / "llmdeck" / "logs")
    assert _mode(mine) == 0o777
    assert _mode(mine / "llmdeck") == 0o700


def test_a_file_in_the_way_is_still_named(tmp_path: Path) -> None:
    from llmdeck.errors import UsageError

    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="is a file"):
        ensure_dir(tmp_path / "f" / "logs")
