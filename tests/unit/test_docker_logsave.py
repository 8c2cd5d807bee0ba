"""A docker server's log kept whole: the start-up copied by the readiness tap, the rest saved by `down`
before `docker rm` takes docker's copy, each line once; `logs -n N` gives N lines of a running one.

The real CLI runs against fake_docker (tests/fake_docker.py: a stand-in `docker` client whose containers
are local fake servers, their output kept as docker's json-file driver keeps it, `logs -t` printing
docker's stamps, inside a line past 16 KiB too)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from llmdeck.engines.docker import DockerCLI
from llmdeck.engines.docker.logmark import Mark, MarkLock, StampedTap, begin, unstamp
from llmdeck.engines.docker.logsave import save_rest
from llmdeck.util.net import free_port
from repo_paths import ROOT

FAKE = ROOT / "tests" / "fake_docker.py"


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The path of a `docker` that runs fake_docker, its state under tmp_path."""
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    client.chmod(0o755)
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(tmp_path / "fake-docker" / "state.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    return str(client)


def _llmdeck(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
        "LLMDECK_STATE_DIR": str(tmp_path / "state"),
        "LLMDECK_CACHE_DIR": str(tmp_path / "cache"),
        **(env or {}),
    }
    argv = [sys.executable, "-m", "llmdeck", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=120, check=False)


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "tiny"
    model.mkdir()
    config = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs" / "Qwen3-0.6B.config.json"
    (model / "config.json").write_bytes(config.read_bytes())
    return model


def _spam(port: int, n: int, docker: str) -> None:
    """The container logs ``n`` lines and one of 40,000 bytes; back once docker has them all."""
    urllib.request.urlopen(f"http://127.0.0.1:{port}/spam?n={n}", timeout=30).read()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = subprocess.run([docker, "logs", "--tail", "5", "llmdeck-d"], capture_output=True, check=False)
        if b"INFO long " in out.stdout:
            return
        time.sleep(0.2)
    raise AssertionError("the container's lines never reached docker's log")


def test_down_saves_the_whole_log_of_a_container_each_line_once(docker: str, tmp_path: Path) -> None:
    """`down` had rewritten the log file from `docker logs --tail 2000`, and `docker rm` took the rest:
    a server that logged 5,000 lines lost its start-up (3,000 lines) and 3,000 of its own. `logs -n N`
    had shown at most those 2,000. The log's mark (NAME.log.mark) goes with the record: it had stayed."""
    port = free_port()
    up = ["up", "--engine", "docker", "--model", str(_model(tmp_path)), "--name", "d", "--port", str(port)]
    try:
        started = _llmdeck(tmp_path, *up, "--force", "--no-watchdog", env={"FAKE_DOCKER_CONTAINER": "chatty"})
        assert started.returncode == 0, started.stderr
        _spam(port, 5000, docker)
        shown = _llmdeck(tmp_path, "logs", "d", "-n", "4000")
        assert shown.returncode == 0, shown.stderr
        assert len(shown.stdout.splitlines()) > 2000
        assert "later line 04999" in shown.stdout
        assert (
            _llmdeck(tmp_path, "logs", "d", "-n", "1").stdout
            == 'INFO:     127.0.0.1 - "GET /spam?n=5000" 200\n'
        )
    finally:
        down = _llmdeck(tmp_path, "down", "d")
    assert down.returncode == 0, down.stderr
    text = (tmp_path / "state" / "logs" / "d.log").read_text()
    start = [line[-4:] for line in text.splitlines() if "start-up line" in line]
    later = [line[-5:] for line in text.splitlines() if "later line" in line]
    assert start == [f"{i:04d}" for i in range(3000)]
    assert later == [f"{i:05d}" for i in range(5000)]
    assert text.startswith("# llmdeck: ") and text.count("vLLM API server version") == 1
    assert "INFO long " + "z" * 40_000 + "\n" in text  # docker's stamps inside the long line taken out
    assert "Z INFO" not in text
    assert not (tmp_path / "state" / "logs" / "d.log.mark").exists()


def _container(docker: str) -> int:
    port = free_port()
    argv = [docker, "run", "-d", "--name", "llmdeck-d", "img", "--port", str(port)]
    subprocess.run(argv, check=True, capture_output=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
            return port
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the fake container never answered")


def test_a_save_past_the_bound_keeps_the_newest_part_and_says_what_was_cut(
    docker: str, tmp_path: Path
) -> None:
    log = tmp_path / "d.log"
    begin(log, "# llmdeck: header\n")
    try:
        _spam(_container(docker), 5000, docker)
        saved = save_rest(log, "d", header="# llmdeck: header\n", cli=DockerCLI(docker), max_bytes=200_000)
        data = log.read_bytes()
        assert save_rest(log, "d", header="# llmdeck: header\n", cli=DockerCLI(docker)) == 0  # a second save
    finally:
        subprocess.run([docker, "rm", "-f", "llmdeck-d"], capture_output=True, check=False)
    assert log.read_bytes() == data  # added nothing
    assert saved > 5000 and len(data) <= 200_000
    lines = data.decode().splitlines()
    assert lines[0] == "# llmdeck: header"
    assert lines[1].startswith("# llmdeck: ") and "lines the container logged are left out here" in lines[1]
    assert "(a log is kept under 200000 bytes)" in lines[1]
    later = [int(line[-5:]) for line in lines if "later line" in line]
    assert later == list(range(later[0], 5000)) and later[0] > 0  # the newest, whole lines, in order
    assert lines[-2:] == ["INFO long " + "z" * 40_000, 'INFO:     127.0.0.1 - "GET /spam?n=5000" 200']


def test_docker_stamps_inside_a_long_line_are_taken_out() -> None:
    """docker logs -t of a 40,000-byte line: its stamp again after each 16 KiB part (docker/cli#4941)."""
    ts = b"2026-11-29T20:35:11.123456789Z "
    body = b"x" * 40_000
    raw = ts + body[:16384] + ts + body[16384:32768] + ts + body[32768:]
    assert unstamp(raw) == ("2026-11-29T20:35:11.123456789Z", body)
    assert unstamp(b"no stamp here") == ("", b"no stamp here")
    assert unstamp(ts + b"short") == ("2026-11-29T20:35:11.123456789Z", b"short")


def test_a_tap_whose_log_was_saved_meanwhile_writes_no_more(tmp_path: Path) -> None:
    """A `down` while the start is awaited saves docker's log whole; the start's tap, which follows
    docker logs until the container ends, had appended its last lines after that save a second time."""
    log = tmp_path / "d.log"
    mark = begin(log, "# llmdeck: header\n")
    first, then = "2026-11-29T20:35:11.000000001Z one", "2026-11-29T20:35:12.000000001Z two"
    script = f"printf '{first}\\n'; sleep 1; printf '{then}\\n'; sleep 5"
    tap = StampedTap(["sh", "-c", script], log, mark)
    try:
        deadline = time.monotonic() + 10
        while tap.take() != ["one"] and time.monotonic() < deadline:
            time.sleep(0.05)
        with MarkLock(log) as lock:  # what a save does: the whole log copied, the mark moved along
            with open(log, "a") as fh:
                fh.write("two\n")
            lock.write(Mark("2026-11-29T20:35:12.000000001Z", 1))
        later: list[str] = []
        while not later and time.monotonic() < deadline:
            later = tap.take()
            time.sleep(0.05)
    finally:
        tap.close()
    assert later == ["two"]  # the caller still sees it
    assert log.read_text() == "# llmdeck: header\none\ntwo\n"


def test_a_save_from_a_daemon_that_stops_answering_keeps_what_came(tmp_path: Path) -> None:
    """`docker logs` of a hung daemon: what it printed is saved with a note, in bounded time."""
    from llmdeck.engines.docker import logrun

    client = tmp_path / "docker"
    client.write_text("#!/bin/sh\nprintf '2026-11-29T20:35:11.000000001Z before the hang\\n'; sleep 60\n")
    client.chmod(0o755)
    log = tmp_path / "d.log"
    begin(log, "# llmdeck: header\n")
    real = logrun.LogRun.__init__

    def quick(self: logrun.LogRun, argv: list[str], limit_s: float, idle_s: float = 60.0) -> None:
        real(self, argv, limit_s, idle_s=1.0)

    began = time.monotonic()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logrun.LogRun, "__init__", quick)
        assert save_rest(log, "d", header="# llmdeck: header\n", cli=DockerCLI(str(client))) == 1
    assert time.monotonic() - began < 10
    lines = log.read_text().splitlines()
    assert lines[:2] == ["# llmdeck: header", "before the hang"]
    assert "`docker logs` gave no more in time" in lines[2]
