"""Where the Hugging Face cache lives on this host, for every layer (engines/ sits below runtime/).

Two rules, kept apart on purpose: the host's HF home honours ``HF_HOME`` (what huggingface_hub and a
venv vLLM use); the folder the docker engine mounts defaults to ``~/.cache/huggingface`` whatever
``HF_HOME`` says (pass ``--hf-cache`` to mount another).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DEFAULT_HF_HOME = "~/.cache/huggingface"


def default_hf_home() -> Path:
    """huggingface_hub's default HF home, ``~/.cache/huggingface``, expanded."""
    return Path(DEFAULT_HF_HOME).expanduser()


def hf_home(explicit: str | None = None, *, environ: Mapping[str, str] | None = None) -> Path:
    """``explicit`` (e.g. ``--hf-cache``), else ``HF_HOME``, else ``~/.cache/huggingface``."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ if environ is None else environ
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"])
    return default_hf_home()


def _hf_hub_dirs() -> list[Path]:
    """The hub caches huggingface_hub reads, in its order: HF_HUB_CACHE, HF_HOME/hub, the default."""
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        dirs.append(Path(os.environ["HF_HOME"]) / "hub")
    dirs.append(default_hf_home() / "hub")
    return dirs


def find_in_hf_cache(repo_id: str) -> Path | None:
    """A snapshot folder of ``repo_id`` in the HF hub cache that holds config.json."""
    folder = "models--" + repo_id.replace("/", "--")
    for hub in _hf_hub_dirs():
        snaps = hub / folder / "snapshots"
        if not snaps.is_dir():
            continue
        candidates = sorted(
            (p for p in snaps.iterdir() if (p / "config.json").is_file()),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        if candidates:
            return candidates[0]
    return None
