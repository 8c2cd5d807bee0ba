"""Checks before a launch: each one an actionable finding (what is wrong, and what to do).

``run_preflight(spec, need_bytes=..., settings=...)`` runs them all; the caller prints the report
and stops on errors unless ``--force``. Every check is also a function of its own, with its inputs
injectable, so tests run it on real data (a bound socket, a /proc/meminfo text, an Ollama payload).

By topic: :mod:`.report` (the findings), :mod:`.host_checks` (port, memory, tenants, GPU),
:mod:`.model_checks` (model folder, disk, plan's lint of the flags), :mod:`.vllm_version` (the
engine's vLLM against the architecture). The host's facts come from :mod:`llmdeck.runtime.host`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llmdeck.engines import get as get_engine
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime.host import MemInfo, parse_meminfo, read_meminfo
from llmdeck.runtime.launch_plan import LaunchPlan
from llmdeck.runtime.launch_plan import make as make_launch_plan
from llmdeck.runtime.preflight.findings import (
    PREFLIGHT_SCHEMA_VERSION,
    Finding,
    HostFacts,
    PreflightReport,
    Severity,
)
from llmdeck.runtime.preflight.host_checks import (
    DROP_CACHES,
    check_gpu,
    check_memory,
    check_ollama,
    check_other_servers,
    check_port,
)
from llmdeck.runtime.preflight.model_checks import (
    ADVISORY_LINT_RULES,
    FATAL_LINT_RULES,
    _looks_local,
    check_flags,
    check_model_and_disk,
    hf_cache_dir,
    read_architecture,
)
from llmdeck.runtime.preflight.vllm_version import (
    GRANITE_HYBRID_ARCH,
    Runner,
    check_granite_layer_names,
    check_vllm_supports,
    image_vllm_version,
    min_version_table,
    parse_version,
    probe_venv_transformers,
    probe_venv_vllm,
    venv_version_argv,
)
from llmdeck.runtime.tenants import OLLAMA_URL, find_inference_processes, nvml_snapshot, ollama_ps
from llmdeck.util.units import GIB

__all__ = [
    "ADVISORY_LINT_RULES",
    "DROP_CACHES",
    "FATAL_LINT_RULES",
    "GIB",
    "PREFLIGHT_SCHEMA_VERSION",
    "Finding",
    "HostFacts",
    "MemInfo",
    "PreflightReport",
    "Runner",
    "Severity",
    "check_flags",
    "check_gpu",
    "check_launch",
    "check_memory",
    "check_model_and_disk",
    "check_ollama",
    "check_other_servers",
    "check_port",
    "check_vllm_supports",
    "hf_cache_dir",
    "image_vllm_version",
    "min_version_table",
    "parse_meminfo",
    "parse_version",
    "probe_venv_transformers",
    "probe_venv_vllm",
    "read_architecture",
    "read_meminfo",
    "run_preflight",
    "venv_version_argv",
]

_ORDER = {"error": 0, "warning": 1, "info": 2}


def run_preflight(spec: LaunchSpec, **kw: Any) -> PreflightReport:
    """Every check for launching ``spec`` (:func:`check_launch`), the report alone."""
    return check_launch(spec, **kw)[0]


def check_launch(
    spec: LaunchSpec,
    *,
    need_bytes: int | None,
    settings: Any,
    disk_need_bytes: int | None = None,
    exclude_pids: Iterable[int] = (),
    ollama_url: str = OLLAMA_URL,
    probe_version: bool = True,
    run: Runner | None = None,
    port_checked: bool = False,
    probe_timeout_s: float | None = None,
) -> tuple[PreflightReport, LaunchPlan]:
    """Every check for launching ``spec``, and the start's plan, made once with the vLLM version the
    checks read (its lint is checked here; ``runtime.service`` hands it on to unified sizing).

    ``need_bytes``: the plan's host-memory need (None: skip).
    ``exclude_pids``: processes that belong to this server (e.g. on restart) and are no tenants.
    ``probe_version``: run the venv's Python to read its vLLM version (a few seconds; at most
    ``probe_timeout_s`` when under the probe's own 60 s limit; ``run`` stands in for it in tests).
    ``port_checked``: the caller checked the port already (``up``'s validation): not again.
    """
    from llmdeck import __version__

    report = PreflightReport(llmdeck_version=str(__version__), server=spec.name, engine=spec.engine)
    f = report.findings
    f += _host_findings(spec, need_bytes, list(exclude_pids), ollama_url, port_checked)
    f += check_model_and_disk(spec, disk_need_bytes=disk_need_bytes)
    if _looks_local(spec.model):
        report.architecture = read_architecture(Path(spec.model).expanduser())
    if get_engine(spec.engine).containerized:
        f += _docker_version_findings(spec, report)
    elif probe_version:
        f += _venv_version_findings(spec, report, run, probe_timeout_s)
    launch = make_launch_plan(spec, report.vllm_version)
    f += check_flags(launch, report.vllm_version)
    report.findings.sort(key=lambda x: _ORDER[x.severity])
    return report, launch


def _host_findings(
    spec: LaunchSpec, need_bytes: int | None, excluded: list[int], ollama_url: str, port_checked: bool
) -> list[Finding]:
    """Port, memory and the other tenants (Ollama, inference servers, GPU processes)."""
    f = [] if port_checked else check_port(spec.host, spec.port)
    try:
        f += check_memory(need_bytes, read_meminfo())
    except (OSError, ValueError) as exc:
        f.append(
            Finding(id="meminfo-unreadable", severity="info", message=f"Cannot read memory facts: {exc}.")
        )
    f += check_ollama(ollama_ps(ollama_url))
    f += check_other_servers(find_inference_processes(exclude_pids=excluded), own_port=spec.port)
    if not get_engine(spec.engine).runs_on_cpu:
        f += check_gpu(nvml_snapshot(), exclude_pids=excluded)
    return f


def _docker_version_findings(spec: LaunchSpec, report: PreflightReport) -> list[Finding]:
    """The image tag's vLLM against the architecture; how to ask the image when the tag does not say."""
    image = spec.image or "vllm/vllm-openai:latest"
    report.vllm_version = image_vllm_version(image)
    f = check_vllm_supports(report.architecture, report.vllm_version, where=f"image {image}")
    if report.vllm_version is None and report.architecture is not None:
        from llmdeck.engines.docker import image_vllm_version_argv, render_shell

        for finding in f:
            if finding.id == "vllm-version-unknown":
                finding.fix = f"Check it with: {render_shell(image_vllm_version_argv(image))}"
    return f


def _venv_version_findings(
    spec: LaunchSpec, report: PreflightReport, run: Runner | None, timeout_s: float | None
) -> list[Finding]:
    """The venv's vLLM (its Python run once, for at most ``timeout_s``) against the architecture."""
    python = spec.python or sys.executable
    version, error = probe_venv_vllm(python, run=run, timeout_s=timeout_s)
    report.vllm_version = version
    if version is not None:
        found = check_vllm_supports(report.architecture, version, where=python)
        if report.architecture == GRANITE_HYBRID_ARCH:  # the one model whose start hangs on transformers
            tf = probe_venv_transformers(python, run=run)
            found += check_granite_layer_names(report.architecture, version, tf, where=python)
        return found
    return [
        Finding(
            id="vllm-not-importable",
            severity="error",
            message=f"{python} cannot import vllm or tell its version ({error}).",
            fix="Point --python at the venv that has vLLM, or install it there "
            "(`PYTHON -m pip install vllm`).",
            data={"python": python},
        )
    ]
