"""`down --drain` / `restart`: a stop waits for the server's running requests (runtime/drain.py).

The loop with a scripted reader; the reading of a real vLLM 0.22 /metrics page (its two gauges set to
requests in flight) from a tiny FAKE metrics server; the events the CLI prints. The real engine's
side (a stream that ends whole) is tests/integration/test_lifecycle_cpu.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from http_fakes import JsonHandler
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime import drain as drain_mod
from llmdeck.runtime.drain import drain, in_flight, let_finish
from llmdeck.runtime.events import EventClock, ServiceEvent
from llmdeck.runtime.state import ServerRecord
from repo_paths import SHARED

PAGE = SHARED / "fixtures" / "vllm-0.22.0-h200" / "metrics-qwen3-0.6b-after.txt"


def _record(tmp_path: Path, port: int = 8000, ready: bool = True) -> ServerRecord:
    spec = LaunchSpec(name="d", model="/models/m", port=port)
    return ServerRecord(
        name="d", spec=spec, argv=[], pid=1234, log_path=tmp_path / "d.log",
        ready_at=datetime.now(UTC) if ready else None,
    )  # fmt: skip


def _reader(counts: list[int | None]) -> tuple[list[str], object]:
    asked: list[str] = []

    def read(url: str) -> int | None:
        asked.append(url)
        return counts.pop(0) if len(counts) > 1 else counts[0]

    return asked, read


@pytest.fixture(autouse=True)
def _fast_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain_mod, "POLL_S", 0.01)


def test_waits_till_the_requests_are_done(tmp_path: Path) -> None:
    asked, read = _reader([2, 2, 1, 0])
    seen: list[int] = []
    done = drain(_record(tmp_path), 5.0, seen.append, read=read)  # type: ignore[arg-type]
    assert done.busy == 2 and done.left == 0 and seen == [2]
    assert asked == ["http://127.0.0.1:8000"] * 4


def test_gives_up_at_the_limit_and_says_how_many_are_cut(tmp_path: Path) -> None:
    _, read = _reader([3])
    t0 = time.monotonic()
    done = drain(_record(tmp_path), 0.2, read=read)  # type: ignore[arg-type]
    assert done.busy == 3 and done.left == 3
    assert 0.2 <= time.monotonic() - t0 < 2 and 0.2 <= done.waited_s < 2


@pytest.mark.parametrize("counts", [[0], [None], [2, None]], ids=["idle", "no metrics", "died meanwhile"])
def test_nothing_left_to_wait_for_ends_it_at_once(tmp_path: Path, counts: list[int | None]) -> None:
    _, read = _reader(counts)
    done = drain(_record(tmp_path), 30.0, read=read)  # type: ignore[arg-type]
    assert done.left == 0 and done.waited_s < 5


def test_a_restarts_drain_lasts_long_enough_for_a_gateway_to_hold_new_requests(tmp_path: Path) -> None:
    """Idle at first, then a request a gateway sent before its look held the backend: waited for too."""
    asked, read = _reader([0, 0, 1, 1, 0])
    seen: list[int] = []
    done = drain(_record(tmp_path), 5.0, seen.append, at_least_s=0.2, read=read)  # type: ignore[arg-type]
    assert done.busy == 1 and done.left == 0 and seen == [1] and len(asked) >= 5
    assert done.waited_s >= 0.2


def test_a_server_not_ready_or_no_limit_is_not_read(tmp_path: Path) -> None:
    asked, read = _reader([5])
    assert drain(_record(tmp_path, ready=False), 30.0, read=read).busy is None  # type: ignore[arg-type]
    assert drain(_record(tmp_path), 0.0, read=read).busy is None  # type: ignore[arg-type]
    assert asked == []


class _FakeMetrics(JsonHandler):
    """A tiny FAKE vLLM metrics endpoint: the real 0.22 page with its two request gauges set."""

    running, waiting = 0, 0
    busy_reads = 0  # > 0: that many pages say one request is running, then `running` again

    def do_GET(self) -> None:
        page = PAGE.read_text()
        running = self.running
        if _FakeMetrics.busy_reads > 0:  # counted, not timed: a loaded machine reads late, not wrong
            _FakeMetrics.busy_reads -= 1
            running = 1
        for gauge, value in (("running", running), ("waiting", self.waiting)):
            line = f'vllm:num_requests_{gauge}{{engine="0",model_name="qwen3-0.6b"}}'
            assert f"{line} 0.0" in page
            page = page.replace(f"{line} 0.0", f"{line} {value}.0")
        data = page.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def metrics_url() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _FakeMetrics)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_in_flight_reads_running_and_waiting_from_the_page(metrics_url: str) -> None:
    _FakeMetrics.running, _FakeMetrics.waiting = 3, 2
    assert in_flight(metrics_url) == 5
    _FakeMetrics.running, _FakeMetrics.waiting = 0, 0
    assert in_flight(metrics_url) == 0


def test_in_flight_is_none_where_nothing_answers() -> None:
    from llmdeck.util.net import free_port

    assert in_flight(f"http://127.0.0.1:{free_port()}") is None


def test_let_finish_says_what_it_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.runtime import engine_state

    asked, read = _reader([5])
    monkeypatch.setattr(drain_mod, "in_flight", read)
    monkeypatch.setattr(engine_state, "is_alive", lambda record: False)  # a stale or dead record
    assert let_finish(_record(tmp_path), 10.0, EventClock(print)).busy is None
    assert asked == []
    monkeypatch.setattr(engine_state, "is_alive", lambda record: True)
    _, read = _reader([2, 1, 0])
    monkeypatch.setattr(drain_mod, "in_flight", read)
    events: list[ServiceEvent] = []
    done = let_finish(_record(tmp_path), 10.0, EventClock(events.append))
    assert done.left == 0
    assert [e.kind for e in events] == ["draining", "draining"]
    assert "2 request(s) running; waiting up to 10 s" in events[0].message
    assert "all finished after" in events[1].message and events[1].data["busy"] == 2

    _, read = _reader([4])
    monkeypatch.setattr(drain_mod, "in_flight", read)
    events.clear()
    let_finish(_record(tmp_path), 0.1, EventClock(events.append))
    assert "4 still running, cut by the stop" in events[-1].message


def test_a_wedged_server_costs_one_short_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It accepts the connection and never answers (what a restart is often for): no wait beyond one read."""
    import socket

    monkeypatch.setattr(drain_mod, "READ_S", 0.3)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        t0 = time.monotonic()
        done = drain(_record(tmp_path, port=silent.getsockname()[1]), 60.0)
    assert done.busy is None and time.monotonic() - t0 < 3


def test_down_waits_for_the_requests_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`llmdeck down NAME` with no flag: the server's running request is waited for (then the stop)."""
    import subprocess

    from cli_helpers import run_cli
    from llmdeck.runtime.state import StateStore
    from llmdeck.settings import Settings

    settings = Settings(state_dir=tmp_path / "state")
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)  # the "engine", stopped by the down
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _FakeMetrics)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        ours = {"pid": proc.pid, "argv": ["sleep", "60"]}  # its command line: the record's own process
        record = _record(tmp_path, port=srv.server_address[1]).model_copy(update=ours)
        StateStore(settings.servers_dir).save(record)
        _FakeMetrics.busy_reads = 2  # two pages with the request running, then none (a timer that
        # ended it 0.5 s after the start had ended it before `down` first read, on a loaded machine)
        monkeypatch.setenv("LLMDECK_STATE_DIR", str(settings.state_dir))
        code, out, err = run_cli(["down", "d"], capsys)
    finally:
        srv.shutdown()
        srv.server_close()
        proc.kill()
        _FakeMetrics.busy_reads = 0
    assert code == 0, err
    assert "d: 1 request(s) running; waiting up to 20 s" in err and "all finished after" in err, err
    assert out.strip() in {"d: stopped", "d: killed"}


def test_a_restarts_drain_notes_its_stop_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The note a gateway reads to hold new requests (gateway/comeback.drained) comes before the wait."""
    from llmdeck.engines.logfiles import stopper
    from llmdeck.runtime import engine_state

    monkeypatch.setattr(engine_state, "is_alive", lambda record: True)
    seen: list[object] = []
    monkeypatch.setattr(drain_mod, "in_flight", lambda url: seen.append(stopper(tmp_path / "d.log")) or 0)
    (tmp_path / "d.log").write_text("# llmdeck: starting\n")
    let_finish(_record(tmp_path), 5.0, EventClock(print), who="`llmdeck restart d`")
    assert seen and seen[0] is not None and seen[0][0] == "`llmdeck restart d`"  # type: ignore[index]


def test_a_restart_stopped_during_its_drain_leaves_no_stop_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while it waits: the server runs on; its log must not name the restart as who stopped it
    (a later crash's diagnosis would say so), nor a gateway go on holding its requests."""
    from llmdeck.engines.logfiles import stopper, who_stopped
    from llmdeck.runtime import engine_state

    def interrupted(url: str) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(engine_state, "is_alive", lambda record: True)
    monkeypatch.setattr(drain_mod, "in_flight", interrupted)
    log = tmp_path / "d.log"
    log.write_text("# llmdeck: 2026-12-06T00:00:00+00:00 starting: vllm serve\n")
    with pytest.raises(KeyboardInterrupt):
        let_finish(_record(tmp_path), 5.0, EventClock(print), who="`llmdeck restart d`")
    assert "kept running: `llmdeck restart d` ended" in log.read_text()
    assert who_stopped(log) is None and stopper(log) is None


@pytest.mark.parametrize(
    ("args", "seconds"),
    [
        ([], 0.0),
        (["--shutdown-timeout", "30"], 30.0),
        (["--shutdown-timeout=45"], 45.0),
        (["--shutdown_timeout", "12"], 12.0),
        (
            ["--shutdown-timeout", "5", "--max-model-len", "8192", "--shutdown-timeout", "90"],
            90.0,
        ),  # last wins
        (["--shutdown-timeout", "0"], 0.0),
        (["--shutdown-timeout", "-5"], 0.0),
        (["--shutdown-timeout", "abc"], 0.0),
        (["--shutdown-timeout", "nan"], 0.0),
        (["--shutdown-timeout", "1e30"], 86_400.0),
        (["--shutdown-timeout"], 0.0),
    ],
)
def test_vllms_own_drain_is_read_from_the_flags(args: list[str], seconds: float) -> None:
    from llmdeck.engines.argv import own_drain_s

    assert own_drain_s(LaunchSpec(name="d", model="/models/m", vllm_args=args)) == seconds


@pytest.mark.parametrize(("args", "grace"), [([], 20.0), (["--shutdown-timeout", "60"], 80.0)])
def test_the_stop_waits_out_vllms_own_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], grace: float
) -> None:
    """vLLM given --shutdown-timeout 60 lets its requests finish for 60 s after SIGTERM: the SIGKILL comes
    after that and its teardown (20 s), not at llmdeck's usual 20 s, which cut the answers it was draining."""
    from llmdeck.runtime import launcher
    from llmdeck.runtime.state import StateStore
    from llmdeck.settings import Settings

    settings = Settings(state_dir=tmp_path / "state")
    record = _record(tmp_path)
    record = record.model_copy(update={"spec": record.spec.model_copy(update={"vllm_args": args})})
    StateStore(settings.servers_dir).save(record)
    asked: list[float] = []
    monkeypatch.setattr(launcher, "stop_engine", lambda rec, grace_s: asked.append(grace_s) or "stopped")
    assert launcher.down("d", settings) == "stopped"
    assert asked == [grace]
