"""Run every doctor probe and collect one report."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable

from pydantic import BaseModel

from llmdeck import __version__
from llmdeck.doctor import env as env_probes
from llmdeck.doctor import host, stack
from llmdeck.doctor.model import DoctorFinding, DoctorReport
from llmdeck.errors import UsageError
from llmdeck.runtime import host as host_facts
from llmdeck.runtime import preflight, tenants
from llmdeck.settings import Settings


class DoctorOptions(BaseModel):
    """What to examine besides the host: the venv or image the user will serve with."""

    python: str | None = None
    image: str | None = None
    port: int | None = None


Progress = Callable[[str], None]


def _vllm(options: DoctorOptions) -> list[DoctorFinding]:
    if options.image:
        version = preflight.image_vllm_version(options.image)
        if version is None:
            return stack.probe_unknown_version(f"image {options.image}")
        return stack.probe_vllm(version, "", where=f"image {options.image}")
    python = options.python or sys.executable
    version, err = preflight.probe_venv_vllm(python)
    found = stack.probe_vllm(version, err, where=f"the Python {python}")
    if version is not None:
        tf = preflight.probe_venv_transformers(python)
        found += stack.probe_transformers(version, tf, where=f"the Python {python}")
    return found


def _folders(settings: Settings) -> list[DoctorFinding]:
    """A folder setting no folder can be made for (a read-only or missing HOME): every command that
    writes stops on it, so it is a failed finding with the error's own fix."""
    error = settings.folder_error
    if error is None:
        return [
            DoctorFinding(id="folders", area="folders", status="ok", message="llmdeck's folders can be made.")
        ]
    return [
        DoctorFinding(
            id="folders", area="folders", status="fail", message=error.message, fix=error.hint or ""
        )
    ]


def _steps(settings: Settings, options: DoctorOptions) -> list[tuple[str, Callable[[], list[DoctorFinding]]]]:
    environ = dict(os.environ)
    hf_home = host_facts.hf_cache_dir()
    return [
        ("llmdeck's folders", lambda: _folders(settings)),
        ("OS", lambda: host.probe_os()),
        (
            "GPU and driver (NVML)",
            lambda: stack.probe_gpu(
                host_facts.nvml_snapshot(),
                host_facts.nvml_versions(),
                has_nvidia_smi=shutil.which("nvidia-smi") is not None,
            ),
        ),
        ("Docker", lambda: stack.probe_docker(servers_dir=settings.servers_dir)),
        ("vLLM", lambda: _vllm(options)),
        ("Hugging Face variables", lambda: env_probes.probe_hf(environ)),
        ("proxies", lambda: env_probes.probe_proxies(environ)),
        ("disk", lambda: host.probe_disk({"LLMDECK_MODELS_DIR": settings.models_dir, "HF_HOME": hf_home})),
        ("memory", lambda: host.probe_memory(host_facts.read_meminfo(), host_facts.read_psi_avg10())),
        ("memory pool", lambda: host.probe_pool(settings.servers_dir)),
        ("Ollama", lambda: host.probe_ollama(tenants.ollama_ps())),
        (
            "other servers",
            lambda: host.probe_servers(tenants.find_inference_processes(exclude_pids=[os.getpid()])),
        ),
        ("port", lambda: host.probe_port(settings.host, options.port or settings.port)),
    ]


def run_doctor(settings: Settings, options: DoctorOptions, progress: Progress | None = None) -> DoctorReport:
    """Every probe in turn; one that breaks becomes a warn finding, never a crash of the report."""
    if options.python and not (os.path.isfile(options.python) and os.access(options.python, os.X_OK)):
        raise UsageError(
            f"--python {options.python} is not an executable file.",
            hint="Give the Python of the venv you will serve with, e.g. --python ~/vllm/.venv/bin/python.",
        )
    report = DoctorReport(llmdeck_version=__version__)
    for label, step in _steps(settings, options):
        if progress:
            progress(label)
        try:
            report.findings += step()
        except Exception as exc:  # a probe's own failure is a finding, not the end of the report
            report.findings.append(
                DoctorFinding(
                    id="probe-failed",
                    area=label,
                    status="warn",
                    message=f"Checking {label} failed: {type(exc).__name__}: {exc}.",
                    fix="Run again with LLMDECK_DEBUG=1 and report it if it persists.",
                )
            )
            if settings.debug:
                raise
    return report
