"""Whether a recorded engine (process or container) still runs, and its log text: asked of its engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from llmdeck.engines import get
from llmdeck.engines.base import Engine
from llmdeck.engines.process import Owner
from llmdeck.runtime.state import ServerRecord

if TYPE_CHECKING:
    from llmdeck.engines.docker import DockerCLI


def engine_of(record: ServerRecord, docker: DockerCLI | None = None) -> Engine:
    """The engine that runs ``record`` (``docker``: the docker client to use, tests inject one)."""
    return get(record.spec.engine, docker=docker)


def owner(record: ServerRecord, docker: DockerCLI | None = None) -> Owner:
    """ "ours": the recorded process (or container) still runs; "gone": it exited; "other": its pid
    now belongs to another program (the record is stale)."""
    return engine_of(record, docker).owner(record)


def is_alive(record: ServerRecord, docker: DockerCLI | None = None) -> bool:
    """The engine process (or container) llmdeck started still runs (a reused pid does not count)."""
    return owner(record, docker) == "ours"


def engine_log(record: ServerRecord, docker: DockerCLI | None = None) -> str:
    """The server's log text: the log file, or for a container `docker logs` (its last 2,000 lines;
    `down` saves the container's whole log to the log file before `docker rm`)."""
    return engine_of(record, docker).logs(record)


def engine_tail(record: ServerRecord, lines: int, docker: DockerCLI | None = None) -> str | None:
    """The server's last ``lines`` log lines where the log file does not hold them while it runs (a
    container's: `docker logs --tail LINES`); None: the log file has them."""
    return engine_of(record, docker).tail(record, lines)


def follow_log(record: ServerRecord, docker: DockerCLI | None = None) -> Iterator[str]:
    """What the server's log gains from now on, until it is gone: the log file, or for a container
    `docker logs -f`."""
    return engine_of(record, docker).follow_log(record)
