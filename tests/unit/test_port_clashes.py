"""Starts on a port llmdeck picked itself (runtime/portpick.py): another program took it between the pick
and the engine's bind. A tune's trial aborted the whole tune (a taken port read as the user's: exit 2)
or failed its candidate; quickstart without --port ended as exit 2. The user's own --port, taken, stays
exit 2 before anything starts."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from llmdeck.engines.spec import LaunchSpec
from llmdeck.tune.schema import TrialMetrics, TuneRequest
from llmdeck.tune.slo import parse_slo_targets
from llmdeck.tune.workload import load_shape


def _req(model: str, python: Path) -> TuneRequest:
    base = LaunchSpec(name="tuned", engine="cpu", model=model, host="127.0.0.1", python=str(python))
    values = {
        "base": base, "model_ref": model, "workload": "agent", "load": load_shape("agent", concurrency=16),
        "slo": parse_slo_targets("ttft_p99=2s"), "budget_s": 600, "trials": 3,
    }  # fmt: skip
    return TuneRequest.model_validate(values)


def _clash_trial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, picks: list[int]) -> tuple[Any, list[Any]]:
    """run_trial of vLLM's defaults on fake_serving_engine, its ports ``picks`` in turn; the bench is
    not this test's (a fixed result)."""
    from llmdeck.settings import Settings
    from llmdeck.tune import trial
    from llmdeck.tune.prune import Pruner
    from llmdeck.util import net
    from security_helpers import fake_model_dir, fake_serving_engine

    engine = fake_serving_engine(tmp_path)
    req = _req(str(fake_model_dir(tmp_path)), engine)
    ports = iter(picks)
    monkeypatch.setattr(net, "free_port", lambda host="127.0.0.1": next(ports))  # the trials' picks
    metrics = TrialMetrics(goodput=1.0, request_throughput=1.0, output_throughput=1.0, completed=1, failed=0)
    monkeypatch.setattr(trial, "fixed_load", lambda *a: (metrics, None, None))
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    events: list[Any] = []
    rec = trial.run_trial(
        req, 1, {}, "default", base_args=["--max-model-len", "1024"], pruner=Pruner(req),
        settings=settings, out_dir=tmp_path, events=events.append,
    )  # fmt: skip
    return rec, events


def _listening() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_trial_port_taken_before_the_start_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another program bound the port between free_port() and the start's check: the PortInUseError
    (a user's taken port, exit 2) aborted the whole tune."""
    from llmdeck.util.net import free_port

    with _listening() as taken:
        port = taken.getsockname()[1]
        rec, events = _clash_trial(tmp_path, monkeypatch, [port, free_port()])
    assert rec.status == "ok", rec.reason
    [clash] = [e for e in events if e.data.get("service") == "port_clash"]
    assert f"port {port} was taken" in clash.message and clash.data["port"] == port


def test_a_trial_port_taken_before_the_engine_binds_it_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taken after the check, before vLLM's bind ([Errno 98]): the candidate was recorded as failed."""
    from llmdeck.runtime import launcher
    from llmdeck.util.net import free_port

    held: list[socket.socket] = []
    real = launcher.start_background

    def grabbed_first(checked: Any, *args: Any, **kw: Any) -> Any:
        if not held:  # another program takes the port in the window before the engine binds it
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", checked.spec.port))
            sock.listen()
            held.append(sock)
        return real(checked, *args, **kw)

    monkeypatch.setattr(launcher, "start_background", grabbed_first)
    first = free_port()
    try:
        rec, events = _clash_trial(tmp_path, monkeypatch, [first, free_port()])
    finally:
        for sock in held:
            sock.close()
    assert rec.status == "ok", rec.reason
    [clash] = [e for e in events if e.data.get("service") == "port_clash"]
    assert f"port {first} was taken" in clash.message and "already" in clash.message.lower()


def test_a_trial_port_taken_at_every_pick_fails_that_trial_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.runtime.portpick import PORT_TRIES

    with _listening() as taken:
        port = taken.getsockname()[1]
        rec, events = _clash_trial(tmp_path, monkeypatch, [port] * PORT_TRIES)
    assert rec.status == "failed" and f"Port {port} is already in use" in rec.reason
    assert len([e for e in events if e.data.get("service") == "port_clash"]) == PORT_TRIES - 1


# ---- quickstart ---------------------------------------------------------------------------------


def _quickstart_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, picks: list[int], *, picked: bool) -> Any:
    from llmdeck.flows import quickstart
    from llmdeck.runtime.service import UpOptions, down
    from llmdeck.settings import Settings
    from security_helpers import fake_model_dir, fake_serving_engine

    ports = iter(picks[1:])
    monkeypatch.setattr(quickstart, "free_port", lambda host="127.0.0.1": next(ports))
    spec = LaunchSpec(
        name="quickstart", engine="cpu", model=str(fake_model_dir(tmp_path)), host="127.0.0.1",
        port=picks[0], python=str(fake_serving_engine(tmp_path)),
    )  # fmt: skip
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    said: list[str] = []
    record = quickstart._up(spec, settings, UpOptions.bare(leashed=True), None, said.append, picked=picked)
    down(record.name, settings)
    return record, said


def test_quickstart_picks_another_port_when_its_own_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.util.net import free_port

    with _listening() as taken:
        port = taken.getsockname()[1]
        record, said = _quickstart_up(tmp_path, monkeypatch, [port, free_port()], picked=True)
    assert record.port != port
    assert said == [
        f"port {port} was taken by another program before the server bound it; starting on port {record.port}"
    ]


def test_quickstarts_own_port_taken_stays_exit_2_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.errors import PortInUseError

    with _listening() as taken, pytest.raises(PortInUseError) as info:
        _quickstart_up(tmp_path, monkeypatch, [taken.getsockname()[1]], picked=False)
    assert info.value.exit_code == 2
    assert not (tmp_path / "state" / "logs").exists()  # nothing was launched


def test_quickstarts_picked_port_taken_at_every_try_is_a_failed_start_not_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every port quickstart picked (no --port) taken before the engine bound it: the last clash still
    ended as the user's taken port (exit 2, "choose another --port"), though no port was given. It is a
    failed start now (exit 1) that says the ports were llmdeck's picks, each taken."""
    from llmdeck.errors import OperationError, PortInUseError
    from llmdeck.runtime.portpick import PORT_TRIES

    with _listening() as taken, pytest.raises(OperationError) as info:
        _quickstart_up(tmp_path, monkeypatch, [taken.getsockname()[1]] * PORT_TRIES, picked=True)
    assert not isinstance(info.value, PortInUseError) and info.value.exit_code == 1
    assert f"the last of the {PORT_TRIES} ports llmdeck picked" in info.value.message
    assert "--port" not in (info.value.hint or "")
