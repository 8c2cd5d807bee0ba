"""engines/logtap.py: the lines a starting server's log gains, a readiness poll at a time. CommandTap
runs a real command (`sh`, standing in for `docker logs -f`), or `docker logs -f` of tests/fake_docker.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmdeck.engines.docker.logmark import StampedTap, begin
from llmdeck.engines.logtap import TAKE_CAP, CommandTap, FileTap
from llmdeck.util.net import free_port
from repo_paths import ROOT


def _take_until(tap: CommandTap, want: int, limit_s: float = 10.0) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + limit_s
    while len(got) < want and time.monotonic() < deadline:
        got += tap.take()
        time.sleep(0.05)
    return got


def test_a_quiet_command_never_holds_a_take_and_its_lines_are_kept_once(tmp_path: Path) -> None:
    log = tmp_path / "d.log"
    log.write_text("# llmdeck: header\n")
    script = "printf 'one\\ntwo\\nhalf'; sleep 30"
    tap = CommandTap(["sh", "-c", script], log)
    try:
        assert _take_until(tap, 2) == ["one", "two"]
        began = time.monotonic()
        assert tap.take() == []  # nothing new: answered at once, not after the command's 30 s
        assert time.monotonic() - began < 1.0
    finally:
        tap.close()
    assert tap.proc.returncode is not None  # the follower is gone with the tap
    assert log.read_text() == "# llmdeck: header\none\ntwo\nhalf\n"  # the last line without end kept


def test_secrets_are_redacted_in_the_file_and_a_flood_is_taken_in_bounded_steps(tmp_path: Path) -> None:
    log = tmp_path / "d.log"
    log.write_text("")
    script = "echo 'HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123'; yes x | head -c 4000000"
    tap = CommandTap(["sh", "-c", script], log)
    try:
        taken = _take_until(tap, 1)
        assert taken[0].startswith("HF_TOKEN=")  # the caller sees the line; the file gets it redacted
        time.sleep(0.5)  # the flood fills the pipe: each take reads what is there, at most TAKE_CAP
        for _ in range(3):
            step = tap.take()
            assert len(step) <= TAKE_CAP // 2 + 1
            taken += step
    finally:
        tap.close()
    text = log.read_text()
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in text
    assert text.count("x\n") >= taken.count("x")  # every line taken is in the file (close takes the rest)


def test_a_file_tap_gives_what_the_file_gained(tmp_path: Path) -> None:
    log = tmp_path / "d.log"
    tap = FileTap(log)
    assert tap.take() == []  # no file yet
    log.write_text("a\nb")
    assert tap.take() == ["a"]
    with open(log, "a") as fh:
        fh.write("c\n")
    assert tap.take() == ["bc"]


def _group(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies are gone for this purpose)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()  # noqa: SIM115
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                found.append(int(entry))
    return found


@pytest.fixture
def docker_tap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StampedTap]:
    """A readiness tap on a fake container (tests/fake_docker.py), its `docker` a wrapper that runs the
    client as its child (as a plugin or snap wrapper does): killing the wrapper alone leaves the client."""
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\n{sys.executable} {ROOT / "tests" / "fake_docker.py"} "$@"\n')
    client.chmod(0o755)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "fake-docker" / "state.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    argv = [str(client), "run", "-d", "--name", "llmdeck-d", "img", "--port", str(free_port())]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)
    log = tmp_path / "d.log"
    tap = StampedTap([str(client), "logs", "-f", "-t", "llmdeck-d"], log, begin(log, "# llmdeck: header\n"))
    try:
        yield tap
    finally:
        with contextlib.suppress(OSError):
            os.killpg(tap.proc.pid, signal.SIGKILL)
        subprocess.run([str(client), "rm", "-f", "llmdeck-d"], capture_output=True, timeout=30, check=False)


def test_an_interrupt_while_the_tap_closes_still_reaps_docker_logs(
    docker_tap: StampedTap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C (or SIGTERM) while `up` closed the tap broke off the close before its kill: the
    `docker logs -f` child followed the container until the container went. Now its group is killed."""
    _take_until(docker_tap, 1)

    def interrupted() -> tuple[list[bytes], int]:
        raise KeyboardInterrupt

    monkeypatch.setattr(docker_tap, "_read", interrupted)
    with pytest.raises(KeyboardInterrupt):
        docker_tap.close()
    deadline = time.monotonic() + 5
    while _group(docker_tap.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group(docker_tap.proc.pid) == []  # the wrapper and the client it runs
    assert docker_tap.proc.returncode is not None and docker_tap.proc.stdout is not None
    assert docker_tap.proc.stdout.closed


def test_a_second_signal_while_the_tap_is_reaped_does_not_cut_it_short(docker_tap: StampedTap) -> None:
    """The reaping is shielded as up's clean-up is (util/interrupts.py): a SIGINT that comes while it
    waits for the killed client is noted, and the wait and the pipe's close still happen."""
    _take_until(docker_tap, 1)
    real_wait = docker_tap.proc.wait

    def wait_signalled(timeout: float | None = None) -> int:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)  # the handler runs here: KeyboardInterrupt had been raised out of the close
        return real_wait(timeout)

    docker_tap.proc.wait = wait_signalled  # type: ignore[method-assign]
    try:
        docker_tap.close()
    except KeyboardInterrupt:  # raised again once the tap is reaped: the user's Ctrl-C is not lost
        reaped = docker_tap.proc.stdout is not None and docker_tap.proc.stdout.closed
        assert reaped, "the SIGINT cut the reaping short"
    else:
        pytest.fail("the SIGINT that came while the tap was reaped was lost")
    assert docker_tap.proc.returncode is not None and docker_tap.proc.stdout is not None
    assert docker_tap.proc.stdout.closed and _group(docker_tap.proc.pid) == []
