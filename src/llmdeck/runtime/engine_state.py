"""Whether a recorded engine (process or container) still runs, and its log text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.runtime.logfiles import header_line, read_tail
from llmdeck.runtime.process import Owner, pid_owner
from llmdeck.runtime.state import ServerRecord
from llmdeck.util.redact import redact_text

if TYPE_CHECKING:
    from llmdeck.engines.docker import DockerCLI


def _docker(docker: DockerCLI | None = None) -> DockerCLI:
    from llmdeck.engines.docker import DockerCLI

    return docker or DockerCLI()


def owner(record: ServerRecord, docker: DockerCLI | None = None) -> Owner:
    """ "ours": the recorded process (or container) still runs; "gone": it exited; "other": its pid
    now belongs to another program (the record is stale)."""
    if record.spec.engine == "docker":
        from llmdeck.errors import LlmdeckError

        try:
            return "ours" if _docker(docker).inspect(record.name).running else "gone"
        except LlmdeckError:
            return "gone"
    return pid_owner(record.pid, record.process, record.argv)


def is_alive(record: ServerRecord, docker: DockerCLI | None = None) -> bool:
    """The engine process (or container) llmdeck started still runs (a reused pid does not count)."""
    return owner(record, docker) == "ours"


def engine_log(record: ServerRecord, docker: DockerCLI | None = None) -> str:
    """The server's log text: the log file, or for a container `docker logs` (saved to the log file
    so that it survives `docker rm`)."""
    if record.spec.engine != "docker":
        return read_tail(record.log_path)
    from llmdeck.errors import LlmdeckError

    try:
        text = _docker(docker).logs(record.name, tail=2000)
    except LlmdeckError:
        return read_tail(record.log_path)
    from llmdeck.util.atomic import atomic_write_text

    header = record.log_path.read_text(encoding="utf-8") if record.log_path.exists() else ""
    first = header.splitlines()[0] + "\n" if header.startswith("# llmdeck") else header_line(record.argv)
    atomic_write_text(record.log_path, first + redact_text(text), secret=True)
    return text
