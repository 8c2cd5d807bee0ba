"""The runtime service (issue 16): the start-up watchdog, and `up`'s failure paths on the real CPU
engine — the engine is stopped, the record forgotten, the cause said — through the CLI."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from cli_helpers import run_cli as cli
from llmdeck.runtime.host import read_psi_avg10
from llmdeck.runtime.preflight import GIB
from llmdeck.runtime.watchdog import (
    StartupWatchdog,
    WatchdogConfig,
    WatchdogSample,
    WatchdogTripped,
)
from llmdeck.util.net import free_port


def _feed(samples: list[WatchdogSample]) -> StartupWatchdog:
    it = iter(samples)
    return StartupWatchdog(WatchdogConfig(), read=lambda: next(it))


def test_watchdog_quiet_while_memory_holds() -> None:
    dog = _feed([WatchdogSample(available_bytes=40 * GIB, swap_used_bytes=0)] * 3)
    for _ in range(3):
        dog.check()
    assert dog.lowest_available == 40 * GIB


@pytest.mark.parametrize(
    ("later", "why"),
    [
        (WatchdogSample(available_bytes=1 * GIB, swap_used_bytes=0), "under the 1.5 GiB floor"),
        (WatchdogSample(available_bytes=20 * GIB, swap_used_bytes=3 * GIB), "swap in use grew by 3.00 GiB"),
        (WatchdogSample(available_bytes=20 * GIB, swap_used_bytes=0, psi_full_avg10=55.0), "PSI full avg10"),
    ],
)
def test_watchdog_trips_with_the_reason(later: WatchdogSample, why: str) -> None:
    dog = _feed([WatchdogSample(available_bytes=30 * GIB, swap_used_bytes=0), later])
    dog.check()
    with pytest.raises(WatchdogTripped) as info:
        dog.check()
    assert why in str(info.value) and info.value.exit_code == 1
    assert "llmdeck plan" in info.value.render()


def test_psi_full_line_parsed(tmp_path: Path) -> None:
    p = tmp_path / "memory"
    p.write_text("some avg10=1.00 avg60=0 avg300=0 total=1\nfull avg10=42.50 avg60=0 avg300=0 total=1\n")
    assert read_psi_avg10(p, kind="full") == 42.5
    assert read_psi_avg10(tmp_path / "none", kind="full") is None


def _vllm_children_of(name: str) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"]
        and "vllm.entrypoints" in " ".join(p.info["cmdline"])
        and name in " ".join(p.info["cmdline"])
    ]


@pytest.mark.integration
def test_up_watchdog_stops_the_engine_before_it_thrashes(
    tiny_model_dir: Path,
    session_settings: object,
    stop_at_end: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A floor above this machine's memory trips at the first poll: engine stopped, record gone, exit 1."""
    stop_at_end("thrash")  # should the watchdog not trip, the server runs
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(session_settings.state_dir))  # type: ignore[attr-defined]
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(session_settings.cache_dir))  # type: ignore[attr-defined]
    floor = psutil.virtual_memory().total / GIB + 1
    t0 = time.monotonic()
    code, _, err = cli(
        [
            "up",
            "--model",
            str(tiny_model_dir),
            "--engine",
            "cpu",
            "--name",
            "thrash",
            "--port",
            str(free_port()),
            "--watchdog-floor-gib",
            f"{floor:.0f}",
            "--",
            "--served-model-name",
            "thrash-tiny-served",
        ],
        capsys,
    )
    assert code == 1, err
    assert time.monotonic() - t0 < 60
    assert "Stopped the engine during start-up" in err and "floor" in err
    assert "engine stopped" in err
    code, out, _ = cli(["status", "--json"], capsys)
    assert "thrash" not in {s["name"] for s in json.loads(out)}
    time.sleep(1)
    assert not _vllm_children_of("thrash-tiny-served"), "the engine must be stopped"
    assert (Path(session_settings.state_dir) / "logs" / "thrash.log").exists()  # type: ignore[attr-defined]


@pytest.mark.integration
def test_up_with_a_flag_vllm_rejects_stops_and_diagnoses(
    tiny_model_dir: Path,
    session_settings: object,
    stop_at_end: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stop_at_end("badflag")  # should vLLM take the flag, the server runs
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(session_settings.state_dir))  # type: ignore[attr-defined]
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(session_settings.cache_dir))  # type: ignore[attr-defined]
    code, _, err = cli(
        [
            "up",
            "--model",
            str(tiny_model_dir),
            "--engine",
            "cpu",
            "--name",
            "badflag",
            "--port",
            str(free_port()),
            "--",
            "--max-num-seqs",
            "not-a-number",
        ],
        capsys,
    )
    assert code == 1, err
    assert "badflag" in err and "max-num-seqs" in err  # vLLM's own complaint reaches the user
    code, out, _ = cli(["status", "--json"], capsys)
    assert "badflag" not in {s["name"] for s in json.loads(out)}
