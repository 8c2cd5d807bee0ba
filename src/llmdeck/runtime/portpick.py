"""Starts on a port llmdeck picked itself (``free_port``: a tune's trials, quickstart without --port).

Another program can take the port between the pick and the engine's bind: the start's port check then
refuses it (``PortInUseError``, exit 2: right for a port the user gave, wrong for one llmdeck chose), or
vLLM dies on "[Errno 98] Address already in use". Either is a clash, not the user's mistake nor the
candidate's: the start picks another port and runs again, :data:`PORT_TRIES` starts in all.

:func:`retry_on_clash` is that rule for any port-carrying thing (a LaunchSpec here, Ray's
client-server port in ``cluster/local.py``); :func:`start_on_picked_ports` is it for a server's start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from llmdeck.errors import LlmdeckError, OperationError, PortInUseError, ServerStartError, StartStopped

if TYPE_CHECKING:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord

PORT_TRIES = 3
PORT_TAKEN_CAUSE = "address-in-use"  # runtime/data/vllm_failures.yaml

Held = TypeVar("Held")  # what carries the port: a LaunchSpec, a bare port number
Started = TypeVar("Started")


def retry_on_clash(
    first: Held,
    start: Callable[[Held], Started],
    repick: Callable[[Held], Held],
    clash: Callable[[LlmdeckError, Held], bool],
    on_clash: Callable[[Held, Held, LlmdeckError], None],
    tries: int = PORT_TRIES,
) -> tuple[Started, Held]:
    """``start(first)``; when it fails with an error that ``clash(error, held)`` calls a taken port, the
    same on ``repick(held)`` (after ``on_clash(taken, next, error)``), ``tries`` starts in all. Any other
    error, and the last start's, propagates. Returns what ``start`` returned and what it started on."""
    held = first
    for _ in range(tries - 1):
        try:
            return start(held), held
        except LlmdeckError as exc:
            if not clash(exc, held):
                raise
            moved = repick(held)
            on_clash(held, moved, exc)
            held = moved
    return start(held), held


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

    def repick(held: LaunchSpec) -> LaunchSpec:
        return held.model_copy(update={"port": pick()})

    def tell(taken: LaunchSpec, moved: LaunchSpec, exc: LlmdeckError) -> None:
        on_clash(taken.port, moved.port, exc)

    try:
        return retry_on_clash(spec, start, repick, lambda exc, _: port_clash(exc), tell, tries)
    except PortInUseError as exc:
        raise OperationError(
            f"{exc.message} It was the last of the {tries} ports llmdeck picked, each taken by another "
            "program before the server could bind it.",
            hint="Something on this host takes free ports as fast as they are picked: find it "
            "(`ss -ltnp`), then run again.",
        ) from exc
