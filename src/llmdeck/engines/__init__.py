"""Engines: how a LaunchSpec becomes a running vLLM server (CPU build, venv, Docker).

:func:`get` returns the engine a spec names (an :class:`~llmdeck.engines.base.Engine`: what it is,
what it can do, and how its servers start, run and stop); the classes register themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmdeck.engines.base import Engine
    from llmdeck.engines.docker import DockerCLI


def _registry() -> dict[str, type[Engine]]:
    import llmdeck.engines.docker.engine
    import llmdeck.engines.local  # noqa: F401  (the classes register on import)
    from llmdeck.engines.base import Engine

    return Engine.registry


def get(name: str, *, docker: DockerCLI | None = None) -> Engine:
    """The engine registered as ``name`` (``docker``: the docker client to use, tests inject one)."""
    registry = _registry()
    if name not in registry:
        raise ValueError(f"no engine {name!r}; the engines are {', '.join(registry)}")
    return registry[name](docker=docker)


def names() -> list[str]:
    """The registered engines' names."""
    return list(_registry())
