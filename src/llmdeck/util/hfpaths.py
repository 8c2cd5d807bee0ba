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
