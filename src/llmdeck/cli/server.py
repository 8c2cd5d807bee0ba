"""CLI group: the server lifecycle — up, down, restart, status, logs."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json

if TYPE_CHECKING:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord
    from llmdeck.settings import Settings

UP_HELP = """Start a vLLM server in the background (or --attach) and wait until it is ready.

Flags after `--` go to `vllm serve` unchanged.

Examples:

  llmdeck up --model ./tiny --name demo --port 8000

  llmdeck up --model ~/models/Qwen3-Coder-30B-A3B-Instruct-FP8 --engine venv \\
      --python ~/.venv/bin/python -- --max-model-len 65536

  llmdeck up --spec plan.json          # a launch spec written by `llmdeck plan --spec-out`
"""


def _pick_name(settings: Settings, name: str | None) -> str:
    from llmdeck.errors import NotRunningError, UsageError
    from llmdeck.runtime.state import StateStore

    if name:
        return name
    records = StateStore(settings.servers_dir).list()
    if not records:
        raise NotRunningError(
            "No llmdeck server is running.", hint="Start one with `llmdeck up --model DIR`."
        )
    if len(records) > 1:
        names = ", ".join(r.name for r in records)
        raise UsageError(f"Several servers are known ({names}).", hint="Name the one you mean.")
    return records[0].name


def _default_engine() -> str:
    import shutil

    return "venv" if shutil.which("nvidia-smi") else "cpu"


def _build_spec(
    *,
    spec_file: Path | None,
    overrides: dict[str, Any],
    extra: list[str],
    settings: Settings,
) -> LaunchSpec:
    from llmdeck.engines.spec import build_spec, read_spec_file

    base = read_spec_file(spec_file) if spec_file is not None else None
    defaults = {"port": settings.port, "host": settings.host, "engine": _default_engine()}
    return build_spec(base, overrides=overrides, extra_args=extra, defaults=defaults)


def _phase_printer() -> Any:
    """A callback that shows the startup phases as they happen (stderr)."""
    from llmdeck.runtime.phases import PhaseTracker

    console = err_console()
    tracker = PhaseTracker()
    t0 = time.monotonic()

    def on_line(line: str) -> None:
        for event in tracker.feed(line):
            detail = f" — {event.detail}" if event.detail else ""
            console.print(
                f"[cyan]{time.monotonic() - t0:6.1f}s[/] {escape(event.label)}{escape(detail)}",
                highlight=False,
            )

    return on_line


def _print_records_json_or_table(statuses: list[Any], as_json: bool) -> None:
    if as_json:
        print_json(statuses)
        return
    if not statuses:
        return
    from rich.table import Table

    table = Table(title="llmdeck servers")
    for col in ("name", "state", "engine", "model", "url", "pid", "uptime", "run", "wait", "KV"):
        table.add_column(col)
    for st in statuses:
        m = st.metrics or {}
        uptime = f"{st.uptime_s / 60:.1f} min" if st.uptime_s is not None else "-"
        kv = f"{m['kv_usage'] * 100:.1f}%" if "kv_usage" in m else "-"
        table.add_row(
            st.name,
            st.state,
            st.engine,
            st.served_model_name,
            st.base_url,
            str(st.pid or "-"),
            uptime,
            str(int(m["running"])) if "running" in m else "-",
            str(int(m["waiting"])) if "waiting" in m else "-",
            kv,
        )
    out_console().print(table)
    for st in statuses:
        if st.state == "dead" and st.log_tail:
            err_console().print(
                f"[red]{escape(st.name)} is dead[/]; last lines of {escape(str(st.log_path))}:"
            )
            err_console().print(st.log_tail, markup=False, highlight=False)


def _attach(record: ServerRecord, settings: Settings) -> None:
    """Foreground mode: stream the log until the server exits; Ctrl-C stops it."""
    from llmdeck.runtime.launcher import down
    from llmdeck.runtime.process import pid_alive

    offset = 0
    try:
        while True:
            with open(record.log_path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            if chunk:
                sys.stderr.write(chunk.decode("utf-8", errors="replace"))
                sys.stderr.flush()
                offset += len(chunk)
            if not pid_alive(record.pid):
                break
            time.sleep(0.3)
    except KeyboardInterrupt:
        err_console().print(f"stopping {record.name} …", markup=False)
        down(record.name, settings)


def register(app: typer.Typer) -> None:
    from llmdeck.cli.validate import ForwardingCommand, host, positive_seconds

    @app.command("up", help=UP_HELP, cls=ForwardingCommand, context_settings={"allow_extra_args": True})
    def up_cmd(
        ctx: typer.Context,
        model: str = typer.Option(None, "--model", "-m", help="Model folder or Hugging Face repo id."),
        name: str = typer.Option(None, "--name", "-n", help="Server name (default: 'default')."),
        port: int = typer.Option(
            None, "--port", "-p", min=1, max=65535, help="Port (default: LLMDECK_PORT or 8000)."
        ),
        host_: str = typer.Option(
            None, "--host", callback=host, help="Bind address (0.0.0.0 to serve the LAN)."
        ),
        engine: str = typer.Option(
            None, "--engine", help="cpu | venv | docker (default: venv with a GPU, else cpu)."
        ),
        python: str = typer.Option(None, "--python", help="venv engine: the Python that has vLLM."),
        served_model_name: str = typer.Option(
            None, "--served-model-name", help="Name clients send as `model`."
        ),
        image: str = typer.Option(None, "--image", help="docker engine: the image."),
        spec_file: Path = typer.Option(
            None, "--spec", help="A launch spec JSON from `llmdeck plan --spec-out`."
        ),
        attach: bool = typer.Option(
            False, "--attach", help="Stay in the foreground, streaming the log; Ctrl-C stops."
        ),
        timeout: float = typer.Option(
            None, "--timeout", callback=positive_seconds, help="Seconds to wait for readiness."
        ),
        force: bool = typer.Option(False, "--force", help="Start even when preflight finds problems."),
        warmup: bool = typer.Option(False, "--warmup/--no-warmup", help="Send warmup requests once ready."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        from llmdeck.errors import UsageError

        settings = get_settings(ctx)
        if engine is not None and engine not in {"cpu", "venv", "docker"}:
            raise UsageError(f"Unknown engine {engine!r}.", hint="Use --engine cpu, venv or docker.")
        overrides = {
            "model": model,
            "name": name,
            "port": port,
            "host": host_,
            "engine": engine,
            "python": python,
            "served_model_name": served_model_name,
            "image": image,
        }
        spec = _build_spec(spec_file=spec_file, overrides=overrides, extra=list(ctx.args), settings=settings)
        record = _run_up(spec, settings, force=force, timeout=timeout, attach=attach, warmup=warmup)
        if record is None:
            return
        if as_json:
            print_json(record)
        else:
            out_console().print(
                f"[green]ready[/] {record.name}: {record.served_model_name} at {record.base_url}/v1 "
                f"(pid {record.pid}, log {record.log_path})",
                highlight=False,
            )

    @app.command("down")
    def down_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(None, help="Server name (optional when only one runs)."),
        all_: bool = typer.Option(False, "--all", help="Stop every llmdeck server."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Stop a server: SIGTERM, then SIGKILL after a grace period. Its log stays.

        Examples:

          llmdeck down demo

          llmdeck down --all --json
        """
        from llmdeck.runtime.launcher import down
        from llmdeck.runtime.state import StateStore

        settings = get_settings(ctx)
        names = (
            [r.name for r in StateStore(settings.servers_dir).list()]
            if all_
            else [_pick_name(settings, name)]
        )
        results = {n: down(n, settings) for n in names}
        if as_json:
            print_json(results)
        else:
            for n, outcome in results.items():
                out_console().print(f"{n}: {outcome}", markup=False)

    @app.command("status")
    def status_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(None, help="Only this server (a name, or the URL of any server)."),
        timeout: float = typer.Option(
            10.0, "--timeout", callback=positive_seconds, help="With a URL: limit (s) for each question."
        ),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """Every llmdeck server: state, model, URL, uptime and live queue/KV from /metrics.

        Given a URL instead of a name: the state of any OpenAI-compatible server there (exit 1 when it
        is not ready: unreachable, not answering, needs an API key, not OpenAI-compatible).

        Examples:

          llmdeck status

          llmdeck status demo --json

          llmdeck status http://127.0.0.1:8000
        """
        from llmdeck.runtime.launcher import server_status
        from llmdeck.runtime.state import StateStore

        settings = get_settings(ctx)
        if name and ("://" in name or ":" in name):
            from llmdeck.cli.status_url import status_of_url

            status_of_url(name, settings, as_json, timeout)
            return
        store = StateStore(settings.servers_dir)
        records = [store.load(name)] if name else store.list()
        statuses = [server_status(r) for r in records]
        _print_records_json_or_table(statuses, as_json)
        if not as_json and not statuses:
            err_console().print("No llmdeck servers. Start one with `llmdeck up --model DIR`.")

    @app.command("logs")
    def logs_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(None, help="Server name (optional when only one runs)."),
        follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
        lines: int = typer.Option(50, "--lines", "-n", min=1, help="How many lines of the tail."),
    ) -> None:
        """Print a server's log (it survives crashes and `down`).

        Examples:

          llmdeck logs demo -n 200

          llmdeck logs -f            # follow the only running server until it exits
        """
        from llmdeck.errors import NotRunningError
        from llmdeck.runtime.launcher import read_tail
        from llmdeck.runtime.process import pid_alive
        from llmdeck.runtime.state import StateStore

        settings = get_settings(ctx)
        store = StateStore(settings.servers_dir)
        pid = None
        if name and not store.path(name).exists():
            log_path = settings.logs_dir / f"{name}.log"
            if not log_path.exists():
                raise NotRunningError(f"No server or log named {name!r}.", hint="See `llmdeck status`.")
        else:
            record = store.load(_pick_name(settings, name))
            log_path, pid = record.log_path, record.pid
        text = read_tail(log_path)
        sys.stdout.write("\n".join(text.splitlines()[-lines:]) + "\n")
        sys.stdout.flush()
        if not follow:
            return
        offset = log_path.stat().st_size
        try:
            while True:
                with open(log_path, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                if chunk:
                    sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                    sys.stdout.flush()
                    offset += len(chunk)
                elif pid is not None and not pid_alive(pid):
                    break
                time.sleep(0.5)
        except KeyboardInterrupt:
            return

    @app.command("restart")
    def restart_cmd(
        ctx: typer.Context,
        name: str = typer.Argument(None, help="Server name (optional when only one runs)."),
        timeout: float = typer.Option(
            None, "--timeout", callback=positive_seconds, help="Seconds to wait for readiness."
        ),
        force: bool = typer.Option(False, "--force", help="Start even when preflight finds problems."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """The safe restart: stop, wait for memory to come back, check tenants, start, follow to ready.

        Examples:

          llmdeck restart demo

          llmdeck restart demo --timeout 1800 --json
        """
        from llmdeck.runtime.launcher import down
        from llmdeck.runtime.state import StateStore

        settings = get_settings(ctx)
        record = StateStore(settings.servers_dir).load(_pick_name(settings, name))
        console = err_console()
        console.print(f"stopping {record.name} …", markup=False)
        down(record.name, settings)
        freed = _wait_memory_settles()
        console.print(f"memory settled: MemAvailable {freed / 2**30:.1f} GiB")
        new = _run_up(
            record.spec,
            settings,
            force=force,
            timeout=timeout,
            attach=False,
            warmup=False,
            exclude_pids=(record.pid,) if record.pid else (),
        )
        if new is None:
            return
        if as_json:
            print_json(new)
        else:
            out_console().print(
                f"[green]ready[/] {new.name} at {new.base_url}/v1 (pid {new.pid})", highlight=False
            )


def _attach_docker(spec: LaunchSpec) -> None:
    """Foreground container (`docker run --rm`, like seed 004's `docker run -it`): Ctrl-C stops it."""
    import subprocess

    from llmdeck.engines.docker import docker_run_argv
    from llmdeck.errors import OperationError

    argv = docker_run_argv(spec, detach=False, tty=sys.stdin.isatty())
    err_console().print(" ".join(argv), highlight=False, markup=False)
    try:
        code = subprocess.call(argv)
    except FileNotFoundError as exc:
        raise OperationError("The docker client is not installed.", hint="Use --engine venv.") from exc
    if code not in (0, 130):
        raise OperationError(f"The container exited with code {code}.", hint="Read its output above.")


def _wait_memory_settles(max_s: float = 30.0) -> int:
    """After a stop, wait until MemAvailable stops rising (the engine's memory is back)."""
    import psutil

    last = psutil.virtual_memory().available
    deadline = time.monotonic() + max_s
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = psutil.virtual_memory().available
        if now - last < 256 * 2**20:
            return int(now)
        last = now
    return int(last)


def _run_up(
    spec: LaunchSpec,
    settings: Settings,
    *,
    force: bool,
    timeout: float | None,
    attach: bool,
    warmup: bool,
    exclude_pids: tuple[int, ...] = (),
) -> ServerRecord | None:
    from llmdeck.runtime.launcher import check_port, start_background, validate_spec, wait_ready

    console = err_console()
    validate_spec(spec)
    check_port(spec.host, spec.port)
    _preflight(spec, settings, force=force, exclude_pids=exclude_pids)
    console.print(f"starting {spec.name} ({spec.engine}): {spec.model} on port {spec.port}", markup=False)
    if attach and spec.engine == "docker":
        _attach_docker(spec)
        return None
    record = start_background(spec, settings)
    console.print(f"log: {record.log_path}", markup=False)
    if attach:
        _attach(record, settings)
        return None
    record = wait_ready(record, settings, timeout_s=timeout, on_line=_phase_printer())
    if warmup:
        _warmup(record)
    return record


def _preflight(
    spec: LaunchSpec, settings: Settings, *, force: bool, exclude_pids: tuple[int, ...] = ()
) -> None:
    from llmdeck.errors import PortInUseError, UsageError
    from llmdeck.runtime.launcher import check_port
    from llmdeck.runtime.preflight import run_preflight

    report = run_preflight(spec, need_bytes=None, settings=settings, exclude_pids=exclude_pids)
    console = err_console()
    blocking = [f for f in report.findings if f.severity == "error"]
    for finding in report.findings:
        fix = f" Fix: {finding.fix}" if finding.fix else ""
        console.print(f"preflight {finding.severity}: {finding.message}{fix}", highlight=False, markup=False)
    if blocking and not force:
        port_issue = next((f for f in blocking if "port" in f.id), None)
        if port_issue is not None:
            check_port(spec.host, spec.port)  # raises the precise PortInUseError
            raise PortInUseError(port_issue.message, hint=port_issue.fix)
        raise UsageError(
            f"Preflight found {len(blocking)} problem(s): " + " ".join(f.message for f in blocking),
            hint="Fix them, or pass --force to start anyway.",
        )


def _warmup(record: ServerRecord) -> None:
    import asyncio

    from llmdeck.client.openai import get_models
    from llmdeck.runtime.warmup import warmup

    models = get_models(record.base_url, timeout_s=10)  # typed errors (exit 1), never a KeyError
    mml = models[0].get("max_model_len") if models else None
    max_len = mml if isinstance(mml, int) and mml > 0 else 2048
    console = err_console()
    console.print(f"warming up {record.name} (prompt lengths up to {max_len} tokens) …", markup=False)
    report = asyncio.run(warmup(record.base_url, record.served_model_name, max_model_len=max_len))
    console.print(report.summary(), highlight=False)
