"""Issue 35's acceptance on the real CPU engine (its KV cache is host memory: the unified case).

One short-lived server of its own (the tiny model, --max-model-len 1024): the watchdog has to stop a
server, so it cannot be a session fixture. While a memory hog (a child process of the test holding
0.5 GiB) and a page-cache fill (a 256 MiB file the test reads) are present, a start through the
runtime service

* drops the model's files from page cache before the engine starts (mincore says so, read by the test),
* passes --kv-cache-memory-bytes computed from MemAvailable (the reserve is set so that live memory,
  not the CPU engine's 1 GiB default, decides), and vLLM's own log line shows the same bytes,
* reports the other page cache as reclaimable with the command that drops it;

then the hog grows by 1.5 GiB past the guard's floor, and the running watchdog stops the server within
its interval, with the message; the hog and a bystander process live on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llmdeck.util.units import GIB, MIB

pytestmark = [pytest.mark.integration, pytest.mark.serial]

HOG = """
import sys
held = []
for line in sys.stdin:
    held.append(b"\\x01" * int(line))  # written bytes: resident, not lazily mapped zero pages
    print("held", sum(len(h) for h in held), flush=True)
"""


class Hog:
    """A child process that holds (and grows) resident memory on request."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOG], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def grow(self, n: int) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().startswith("held")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _available() -> int:
    from llmdeck.runtime.host import read_meminfo

    return read_meminfo().available


def _resident(files: list[Path]) -> int:
    from llmdeck.util.pagecache import resident_bytes

    return sum(resident_bytes(f) for f in files)


def _wait(cond: Any, timeout_s: float, step_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step_s)
    return bool(cond())


def test_a_start_sized_by_live_memory_then_stopped_by_the_watchdog(
    tiny_model_dir: Path, session_settings: Any, tmp_path: Path
) -> None:
    from llmdeck.engines.process import pid_alive
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime import guard, service, unified
    from llmdeck.runtime.service import EventClock, ServiceEvent, UpOptions
    from llmdeck.runtime.watchdog import WatchdogConfig
    from llmdeck.util.net import free_port

    hog, bystander = Hog(), subprocess.Popen(["sleep", "600"], start_new_session=True)
    fill = tmp_path / "page-cache-fill"
    fill.write_bytes(os.urandom(256 * MIB))
    fill.read_bytes()
    spec = LaunchSpec(
        name="unified-ci",
        engine="cpu",
        model=str(tiny_model_dir),
        served_model_name="tiny-qwen3",
        port=free_port(),
        vllm_args=["--max-model-len", "1024", "--max-num-seqs", "4"],
    )
    model_files = unified.model_files(spec)
    events: list[ServiceEvent] = []
    record = None
    try:
        hog.grow(512 * MIB)
        for f in model_files:
            f.read_bytes()  # the model is in page cache, as after a download
        assert _resident(model_files) > 0
        weights = sum(f.stat().st_size for f in model_files if f.suffix == ".safetensors")
        # a reserve that leaves ~0.6 GiB of KV: live memory, not the 1 GiB default, decides the bytes
        reserve = (_available() - weights - unified.overhead_bytes(spec) - 600 * MIB) / GIB
        options = UpOptions(watchdog=None, reserve_gib=reserve, timeout_s=600)
        clock = EventClock(events.append)
        record = service.start(spec, session_settings, options, clock)
        # the weights and the tokenizer are out; what is back are a few KiB of JSON that the launch's own
        # checks read after the drop (config.json, tokenizer_config.json)
        big = [f for f in model_files if f.stat().st_size > 64 * 1024]
        assert big and _resident(big) == 0, "the model's files were still in page cache at the start"
        assert _resident(model_files) < 64 * 1024
        sizing = next(e.data["sizing"] for e in events if "sizing" in e.data)
        page = next(e.data["page_cache"] for e in events if "page_cache" in e.data)
        expect = sizing["mem_available"] - sizing["reserve"] - sizing["weights"] - sizing["overhead"]
        expect -= sizing["tenants_starting"]
        assert sizing["kv_bytes"] == expect // MIB * MIB and sizing["limited_by"] == "live memory"
        assert abs(sizing["mem_available"] - _available()) < 768 * MIB  # the live figure, not a plan's
        assert 400 * MIB < sizing["kv_bytes"] < 800 * MIB
        assert page["resident_before"] > 0 and page["resident_after"] == 0
        assert page["page_cache_after"] >= 200 * MIB and "drop_caches" in page["drop_command"]
        assert record.spec.vllm_args[-2:] == ["--kv-cache-memory-bytes", str(sizing["kv_bytes"])]
        assert "VLLM_CPU_KVCACHE_SPACE" not in record.env
        record = service.await_ready(record, session_settings, options, clock)
        log = record.log_path.read_text(encoding="utf-8", errors="replace")
        seen = re.search(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache", log)
        assert seen and float(seen.group(1)) == pytest.approx(sizing["kv_bytes"] / GIB, abs=0.006), log[
            -2000:
        ]

        # the running watchdog: a floor 1 GiB under MemAvailable now, then the hog grows 1.5 GiB past it
        floor = (_available() - GIB) / GIB
        config = WatchdogConfig(floor_gib=floor, interval_s=0.5)
        guard_pid = service.guard_server(record, session_settings, config, events.append)
        time.sleep(1.5)
        assert pid_alive(record.pid) and guard.read_trip(session_settings.servers_dir, spec.name) is None
        hog.grow(1536 * MIB)
        grown = time.monotonic()
        assert _wait(lambda: guard.read_trip(session_settings.servers_dir, spec.name) is not None, 10)
        tripped = time.monotonic() - grown
        assert _wait(lambda: not pid_alive(record.pid), 30), "the watchdog did not stop the server"
        trip = guard.read_trip(session_settings.servers_dir, spec.name)
        assert trip is not None and trip.limit == "floor" and f"under the {floor:g} GiB floor" in trip.reason
        assert tripped < config.interval_s + 2.0, tripped  # within its interval (+ one sample's work)
        assert "--watchdog-floor-gib" in trip.hint and trip.held_bytes > weights
        assert "[llmdeck watchdog]" in record.log_path.read_text(encoding="utf-8", errors="replace")
        assert hog.proc.poll() is None and bystander.poll() is None  # nothing else was killed
        assert _wait(lambda: not pid_alive(guard_pid), 10)
        kv_gib = sizing["kv_bytes"] / GIB
        print(f"unified: kv {kv_gib:.2f} GiB, the watchdog tripped {tripped:.2f} s after the hog grew")
    finally:
        hog.stop()
        bystander.kill()
        bystander.wait()
        if record is not None and pid_alive(record.pid):
            service.down(spec.name, session_settings)
