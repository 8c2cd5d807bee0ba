"""A docker server's log file and its mark (engines/docker/logmark.py) against what can go wrong: a
start-up that floods the readiness tap, a mark file that is corrupt or left behind, a `down` while the
tap still copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from llmdeck.engines.docker import DockerCLI
from llmdeck.engines.docker.logmark import Mark, MarkLock, Place, append_lines, begin, forget, mark_path
from llmdeck.engines.docker.logsave import save_rest
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import StartStopped
from llmdeck.runtime import launcher, service
from llmdeck.settings import Settings
from llmdeck.util.net import free_port
from repo_paths import ROOT
from security_helpers import fake_model_dir

FAKE = ROOT / "tests" / "fake_docker.py"

TS = "2026-11-29T20:35:11.000000001Z"


def _answer(text: str, rc: int = 0) -> DockerCLI:
    """A DockerCLI whose `docker logs -t` prints ``text`` (what the daemon printed, recorded)."""

    def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, rc, text, "")

    return DockerCLI("docker", run=run)


def test_the_taps_start_up_copy_stops_at_its_bound_and_the_save_takes_the_rest(tmp_path: Path) -> None:
    """The readiness tap appended docker's start-up to the log file without bound (only what `down`
    saves was bounded): a start-up that logged in a loop for the whole ready timeout grew the file past
    the 64 MiB a log is kept under. Its copy now stops at its share of the bound; the save copies the
    rest from the mark (the newest part of it, with a note), the whole file under the bound."""
    log = tmp_path / "d.log"
    mark = begin(log, "# llmdeck: header\n")
    line = b"x" * 99
    first = [(f"2026-11-29T20:35:11.{i:09d}Z", line) for i in range(1, 6)]
    place = Place(mark)
    assert append_lines(log, first, place, max_bytes=1000) == Mark(first[-1][0], 1)
    more = [(f"2026-11-29T20:35:12.{i:09d}Z", line) for i in range(1, 6)]
    assert append_lines(log, more, place, max_bytes=1000) is None  # past its share: it copies no more
    text = log.read_text()
    assert text.count("x" * 99) == 5 and "the rest is saved by `down`" in text
    rest = "".join(f"{ts} {'y' * 99}\n" for ts, _ in [*first, *more])
    save_rest(log, "d", header="# llmdeck: header\n", cli=_answer(rest), max_bytes=2000)
    saved = log.read_text()
    assert len(saved.encode()) <= 2000
    assert saved.count("x" * 99) == 5 and saved.count("y" * 99) >= 1  # the newest of the rest
    assert saved.splitlines()[-1] == "y" * 99


def test_a_mark_with_a_timestamp_that_is_not_dockers_is_no_mark(tmp_path: Path) -> None:
    """A mark file for the log's inode whose timestamp is not docker's (a torn or hand-edited file) made
    `down` an internal error (ValueError from the --since it computes): docker's log was never saved and
    the container never removed. Such a mark is no mark: the log is rewritten from its first line."""
    log = tmp_path / "d.log"
    begin(log, "# llmdeck: header\n")
    for ts in ("garbage", "None", "2026-11-29T20:35:11Z; rm -rf /", ""):
        mark_path(log).write_text(json.dumps({"inode": os.stat(log).st_ino, "ts": ts, "n": 1}))
        with MarkLock(log) as lock:
            assert lock.read() is None or ts == ""
    mark_path(log).write_text(json.dumps({"inode": os.stat(log).st_ino, "ts": "x" * 40, "n": 3}))
    save_rest(log, "d", header="# llmdeck: header\n", cli=_answer(f"{TS} one\n{TS} two\n"))
    assert log.read_text() == "# llmdeck: header\none\ntwo\n"
    with MarkLock(log) as lock:
        assert lock.read() == Mark(TS, 2)


def test_a_tap_after_its_mark_was_removed_copies_nothing_and_leaves_no_mark(tmp_path: Path) -> None:
    """`down` removes the mark with the record; a tap that still follows docker's output (the start
    awaiting that server) had made an empty mark file again, left behind for good."""
    log = tmp_path / "d.log"
    mark = begin(log, "# llmdeck: header\n")
    mark_path(log).unlink()
    assert append_lines(log, [(TS, b"late")], Place(mark)) is None
    assert not mark_path(log).exists()
    assert log.read_text() == "# llmdeck: header\n"


def test_a_down_while_a_container_start_waits_is_named_by_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`llmdeck down d` while `llmdeck up d --engine docker` waited: local engines' starts named the
    down, a container's said "exited before it was ready; no known cause matched its log" (exit 1), as
    if it had crashed (`down` wrote no "stopping: WHO" note for a container). It names the down now."""
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    client.chmod(0o755)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "fake-docker" / "state.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = LaunchSpec(name="d", engine="docker", model=str(fake_model_dir(tmp_path)), port=free_port())
    record = service.start(spec, settings, service.UpOptions.bare(timeout_s=60))
    done: list[str] = []

    def poll(client: httpx.Client, base_url: str) -> bool:
        if not done:
            done.append(launcher.down("d", settings))
        return False

    monkeypatch.setattr(launcher, "_answers", poll)
    try:
        with pytest.raises(StartStopped) as exc:
            service.await_ready(record, settings, service.UpOptions.bare(timeout_s=60))
    finally:
        subprocess.run([str(client), "rm", "-f", "llmdeck-d"], capture_output=True, check=False)
    assert done == ["stopped"]
    assert "stopped by `llmdeck down`" in exc.value.message
    assert " stopping: `llmdeck down`" in record.log_path.read_text()


def _stamped_long_line(tmp_path: Path) -> tuple[bytes, Path]:
    """`docker logs -t` of a 3 MiB line and one more: docker's stamp again before each 16 KiB part."""
    from llmdeck.engines.docker.logmark import PART

    stamp = TS.encode() + b" "
    body = bytes(range(97, 123)) * ((3 << 20) // 26)
    raw = b"".join(stamp + body[i : i + PART] for i in range(0, len(body), PART)) + b"\n"
    out = tmp_path / "docker-logs.out"
    out.write_bytes(raw + stamp + b"next line\n")
    return body, out


def test_a_line_past_a_mib_keeps_no_docker_stamps_in_the_tap_and_the_save(tmp_path: Path) -> None:
    """A line over 1 MiB (a request logged with its whole prompt) is cut where the readers cut long
    lines; the part after the cut began mid-part, so docker's stamps inside it (one per 16 KiB) were no
    longer taken out: the log file had 128 of them inside a 3 MiB line. The cut is now made at one of
    docker's stamps, the same place for the tap and the save: no stamp is left, no byte lost, and a
    save after the tap finds its mark (adds nothing)."""
    import time

    from llmdeck.engines.docker.logmark import StampedTap

    body, out = _stamped_long_line(tmp_path)
    log = tmp_path / "d.log"
    tap = StampedTap(["sh", "-c", f"cat {out}; sleep 2"], log, begin(log, "# llmdeck: header\n"))
    deadline = time.monotonic() + 10
    seen: list[str] = []
    while "next line" not in seen and time.monotonic() < deadline:
        seen += tap.take()
        time.sleep(0.05)
    tap.close()
    data = log.read_bytes()
    assert b"Z " not in data and data.replace(b"\n", b"").count(body) == 1
    assert data.endswith(b"\nnext line\n")
    client = tmp_path / "docker"
    client.write_text(f"#!/bin/sh\ncat {out}\n")
    client.chmod(0o755)
    assert save_rest(log, "d", header="# llmdeck: header\n", cli=DockerCLI(str(client))) == 0
    assert log.read_bytes() == data


def test_a_second_down_at_once_adds_no_note_that_the_log_could_not_be_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `llmdeck down d` at once: both loaded the record; the second's stop came after the first had
    saved docker's log and removed the container, and appended "the container's log could not be
    saved: … No such container" to a log that was saved whole. The second now sees the save done."""
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    client.chmod(0o755)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "fake-docker" / "state.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = LaunchSpec(name="d", engine="docker", model=str(fake_model_dir(tmp_path)), port=free_port())
    try:
        record = service.await_ready(
            service.start(spec, settings, service.UpOptions.bare(timeout_s=60)), settings
        )
        assert launcher.down("d", settings) == "stopped"
        saved = record.log_path.read_text()
        assert launcher.stop_engine(record) == "gone"  # the second down, its record loaded before
    finally:
        subprocess.run([str(client), "rm", "-f", "llmdeck-d"], capture_output=True, check=False)
    assert record.log_path.read_text() == saved
    assert not mark_path(record.log_path).exists()


def test_a_save_that_awaited_a_lock_whose_mark_was_then_forgotten_does_nothing(tmp_path: Path) -> None:
    """The same race one step later: the second `down` had opened the mark before the first removed it
    (its container gone): it saw a mark, asked docker, and noted the failure."""
    log = tmp_path / "d.log"
    begin(log, "# llmdeck: header\n")
    waiting = MarkLock(log)  # the second down's, opened before the first one's stop ended
    forget(log)
    with waiting as lock:
        assert lock.forgotten()
    with MarkLock(log) as lock:  # a mark made anew (a later start's) is this lock's own
        assert not lock.forgotten()


def test_a_mark_path_that_is_a_folder_is_named_at_the_start_and_does_not_break_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NAME.log.mark a folder (anything but a file): the start's tap raised IsADirectoryError, an
    internal error; `down` removed the container, then failed on the mark (an internal error, its
    record left behind). The start names the path now (exit 2, as for a log path in the way), and
    `down` saves what it can, notes the rest and forgets the server."""
    from types import SimpleNamespace

    from llmdeck.engines.docker.engine import DockerEngine
    from llmdeck.errors import UsageError
    from llmdeck.runtime.state import StateStore

    log = tmp_path / "d.log"
    mark_path(log).mkdir()
    handle = SimpleNamespace(name="d", log_path=log, argv=["vllm", "serve"])
    with pytest.raises(UsageError) as exc:
        DockerEngine().tap_log(handle)  # type: ignore[arg-type]
    assert str(mark_path(log)) in exc.value.message
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    client.chmod(0o755)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "fake-docker" / "state.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = LaunchSpec(name="d", engine="docker", model=str(fake_model_dir(tmp_path)), port=free_port())
    try:
        record = service.await_ready(
            service.start(spec, settings, service.UpOptions.bare(timeout_s=60)), settings
        )
        mark_path(record.log_path).unlink()
        mark_path(record.log_path).mkdir()
        assert launcher.down("d", settings) == "stopped"
    finally:
        subprocess.run([str(client), "rm", "-f", "llmdeck-d"], capture_output=True, check=False)
    assert not StateStore(settings.servers_dir).path("d").exists()
    assert "the container's log could not be saved" in record.log_path.read_text()


@pytest.mark.timeout(120)
def test_a_second_ctrl_c_while_up_stops_a_container_does_not_leave_it_running(tmp_path: Path) -> None:
    """Ctrl-C twice in a terminal while `up --engine docker` waited: the terminal sends each SIGINT to
    the whole foreground group, the `docker stop` client that the clean-up runs too. llmdeck held the
    second one, but the client died of it: the stop failed (DockerError), the clean-up broke off, and
    the container ran on, never removed, its record gone. Docker's clients now run in their own
    session (llmdeck stops them itself when it is interrupted)."""
    import signal
    import time

    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    client.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMDECK_")}
    env.update(
        FAKE_DOCKER_STATE=str(tmp_path / "fake-docker" / "state.json"),
        FAKE_DOCKER_CONTAINER="loading",
        FAKE_DOCKER_STOP_S="3",
        PYTHONPATH=os.pathsep.join(sys.path),
        PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        LLMDECK_STATE_DIR=str(tmp_path / "state"),
        LLMDECK_CACHE_DIR=str(tmp_path / "cache"),
    )
    argv = [
        sys.executable,
        "-m",
        "llmdeck",
        "up",
        "--engine",
        "docker",
        "--model",
        str(fake_model_dir(tmp_path)),
    ]
    argv += ["--name", "d", "--port", str(free_port()), "--force", "--no-watchdog"]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    log = tmp_path / "state" / "logs" / "d.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.is_file() and "vLLM API server" in log.read_text()):
        time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the clean-up begins, `docker stop` takes 3 s
        time.sleep(1.5)
        os.killpg(proc.pid, signal.SIGINT)  # the second one, into `docker stop`
        _out, err = proc.communicate(timeout=60)
        inspect = subprocess.run(
            [str(client), "inspect", "llmdeck-d"], env=env, capture_output=True, text=True
        )
    finally:
        subprocess.run([str(client), "rm", "-f", "llmdeck-d"], env=env, capture_output=True, check=False)
    assert proc.returncode == 130, err[-2000:]
    assert inspect.returncode != 0, f"the container still exists: {inspect.stdout[:500]} {err[-2000:]}"


def test_down_of_a_ready_container_notes_who_stopped_it_after_the_log_it_saves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The "stopping: WHO" note `down` now writes for a container (a waiting start names it) landed
    before what the save appends: a day's log of a ready server read as if it followed the stop. For a
    ready server the note follows the saved log."""
    import urllib.request

    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    client.chmod(0o755)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "fake-docker" / "state.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = LaunchSpec(name="d", engine="docker", model=str(fake_model_dir(tmp_path)), port=free_port())
    try:
        record = service.await_ready(
            service.start(spec, settings, service.UpOptions.bare(timeout_s=60)), settings
        )
        urllib.request.urlopen(f"http://127.0.0.1:{spec.port}/spam?n=3", timeout=30).read()
        assert launcher.down("d", settings) == "stopped"
    finally:
        subprocess.run([str(client), "rm", "-f", "llmdeck-d"], capture_output=True, check=False)
    lines = record.log_path.read_text().splitlines()
    [stop] = [i for i, line in enumerate(lines) if " stopping: `llmdeck down`" in line]
    assert "later line 00002" in "\n".join(lines[:stop])
    assert stop == len(lines) - 1


T1, T2, T3 = (f"2026-11-29T20:35:11.00000000{i}Z" for i in (1, 2, 3))


@pytest.mark.parametrize(
    ("copied", "docker"),
    [
        ([(T1, b"a"), (T1, b"b")], [(T1, b"a"), (T1, b"b"), (T1, b"c"), (T2, b"d")]),  # a burst: one stamp
        ([(T1, b"a")], [(T1, b"a"), (T1, b"b"), (T1, b"c"), (T2, b"d")]),
        ([(T1, b"a"), (T2, b"b"), (T1, b"c")], [(T1, b"a"), (T2, b"b"), (T1, b"c"), (T3, b"d")]),
        ([(T1, b"a"), (T2, b"b")], [(T1, b"a"), (T2, b"b"), (T1, b"c"), (T3, b"d")]),
    ],
    ids=["burst-end", "burst-start", "stamp-again-after-the-other-stream", "before-it"],
)
def test_lines_with_the_same_timestamp_at_the_mark_are_saved_once(
    tmp_path: Path, copied: list[tuple[str, bytes]], docker: list[tuple[str, bytes]]
) -> None:
    """Docker stamps stdout and stderr with two readers: lines of one nanosecond come in a burst, and a
    line of the other stream can come between two of them. The mark said "the Nth line in a row with
    that stamp", and a stamp seen again after the other stream's line met the mark at its first run: the
    save copied the lines between a second time. Now the mark counts every line with its stamp."""
    log = tmp_path / "d.log"
    mark = append_lines(log, copied, Place(begin(log, "# llmdeck: header\n")))
    assert mark is not None
    out = "".join(f"{ts} {text.decode()}\n" for ts, text in docker)
    save_rest(log, "d", header="# llmdeck: header\n", cli=_answer(out))
    assert log.read_text() == "# llmdeck: header\n" + "".join(f"{t.decode()}\n" for _, t in docker)
