"""Doctor probes of the serving stack: GPU, driver and CUDA, Docker, vLLM, Hugging Face, proxies."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llmdeck.doctor.model import DoctorFinding
from llmdeck.runtime.host import NvmlReport
from llmdeck.runtime.host import nvml_versions as nvml_versions  # re-exported: NVML lives in runtime.host
from llmdeck.runtime.preflight import min_version_table, parse_version
from llmdeck.runtime.preflight.vllm_version import GRANITE_HYBRID_ARCH, check_granite_layer_names
from llmdeck.util.procgroup import run_in_group
from llmdeck.util.shellquote import quote
from llmdeck.util.units import fmt_gib

Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]
COMMAND_TIMEOUT_S = 15.0
GB10_UTIL_CEILING = 0.85  # ../shared/knowledge/vllm-facts.md: real boots see ~101-102 of 121.6 GiB


def run_command(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """An external command with a bound: a hung `docker info` must not hang the doctor, and what it
    started goes with it (its own process group, killed whole: a child had outlived the doctor)."""
    try:
        return run_in_group(argv, COMMAND_TIMEOUT_S)
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"no answer within {COMMAND_TIMEOUT_S:.0f} s")


def probe_gpu(nvml: NvmlReport, versions: Mapping[str, str], *, has_nvidia_smi: bool) -> list[DoctorFinding]:
    if not nvml.available or not nvml.gpus:
        why = nvml.reason or "NVML found no GPU"
        fix = (
            "Install the NVML bindings (`pip install nvidia-ml-py`, or `llmdeck[gpu]`) so llmdeck "
            "can see the GPU."
            if has_nvidia_smi
            else "Without an NVIDIA GPU only the CPU engine (`--engine cpu`, demo and CI) runs here; on the "
            "GPU box install the NVIDIA driver."
        )
        return [
            DoctorFinding(id="gpu-none", area="gpu", status="warn", message=f"No GPU seen: {why}.", fix=fix)
        ]
    out = []
    for gpu in nvml.gpus:
        mem = fmt_gib(gpu.total_bytes) if gpu.total_bytes else "memory not reported"
        out.append(
            DoctorFinding(
                id=f"gpu-{gpu.index}",
                area="gpu",
                status="ok",
                message=f"GPU {gpu.index}: {gpu.name}, {mem}; driver {versions.get('driver', '?')}.",
                data=gpu.model_dump() | dict(versions),
            )
        )
    if nvml.memory_not_supported or any("GB10" in g.name for g in nvml.gpus):
        out.append(
            DoctorFinding(
                id="gpu-unified-memory",
                area="gpu",
                status="ok",
                message="Unified memory (GB10 class): NVML reports no GPU memory (nvidia-smi shows N/A); "
                "vLLM sizes the KV cache from MemAvailable (vllm PR #35356), shared with everything else "
                "on the box.",
                fix=f"Keep --gpu-memory-utilization at or below {GB10_UTIL_CEILING} and other tenants "
                "stopped (vllm-facts: real boots see ~101-102 GiB free of 121.6).",
            )
        )
    out += _probe_cuda(versions)
    return out


def _probe_cuda(versions: Mapping[str, str]) -> list[DoctorFinding]:
    cuda = versions.get("cuda")
    if not cuda:
        return [
            DoctorFinding(
                id="cuda-unknown",
                area="cuda",
                status="warn",
                message="The driver's CUDA version could not be read through NVML.",
                fix="Check `nvidia-smi` (top right: CUDA Version); images must not need a newer CUDA.",
            )
        ]
    return [
        DoctorFinding(
            id="cuda",
            area="cuda",
            status="ok",
            message=f"The driver supports CUDA up to {cuda}: use vLLM builds/images for CUDA <= {cuda} "
            "(e.g. a cu130 image needs 13.0).",
            data={"cuda": cuda},
        )
    ]


def probe_docker(
    run: Runner = run_command,
    *,
    which: Callable[[str], str | None] = shutil.which,
    servers_dir: Path | None = None,
) -> list[DoctorFinding]:
    found = _probe_daemon(run, which)
    if servers_dir is not None and found[0].id in ("docker", "docker-no-nvidia-runtime"):
        found += probe_unrecorded_containers(run, servers_dir)
    return found


def probe_unrecorded_containers(run: Runner, servers_dir: Path) -> list[DoctorFinding]:
    """Containers llmdeck started (its label) that no server record knows: the state dir was removed,
    or they belong to another LLMDECK_STATE_DIR. `status` and `down` cannot see them; one may hold the
    GPU's memory, or its name the next `up`."""
    from llmdeck.engines.docker import DockerError, docker_ps_argv, parse_ps
    from llmdeck.runtime.state import StateStore

    proc = run(docker_ps_argv())
    try:
        rows = parse_ps(proc.stdout) if proc.returncode == 0 else []
    except (DockerError, ValueError):
        rows = []
    known = {r.name for r in StateStore(servers_dir).list()}
    return [
        DoctorFinding(
            id="docker-unrecorded",
            area="docker",
            status="warn",
            message=f"Container {row.names!r} ({row.state}, {row.image}) was started by llmdeck for server "
            f"{row.llmdeck_name!r}, but no server record here knows it (the state dir {servers_dir} was "
            "removed, or it belongs to another LLMDECK_STATE_DIR): `llmdeck status` and `down` cannot see "
            "it, and it may hold GPU memory.",
            fix=f"Keep its log if you need it (`docker logs {quote(row.names)}`), then remove it: "
            f"`docker rm -f {quote(row.names)}`.",
            data={"container": row.names, "server": row.llmdeck_name, "state": row.state},
        )
        for row in rows
        if row.llmdeck_name and row.llmdeck_name not in known
    ]


def _probe_daemon(run: Runner, which: Callable[[str], str | None]) -> list[DoctorFinding]:
    if which("docker") is None:
        return [
            DoctorFinding(
                id="docker-absent",
                area="docker",
                status="warn",
                message="Docker is not installed: the docker engine (`--engine docker`) is unavailable.",
                fix="Use `--engine venv --python PATH` with a vLLM venv, or install Docker and the NVIDIA "
                "container toolkit.",
            )
        ]
    proc = run(["docker", "info", "--format", "{{json .Runtimes}}|{{.ServerVersion}}"])
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout or "").strip().splitlines()
        return [
            DoctorFinding(
                id="docker-no-daemon",
                area="docker",
                status="warn",
                message="The docker CLI is installed but no Docker daemon answers"
                + (f" ({last[-1][:200]})" if last else "")
                + ": `--engine docker` cannot start servers.",
                fix="Start it (`sudo systemctl start docker`) and make sure your user may use it "
                "(`sudo usermod -aG docker $USER`, then log in again).",
            )
        ]
    runtimes, _, version = proc.stdout.strip().rpartition("|")
    if "nvidia" not in runtimes:
        return [
            DoctorFinding(
                id="docker-no-nvidia-runtime",
                area="docker",
                status="warn",
                message=f"Docker {version} has no NVIDIA runtime: `docker run --gpus all` will fail.",
                fix="Install the NVIDIA container toolkit, then `sudo nvidia-ctk runtime configure "
                "--runtime=docker && sudo systemctl restart docker`.",
                data={"runtimes": runtimes},
            )
        ]
    return [
        DoctorFinding(
            id="docker", area="docker", status="ok", message=f"Docker {version} with the NVIDIA runtime."
        )
    ]


def probe_unknown_version(where: str) -> list[DoctorFinding]:
    """An image whose tag does not say its vLLM (``latest``, ``nightly``): the version is unknown."""
    return [
        DoctorFinding(
            id="vllm-version-unknown",
            area="vllm",
            status="warn",
            message=f"The tag of {where} does not say its vLLM version (e.g. `latest`, `nightly`): "
            "whether it serves the catalog's newer architectures is unknown, and version-bound lint rules "
            "are reported as warnings.",
            fix="Pin a versioned tag (e.g. vllm/vllm-openai:v0.22.0) so the checks can be exact.",
        )
    ]


def probe_vllm(version: str | None, error: str, *, where: str) -> list[DoctorFinding]:
    """The vLLM of the chosen venv or image, and which catalog architectures it is too old for."""
    if version is None:
        return [
            DoctorFinding(
                id="vllm-absent",
                area="vllm",
                status="warn",
                message=f"No vLLM in {where}" + (f": {error}" if error else "") + ".",
                fix="Point at a venv that has vLLM (`--python ~/vllm/.venv/bin/python`), or an image "
                "(`--image vllm/vllm-openai:vX.Y.Z`); `make quickstart` installs the CPU engine.",
            )
        ]
    have = parse_version(version)
    too_old: list[str] = []
    for arch, entry in min_version_table().get("architectures", {}).items():
        need = parse_version(str(entry["min"]))
        if have is not None and need is not None and have < need:
            too_old.append(f"{arch} (>= {entry['min']})")
    data: dict[str, Any] = {"version": version, "where": where, "too_old_for": too_old}
    if too_old:
        return [
            DoctorFinding(
                id="vllm-too-old",
                area="vllm",
                status="warn",
                message=f"vLLM {version} in {where} cannot serve: {', '.join(too_old)}.",
                fix="Upgrade vLLM (a newer image tag, or `pip install -U vllm` in the venv) before "
                "serving those.",
                data=data,
            )
        ]
    return [
        DoctorFinding(
            id="vllm",
            area="vllm",
            status="ok",
            message=f"vLLM {version} in {where}; serves every architecture in the catalog.",
            data=data,
        )
    ]


def probe_transformers(
    vllm_version: str, transformers_version: str | None, *, where: str
) -> list[DoctorFinding]:
    """The venv's transformers against its vLLM: Granite 4.0 models die on vLLM < 0.26 under >= 5.13."""
    found = check_granite_layer_names(GRANITE_HYBRID_ARCH, vllm_version, transformers_version, where=where)
    return [
        DoctorFinding(
            id="granite-layer-names",
            area="vllm",
            status="warn",
            message=f"{f.message} Other models are not affected.",
            fix=f.fix,
            data=f.data,
        )
        for f in found
    ]
