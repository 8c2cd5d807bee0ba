"""Starts on a port llmdeck picked itself (``free_port``: a tune's trials, quickstart without --port).

Another program can take the port between the pick and the engine's bind: the start's port check then
refuses it (``PortInUseError``, exit 2: right for a port the user gave, wrong for one llmdeck chose), or
vLLM dies on "[Errno 98] Address already in use". Either is a clash, not the user's mistake nor the
candidate's: the start picks another port and runs again, :data:`PORT_TRIES` starts in all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llmdeck.errors import LlmdeckError, OperationError, PortInUseError, ServerStartError, StartStopped

if TYPE_CHECKING:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord

PORT_TRIES = 3
PORT_TAKEN_CAUSE = "address-in-use"  # runtime/data/vllm_failures.yaml


def port_clash(exc: BaseException) -> bool:
    """The start failed because the port was taken: refused before the launch, or the engine's bind."""
    if isinstance(exc, PortInUseError):
        return True
    return (
        isinstance(exc, ServerStartError)
        and not isinstance(exc, StartStopped)
        and PORT_TAKEN_CAUSE in exc.causes
    )


def start_on_picked_ports(
    spec: LaunchSpec,
    start: Callable[[LaunchSpec], ServerRecord],
    pick: Callable[[], int],
    on_clash: Callable[[int, int, LlmdeckError], None],
    tries: int = PORT_TRIES,
) -> tuple[ServerRecord, LaunchSpec]:
    """``start(spec)``; on a port clash ``on_clash(taken, next, error)`` and ``start`` again on ``pick()``'s
    port, ``tries`` starts in all (the last one's error propagates; a refused port as a failed start,
    exit 1: it had been the user's taken port, exit 2 with "choose another --port", though llmdeck had
    picked every one). Returns the server and its spec."""
    for _ in range(tries - 1):
        try:
            return start(spec), spec
        except LlmdeckError as exc:
            if not port_clash(exc):
                raise
            port = pick()
            on_clash(spec.port, port, exc)
            spec = spec.model_copy(update={"port": port})
    try:
        return start(spec), spec
    except PortInUseError as exc:
        raise OperationError(
            f"{exc.message} It was the last of the {tries} ports llmdeck picked, each taken by another "
            "program before the server could bind it.",
            hint="Something on this host takes free ports as fast as they are picked: find it "
            "(`ss -ltnp`), then run again.",
        ) from exc
