"""NVML's one init/shutdown, for every layer (plan/ sits below runtime/; runtime.host builds on it).

nvidia-ml-py is optional: without it, or without a driver, :func:`nvml_init` raises
:class:`NvmlUnavailable` and the caller says so. ``import pynvml`` happens here, on call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from llmdeck.errors import InternalError


class NvmlUnavailable(InternalError):
    """NVML gives no answer: ``missing`` (nvidia-ml-py not installed) or it could not start."""

    def __init__(self, cause: BaseException, *, missing: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.missing = missing


def nvml_init() -> Any:
    """Import pynvml and start NVML; the module, or :class:`NvmlUnavailable`."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(exc, missing=True) from exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError and driver load failures
        raise NvmlUnavailable(exc, missing=False) from exc
    return pynvml


def nvml_shutdown(nv: Any) -> None:
    with contextlib.suppress(Exception):
        nv.nvmlShutdown()


@contextlib.contextmanager
def nvml_session() -> Iterator[Any]:
    """``with nvml_session() as nv:`` NVML started, and shut down after; raises NvmlUnavailable."""
    nv = nvml_init()
    try:
        yield nv
    finally:
        nvml_shutdown(nv)


def text(value: Any) -> str:
    """NVML strings are bytes in older bindings."""
    return value.decode() if isinstance(value, bytes) else str(value)
