"""`up` is one pipeline (issue 39): the runtime service is the only way a server is started, the spec
is validated once and its port checked once, and what was checked is handed down (``ValidatedSpec``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime import launcher
from llmdeck.settings import Settings
from llmdeck.util.net import free_port
from repo_paths import ROOT
from security_helpers import fake_engine, fake_model_dir


def _venv_spec(tmp_path: Path, name: str, python: Path) -> tuple[Settings, LaunchSpec]:
    """Settings under tmp_path and a venv spec of a fake model folder whose python is ``python``."""
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    model = str(fake_model_dir(tmp_path))
    return settings, LaunchSpec(name=name, engine="venv", python=str(python), model=model, port=free_port())


def test_the_launcher_has_no_up_of_its_own() -> None:
    assert not hasattr(launcher, "up") and "up" not in launcher.__all__


def test_only_the_runtime_service_starts_a_server() -> None:
    """Library, CLI, gateway, tune, the fixtures and the benchmarks: no start_background but the service's."""
    starts = re.compile(r"launcher\.start_background\(|launcher import [^\n]*\bstart_background\b")
    callers = [
        str(path.relative_to(ROOT))
        for folder in ("src", "tests", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if starts.search(path.read_text(encoding="utf-8"))
    ]
    assert callers == ["src/llmdeck/runtime/service.py"]


def _counting(monkeypatch: pytest.MonkeyPatch, owners: list[Any], name: str) -> list[int]:
    """Wrap ``owner.name`` (the same function, imported into several modules) to count its calls."""
    calls: list[int] = []
    real: Callable[..., Any] = getattr(owners[0], name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    for owner in owners:
        monkeypatch.setattr(owner, name, counted)
    return calls


def test_up_validates_the_spec_once_and_checks_the_port_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through preflight and the spawn (a fake venv engine that dies at once): one model-folder check,
    one port check."""
    import llmdeck.model.inspect as inspect
    import llmdeck.runtime.preflight as preflight
    import llmdeck.runtime.preflight.host_checks as host_checks
    from llmdeck.runtime import service

    folder_checks = _counting(monkeypatch, [inspect], "validate_model_dir")
    port_checks = _counting(monkeypatch, [host_checks, preflight], "check_port")
    spec_checks = _counting(monkeypatch, [launcher], "validate_spec")
    settings, spec = _venv_spec(tmp_path, "once", fake_engine(tmp_path))
    events: list[Any] = []
    options = service.UpOptions(force=True, size_by_bytes=False, watchdog=None)
    record = service.start(spec, settings, options, service.EventClock(events.append))
    try:
        assert any(e.kind == "preflight" for e in events)  # preflight ran (the fake python has no vllm)
        assert (len(spec_checks), len(folder_checks), len(port_checks)) == (1, 1, 1)
    finally:
        launcher.down(record.name, settings)


def test_a_validated_spec_keeps_what_was_checked(tmp_path: Path) -> None:
    """Unified sizing may change the flags and the environment of a validated spec, nothing else."""
    spec = LaunchSpec(name="v", engine="venv", model=str(tmp_path), port=free_port())
    checked = launcher.ValidatedSpec(spec)
    sized = checked.resized(spec.model_copy(update={"vllm_args": ["--kv-cache-memory-bytes", "1"]}))
    assert sized.spec.vllm_args == ["--kv-cache-memory-bytes", "1"]
    with pytest.raises(ValueError, match="port"):
        checked.resized(spec.model_copy(update={"port": spec.port + 1}))


def test_bare_options_skip_preflight_sizing_and_the_watchdog() -> None:
    from llmdeck.runtime.service import UpOptions

    bare = UpOptions.bare(timeout_s=600)
    assert (bare.preflight, bare.size_by_bytes, bare.watchdog, bare.timeout_s) == (False, False, None, 600)


def test_up_plans_once_and_hands_the_plan_to_lint_and_unified_sizing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On unified memory (a GB10 faked here) a start makes one plan: preflight lints its flags with it
    and the KV cache is sized beside its overhead; the planner does not run a second time."""
    import llmdeck.plan as plan
    from llmdeck.runtime import service, unified

    plans: list[Any] = []
    real = plan.for_spec

    def counted(*args: Any, **kwargs: Any) -> Any:
        plans.append(real(*args, **kwargs))
        return plans[-1]

    monkeypatch.setattr(plan, "for_spec", counted)
    monkeypatch.setattr(unified, "is_unified", lambda spec: True)
    model = tmp_path / "qwen36"
    model.mkdir()
    src = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs" / "Qwen3.6-35B-A3B.config.json"
    (model / "config.json").write_bytes(src.read_bytes())
    spec = LaunchSpec(
        name="once", engine="venv", python=str(fake_engine(tmp_path)), model=str(model), port=free_port()
    )
    events: list[Any] = []
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    options = service.UpOptions(force=True, watchdog=None, reserve_gib=0)
    try:
        service.start(spec, settings, options, service.EventClock(events.append))
    except Exception as exc:  # too little memory here for the KV: the sizing ran (and said so)
        assert "unified memory" in str(exc), exc
        sizing = None
    else:
        launcher.down("once", settings)
        sizing = next(e.data["sizing"] for e in events if e.kind == "memory" and "sizing" in e.data)
    assert len(plans) == 1
    assert any(e.kind == "preflight" and "lint:" in str(e.data.get("id")) for e in events)
    if sizing is not None:
        assert sizing["overhead"] == int(plans[0].memory.overhead.total_gib * (1 << 30))


def _loading_engine(tmp: Path) -> Path:
    """fake_loading_engine: stands in for the venv's python; never becomes ready (nothing listens)."""
    path = tmp / "fake_loading_engine.sh"
    path.write_text("#!/bin/sh\necho 'fake engine: loading weights'\nexec sleep 300\n")
    path.chmod(0o755)
    return path


def test_a_start_asked_to_stop_stops_its_engine_and_forgets_it(tmp_path: Path) -> None:
    """``UpOptions.stop_when`` (the gateway's stop of a starting model): asked at each readiness poll;
    True ends the start with StartStopped, the engine's process group stopped and its record removed."""
    import psutil

    from llmdeck.errors import StartStopped
    from llmdeck.runtime import service
    from llmdeck.runtime.state import StateStore

    settings, spec = _venv_spec(tmp_path, "slow", _loading_engine(tmp_path))
    polls: list[int] = []

    def stop_on_third() -> bool:
        polls.append(1)
        return len(polls) >= 3

    with pytest.raises(StartStopped, match="stopped on request"):
        service.up(spec, settings, service.UpOptions.bare(timeout_s=60, stop_when=stop_on_third))
    assert len(polls) == 3
    assert not StateStore(settings.servers_dir).path("slow").exists()
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if "fake_loading_engine" in " ".join(p.info["cmdline"] or [])
    ]


def test_a_start_asked_to_stop_before_its_launch_launches_nothing(tmp_path: Path) -> None:
    from llmdeck.errors import StartStopped
    from llmdeck.runtime import service

    settings, spec = _venv_spec(tmp_path, "never", _loading_engine(tmp_path))
    with pytest.raises(StartStopped):
        service.start(spec, settings, service.UpOptions.bare(stop_when=lambda: True))
    assert not settings.servers_dir.exists() or not list(settings.servers_dir.glob("*.json"))


FAKE_SLEEPING_ENGINE = """#!/bin/sh
# fake_sleeping_engine: stands in for the venv's python; answers the version probe, then never serves
if [ "$1" = "-c" ]; then echo "0.32.0"; exit 0; fi
exec sleep 600
"""


def test_ctrl_c_while_the_engine_is_spawned_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C the moment the engine was spawned and recorded (before `up` followed it): the KeyboardInterrupt
    had left start() with the engine running on, its record kept, and no "stopped" said (seen as a flaky
    `up --attach` signal test). Now the signal is held through the spawn and raised where it stops it."""
    import os
    import signal

    from llmdeck.engines.process import pid_alive
    from llmdeck.runtime import service

    engine = tmp_path / "fake_sleeping_engine.sh"
    engine.write_text(FAKE_SLEEPING_ENGINE)
    engine.chmod(0o755)
    from llmdeck.runtime import start_gate

    settings, spec = _venv_spec(tmp_path, "spawned", engine)
    real = start_gate.keep_record
    started: list[Any] = []

    def then_ctrl_c(store: Any, record: Any, *args: Any) -> None:
        real(store, record, *args)
        started.append(record)
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, the moment the record is saved

    monkeypatch.setattr(start_gate, "keep_record", then_ctrl_c)
    events: list[Any] = []
    options = service.UpOptions.bare(timeout_s=30)
    try:
        with pytest.raises(KeyboardInterrupt):
            service.start(spec, settings, options, service.EventClock(events.append))
        pid = started[0].pid
        assert not pid_alive(pid), "the engine spawned at the Ctrl-C runs on"
        assert not (settings.servers_dir / "spawned.json").exists(), "its record is left behind"
        assert [e.kind for e in events][-2:] == ["failed", "stopped"], [e.message for e in events]
    finally:
        if started and pid_alive(started[0].pid):
            launcher.stop_engine(started[0], grace_s=1)


def test_ctrl_c_while_another_start_holds_the_lock_is_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signals are held from the spawn to the record only: a Ctrl-C while `up` waits for another
    start's lock (up to a minute) ends it at once, nothing spawned."""
    import signal
    import threading
    import time

    from llmdeck.runtime import service, start_gate
    from llmdeck.util.filelock import exclusive

    monkeypatch.setattr(start_gate, "START_LOCK_S", 10.0)
    engine = tmp_path / "fake_sleeping_engine.sh"
    engine.write_text(FAKE_SLEEPING_ENGINE)
    engine.chmod(0o755)
    settings, spec = _venv_spec(tmp_path, "waits", engine)
    timer = threading.Timer(0.5, lambda: signal.raise_signal(signal.SIGINT))
    with exclusive(settings.servers_dir / ".start.lock", timeout_s=5, what="another start"):
        t0 = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            service.start(spec, settings, service.UpOptions.bare(timeout_s=30))
        assert time.monotonic() - t0 < 3, "the Ctrl-C waited for the start lock"
    assert not (settings.servers_dir / "waits.json").exists()
