"""A running server's log stays bounded (llmdeck.engines.logkeeper): vLLM writes to it for weeks, and
`up` had rotated it only at a start."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from llmdeck.engines import logkeeper
from llmdeck.engines.logfiles import LOG_MODE, copy_truncate, open_log


def _wait(cond, timeout_s: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_copy_truncate_moves_the_content_along_and_the_engines_next_line_lands_at_the_start(
    tmp_path: Path,
) -> None:
    log = tmp_path / "s.log"
    (tmp_path / "s.log.1").write_text("older\n")
    engine = open_log(log, ["vllm", "serve", "m"])  # the engine's stdout: O_APPEND
    engine.write(b"x" * 5000 + b"\n")
    inode = log.stat().st_ino
    copy_truncate(log, "# note\n")
    engine.write(b"after\n")
    engine.close()
    assert log.read_bytes() == b"# note\nafter\n"  # no hole of 5001 zero bytes before it
    assert log.stat().st_ino == inode  # the engine's file, not a new one
    assert (tmp_path / "s.log.1").read_bytes().endswith(b"x" * 5000 + b"\n")
    assert (tmp_path / "s.log.1").stat().st_mode & 0o777 == LOG_MODE
    assert (tmp_path / "s.log.2").read_text() == "older\n"


def _group(log: Path) -> subprocess.Popen[bytes]:
    """A process group standing in for a server (its stdout the log)."""
    with open_log(log, ["sleep"]) as fh:
        return subprocess.Popen(["sleep", "60"], stdout=fh, start_new_session=True)


def test_the_keeper_rotates_past_its_bound_and_ends_with_the_server(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    server = _group(log)
    keeper = threading.Thread(
        target=logkeeper.keep, args=(server.pid, log, log.stat().st_ino, 4096, 0.05), daemon=True
    )
    keeper.start()
    with open(log, "ab") as engine:
        for _ in range(3):
            engine.write(b"y" * 5000 + b"\n")
            engine.flush()
            # moved along: the note written just after the truncate (a read between the two saw "")
            assert _wait(lambda: log.stat().st_size < 4096 and b"continued" in log.read_bytes())
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) < 4 * 4096 + 4 * 200
    assert "continued: the log before this one is s.log.1 (rotated past 4096 bytes)" in log.read_text()
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    keeper.join(timeout=5)
    assert not keeper.is_alive()


def test_the_keeper_ends_when_a_new_start_moved_its_log_along(tmp_path: Path) -> None:
    from llmdeck.engines.logfiles import rotate_log

    log = tmp_path / "s.log"
    server = _group(log)
    try:
        keeper = threading.Thread(
            target=logkeeper.keep, args=(server.pid, log, log.stat().st_ino, 4096, 0.05), daemon=True
        )
        keeper.start()
        rotate_log(log)
        open_log(log, ["vllm"]).close()  # the next start's log: that start has its own keeper
        keeper.join(timeout=5)
        assert not keeper.is_alive()
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _chatty_engine(tmp: Path) -> Path:
    """fake_chatty_engine: stands in for the venv's python; prints 200 KB, then stays (never ready)."""
    path = tmp / "fake_chatty_engine.sh"
    path.write_text("#!/bin/sh\nhead -c 200000 /dev/zero | tr '\\0' 'z'\necho\nexec sleep 300\n")
    path.chmod(0o755)
    return path


def _keepers(log: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "llmdeck.engines.logkeeper" in cmd and str(log) in cmd:
            found.append(proc)
    return found


def test_a_started_server_has_a_keeper_that_bounds_its_log_and_goes_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.errors import StartStopped
    from llmdeck.runtime import service
    from llmdeck.settings import Settings
    from llmdeck.util.net import free_port
    from security_helpers import fake_model_dir

    monkeypatch.setattr(logkeeper, "MAX_LOG_BYTES", 50_000)
    monkeypatch.setattr(logkeeper, "POLL_S", 0.1)
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = LaunchSpec(
        name="chatty",
        engine="venv",
        python=str(_chatty_engine(tmp_path)),
        model=str(fake_model_dir(tmp_path)),
        port=free_port(),
    )
    log = settings.logs_dir / "chatty.log"
    seen: list[bool] = []

    def stop_once_rotated() -> bool:
        seen.append(bool(_keepers(log)))
        return (settings.logs_dir / "chatty.log.1").exists() and log.stat().st_size < 50_000

    with pytest.raises(StartStopped):
        service.up(spec, settings, service.UpOptions.bare(timeout_s=60, stop_when=stop_once_rotated))
    assert any(seen)  # the keeper ran beside the server
    assert (settings.logs_dir / "chatty.log.1").stat().st_size > 200_000
    assert _wait(lambda: not _keepers(log), 10)  # and went with it


def test_up_attach_goes_on_printing_after_the_keeper_moved_the_log_along(tmp_path: Path) -> None:
    """`up --attach` printed the log from an offset it kept for ever: once the keeper had moved the log
    along in place (past 64 MiB), the file was shorter than that offset and the terminal stayed silent
    for the rest of the server's weeks. A shorter log (or another file) is read from its start."""
    from llmdeck.errors import OperationError
    from llmdeck.runtime import attach
    from llmdeck.runtime.state import ServerRecord

    log = tmp_path / "s.log"
    server = _group(log)
    record = ServerRecord.model_construct(name="s", pid=server.pid, log_path=log)
    shown: list[str] = []

    def follow() -> None:
        with pytest.raises(OperationError):  # the server exits by itself at the end of the test
            attach.follow(record, None, shown.append)  # type: ignore[arg-type]

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    try:
        with open(log, "ab") as engine:
            engine.write(b"before " + b"x" * 5000 + b"\n")
            engine.flush()
            assert _wait(lambda: "before" in "".join(shown))
            copy_truncate(log, "# moved along\n")
            engine.write(b"after the move\n")
            engine.flush()
            assert _wait(lambda: "after the move" in "".join(shown), 5)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    follower.join(timeout=10)
    assert not follower.is_alive()
    assert "# moved along" in "".join(shown)


def test_a_log_that_floods_is_moved_along_near_its_bound_not_a_whole_poll_later(tmp_path: Path) -> None:
    """The keeper looked every 5 s whatever the log did: an engine printing 50 MB/s (a warning in a tight
    loop) made 250 MB logs before each move, 900 MB in all against the 4 x 64 MiB meant (measured with
    the real keeper). Once it has seen how fast the log grows it looks again before the bound is
    reached. Here: a 2 s poll, 1 MB/s into a 100 kB bound."""
    log = tmp_path / "s.log"
    server = _group(log)
    keeper = threading.Thread(
        target=logkeeper.keep, args=(server.pid, log, log.stat().st_ino, 100_000, 2.0), daemon=True
    )
    keeper.start()
    moved: list[int] = []
    try:
        with open(log, "ab") as engine:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 5.0:
                engine.write(b"w" * 20_000 + b"\n")
                engine.flush()
                time.sleep(0.02)
                first = tmp_path / "s.log.1"
                if time.monotonic() - t0 > 3.0 and first.exists():
                    moved.append(first.stat().st_size)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    keeper.join(timeout=10)
    assert moved and max(moved) < 500_000  # a move a whole poll later holds ~2 MB
