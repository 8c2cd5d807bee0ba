"""runtime/host.py (and util/nvml.py under it): the one place that reads this host."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from llmdeck.runtime import host
from llmdeck.util.units import GIB

MEMINFO = """MemTotal:       24576000 kB
MemFree:         1048576 kB
MemAvailable:   20971520 kB
Buffers:          102400 kB
Cached:         16777216 kB
SwapTotal:       8388608 kB
SwapFree:        4194304 kB
"""


def test_meminfo_page_cache_and_swap() -> None:
    mem = host.parse_meminfo(MEMINFO)
    assert mem.available == 20971520 * 1024
    assert mem.page_cache == (16777216 + 102400) * 1024
    assert mem.swap_used == 4 * GIB
    with pytest.raises(ValueError):
        host.parse_meminfo("not meminfo")


def test_psi_some_and_full_lines(tmp_path: Path) -> None:
    p = tmp_path / "memory"
    p.write_text(
        "some avg10=12.50 avg60=3.00 avg300=1.00 total=100\nfull avg10=4.25 avg60=0 avg300=0 total=0\n"
    )
    assert host.read_psi_avg10(p) == 12.5
    assert host.read_psi_avg10(p, kind="full") == 4.25
    assert host.read_psi_avg10(tmp_path / "absent") is None


def test_hf_cache_dir_explicit_then_hf_home_then_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert host.hf_cache_dir(str(tmp_path / "mine")) == tmp_path / "mine"
    assert host.hf_cache_dir() == tmp_path / "hf"
    monkeypatch.delenv("HF_HOME")
    assert host.hf_cache_dir() == Path("~/.cache/huggingface").expanduser() == host.default_hf_home()


def test_disk_free_of_a_folder_not_made_yet(tmp_path: Path) -> None:
    later = tmp_path / "a" / "b"
    assert host.existing_ancestor(later) == tmp_path
    assert abs(host.disk_free(later) - shutil.disk_usage(tmp_path).free) < 64 * 1024**2


class _NotSupported(Exception):
    pass


def _fake_gb10(calls: list[str]) -> types.ModuleType:
    """A stand-in for pynvml on a GB10: one GPU whose memory query raises NotSupported."""
    nv: Any = types.ModuleType("pynvml")
    nv.NVMLError_NotSupported = _NotSupported
    nv.nvmlInit = lambda: calls.append("init")
    nv.nvmlShutdown = lambda: calls.append("shutdown")
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlDeviceGetHandleByIndex = lambda i: object()
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA GB10"
    nv.nvmlDeviceGetCudaComputeCapability = lambda h: (12, 1)

    def not_supported(_h: object) -> object:
        raise _NotSupported("Not Supported")

    nv.nvmlDeviceGetMemoryInfo = not_supported
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: []
    nv.nvmlDeviceGetGraphicsRunningProcesses = lambda h: []
    nv.nvmlSystemGetDriverVersion = lambda: b"580.95"
    nv.nvmlSystemGetCudaDriverVersion = lambda: 13000
    return nv  # type: ignore[no-any-return]


def test_gb10_memory_is_not_reported_and_nvml_is_shut_down(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", _fake_gb10(calls))
    report = host.nvml_snapshot()
    assert report.available and report.memory_not_supported
    assert report.gpus[0].name == "NVIDIA GB10" and report.gpus[0].total_bytes is None
    assert host.nvml_versions() == {"driver": "580.95", "cuda": "13.0"}
    sampler = host.NvmlSampler()
    assert sampler.notes == [host.NVML_NOT_REPORTED] and sampler.used() == [None]
    assert calls == ["init", "shutdown", "init", "shutdown", "init"]


def test_without_nvml_bindings_every_reader_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    report = host.nvml_snapshot()
    assert not report.available and "nvidia-ml-py" in report.reason
    assert host.nvml_versions() == {}
    assert host.NvmlSampler().note == "GPU memory not sampled: nvidia-ml-py is not installed"


def test_plan_machine_auto_reads_a_gb10_through_the_same_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.plan.machine import get_machine

    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", _fake_gb10(calls))
    profile = get_machine("auto")
    assert profile.unified_memory and calls == ["init", "shutdown"]
