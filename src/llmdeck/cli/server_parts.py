"""Pieces of the server commands' CLI: `up`'s help text, the event renderer and the options it builds;
`logs`' tail and follow."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from llmdeck.cli.output import err_console, log_text

if TYPE_CHECKING:
    from llmdeck.settings import Settings

UP_HELP = """Start a vLLM server in the background (or --attach) and wait until it is ready.

Flags after `--` go to `vllm serve` unchanged.

Examples:

  llmdeck up --model ./tiny --name demo --port 8000

  llmdeck up --model ~/models/Qwen3-Coder-30B-A3B-Instruct-FP8 --engine venv \\
      --python ~/.venv/bin/python -- --max-model-len 65536

  llmdeck up --spec plan.json          # a launch spec written by `llmdeck plan --spec-out`

  llmdeck up --model ./tiny -- --api-key "$KEY"   # to vLLM as VLLM_API_KEY

  llmdeck up --model DIR --ray-cluster -- --tensor-parallel-size 2   # over `llmdeck cluster up`'s Ray

  llmdeck up --model DIR --unified-reserve-gib 8   # GB10 / CPU engine: keep 8 GiB for the desktop

On unified memory (GB10, the CPU engine) `up` drops the model's page cache, sizes the KV cache by
bytes from live memory (--kv-cache-memory-bytes) and leaves a watchdog that stops the server when
MemAvailable falls under --watchdog-floor-gib.
"""
RESERVE_HELP = "Unified memory: GiB kept for the OS when sizing the KV cache (LLMDECK_UNIFIED_RESERVE_GIB)."
TAIL_BYTES = 200_000  # what `logs` reads of the end of a log
BY_BYTES_HELP = "Unified memory: --kv-cache-memory-bytes from live memory, page cache dropped first."


def render_event(event: Any) -> None:
    """Print one runtime-service event on stderr (phases with their time since the start)."""
    console = err_console()
    if event.kind == "phase":
        detail = f" — {event.data.get('detail')}" if event.data.get("detail") else ""
        console.print(
            f"[cyan]{event.seconds or 0:6.1f}s[/] {escape(event.message)}{escape(detail)}", highlight=False
        )
    else:
        console.print(event.message, highlight=False, markup=False)


def render_draining(event: Any) -> None:
    """`down`'s events: only the wait for its requests (its outcome is the command's output)."""
    if event.kind == "draining":
        render_event(event)


def _up_options(settings: Settings, **kw: Any) -> Any:
    from llmdeck.runtime.service import UpOptions
    from llmdeck.runtime.watchdog import WatchdogConfig

    watchdog = kw.pop("watchdog", True)
    floor = kw.pop("watchdog_floor_gib", None)
    config = WatchdogConfig(floor_gib=settings.watchdog_floor_gib if floor is None else floor)
    return UpOptions(watchdog=config if watchdog else None, **kw)


def print_pool(settings: Settings, gateway: dict[str, Any] | None) -> None:
    """For `llmdeck status` on unified memory (GB10, a CPU box): the pool and the watchdog's trips."""
    from llmdeck.cli.output import out_console
    from llmdeck.runtime.guard import read_trip
    from llmdeck.runtime.pool import pool_is_unified, read_pool

    console = out_console()
    for path in sorted(settings.servers_dir.glob("*.watchdog")):
        trip = read_trip(settings.servers_dir, path.stem)
        if trip is not None:
            when = trip.at.strftime("%Y-%m-%d %H:%M:%S UTC")
            console.print(f"watchdog ({when}): {trip.message} {trip.hint}", markup=False, highlight=False)
    if not pool_is_unified():
        return
    managed = [str(m.get("model")) for m in (gateway or {}).get("models", [])]
    for line in read_pool(settings.servers_dir, managed).lines():
        console.print(line, markup=False, highlight=False)


def where(record: Any) -> str:
    """What runs a started server, for its "ready" line: ``pid N``, or a container's short id (a
    container has no pid of ours: ``pid None`` had been printed)."""
    if record.pid is None and record.container_id:
        return f"container {record.container_id[:12]}"
    return f"pid {record.pid}"


def say_ready(record: Any, text: str, *, as_json: bool) -> None:
    """A started server's record (--json) or its "ready" line ``text`` on stdout. Output that cannot be
    written (a closed stdout, a full disk) is still a failed command, but its error says the server is
    up and how to see or stop it: "Cannot write the output" alone had read as a start that failed,
    while the server ran on."""
    from llmdeck.cli.output import out_console, print_json

    try:
        if as_json:
            print_json(record)
        else:
            out_console().print(text, highlight=False)
    except OSError as exc:
        from llmdeck.cli.failures import known_failure
        from llmdeck.errors import OperationError

        failure = known_failure(exc)
        if failure is None:
            raise
        said = failure.message[:1].lower() + failure.message[1:]
        raise OperationError(
            f"The server {record.name!r} is up at {record.base_url}/v1, but llmdeck {said}",
            hint=f"`llmdeck status {record.name} --json` shows it; `llmdeck down {record.name}` stops it.",
        ) from exc


def print_tail(log_path: Path, lines: int) -> None:
    """The log file's last ``lines`` lines (of its last TAIL_BYTES), saying so when fewer are there."""
    from llmdeck.errors import OperationError
    from llmdeck.runtime.launcher import read_tail

    if not log_path.exists():  # deleted or moved away since the server started (its logs folder cleaned)
        raise OperationError(
            f"There is no log at {log_path}: it was deleted or moved away after the server started.",
            hint="The server's next start writes a new one (`llmdeck restart NAME`); `llmdeck status` shows "
            "whether it runs.",
        )
    text = read_tail(log_path, TAIL_BYTES)
    shown = text.splitlines()[-lines:]
    sys.stdout.write(log_text("\n".join(shown) + "\n"))
    sys.stdout.flush()
    if len(shown) < lines and log_path.stat().st_size > TAIL_BYTES:
        err_console().print(
            f"(the last {TAIL_BYTES // 1000} KB of {log_path} only: {len(shown)} lines)",
            markup=False,
            highlight=False,
        )


def follow_tail(log_path: Path, record: Any) -> None:
    """`logs -f`: print what the log gains until the server exits or Ctrl-C (a server's own follower:
    the log file, or `docker logs -f`; a log with no record: the file until Ctrl-C)."""
    from llmdeck.engines.logfiles import follow
    from llmdeck.runtime.engine_state import follow_log

    try:
        for text in follow(log_path, None) if record is None else follow_log(record):
            sys.stdout.write(log_text(text))
            sys.stdout.flush()
    except KeyboardInterrupt as exc:  # Ctrl-C is how a follow ends: exit 0
        if type(exc) is not KeyboardInterrupt:  # SIGTERM / SIGHUP (the CLI's Terminated): 143 / 129
            raise
