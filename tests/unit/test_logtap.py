"""engines/logtap.py: the lines a starting server's log gains, a readiness poll at a time. CommandTap
runs a real command (`sh`, standing in for `docker logs -f`)."""

from __future__ import annotations

import time
from pathlib import Path

from llmdeck.engines.logtap import TAKE_CAP, CommandTap, FileTap


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
