"""CLI group: the server lifecycle — up, down, restart, status, logs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from llmdeck.cli.options import drain_timeout, ready_timeout, request_timeout
from llmdeck.cli.output import JSON_OPTION, err_console, esc, get_settings, log_text, out_console, print_json
from llmdeck.cli.server_parts import (
    BY_BYTES_HELP,
    RESERVE_HELP,
    UP_HELP,
    _up_options,
    follow_tail,
    print_pool,
    print_tail,
    render_draining,
    say_ready,
    where,
)
from llmdeck.cli.server_parts import render_event as render_event
from llmdeck.cli.validate import ForwardingCommand, host, number

if TYPE_CHECKING:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord
    from llmdeck.settings import Settings

READY_DEFAULT = " (default: LLMDECK_READY_TIMEOUT_S or 900)"


def _pick_name(settings: Settings, name: str | None) -> str:
    from llmdeck.errors import NotRunningError, UsageError
    from llmdeck.runtime.state import StateStore
    from llmdeck.util.names import validate_server_name

    if name:
        return validate_server_name(name)
    records = StateStore(settings.servers_dir).list()
    if not records:
        raise NotRunningError(
            "No llmdeck server is running.", hint="Start one with `llmdeck up --model DIR`."
        )
    if len(records) > 1:
        names = ", ".join(r.name for r in records)
        raise UsageError(f"Several servers are known ({names}).", hint="Name the one you mean.")
    return records[0].name


def _warn_unreadable(settings: Settings) -> None:
    """A warning on stderr for each server record that cannot be read (skipped, never fatal)."""
    from llmdeck.runtime.state import StateStore

    for problem in StateStore(settings.servers_dir).unreadable():
        err_console().print(f"warning: {problem}", markup=False, highlight=False)


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


def register(app: typer.Typer) -> None:
    app.command("up", help=UP_HELP, cls=ForwardingCommand, context_settings={"allow_extra_args": True})(
        up_cmd
    )
    app.command("down")(down_cmd)
    app.command("status")(status_cmd)
    app.command("logs")(logs_cmd)
    app.command("restart", cls=ForwardingCommand, context_settings={"allow_extra_args": True})(restart_cmd)


def up_cmd(
    ctx: typer.Context,
    model: str = typer.Option(None, "--model", "-m", help="Model folder or Hugging Face repo id."),
    name: str = typer.Option(None, "--name", "-n", help="Server name (default: 'default')."),
    port: int = typer.Option(
        None, "--port", "-p", min=1, max=65535, help="Port (default: LLMDECK_PORT or 8000)."
    ),
    host_: str = typer.Option(None, "--host", callback=host, help="Bind address (0.0.0.0 to serve the LAN)."),
    engine: str = typer.Option(
        None, "--engine", help="cpu | venv | docker (default: venv with a GPU, else cpu)."
    ),
    python: str = typer.Option(None, "--python", help="venv engine: the Python that has vLLM."),
    served_model_name: str = typer.Option(None, "--served-model-name", help="Name clients send as `model`."),
    image: str = typer.Option(None, "--image", help="docker engine: the image."),
    spec_file: Path = typer.Option(
        None,
        "--spec",
        help="A launch spec JSON from `llmdeck plan --spec-out`; the options given here override its "
        "fields (--model, --port, ...) and flags after `--` are added to its vLLM flags.",
    ),
    attach: bool = typer.Option(
        False,
        "--attach",
        help="Stay in the foreground, streaming the log; Ctrl-C stops, and the server ends with this "
        "command however it ends (killed too).",
    ),
    timeout: float = ready_timeout(None, READY_DEFAULT),
    force: bool = typer.Option(False, "--force", help="Start even when preflight finds problems."),
    warmup: bool = typer.Option(False, "--warmup/--no-warmup", help="Send warmup requests once ready."),
    ray_cluster: bool = typer.Option(False, "--ray-cluster", help="On `llmdeck cluster up`'s Ray cluster."),
    watchdog: bool = typer.Option(
        True,
        "--watchdog/--no-watchdog",
        help="Stop the engine if the box starts to thrash while it starts.",
    ),
    watchdog_floor_gib: float = typer.Option(
        None,
        "--watchdog-floor-gib",
        callback=number(at_least=0),
        help="MemAvailable floor for the watchdog (LLMDECK_WATCHDOG_FLOOR_GIB).",
    ),
    reserve: float = typer.Option(
        None, "--unified-reserve-gib", callback=number(at_least=0), help=RESERVE_HELP
    ),
    by_bytes: bool = typer.Option(True, "--size-by-bytes/--no-size-by-bytes", help=BY_BYTES_HELP),
    as_json: bool = JSON_OPTION,
) -> None:
    overrides = {"model": model, "name": name, "port": port, "host": host_, "engine": engine}
    overrides |= {"python": python, "served_model_name": served_model_name, "image": image}
    opts = {"force": force, "timeout_s": timeout, "warmup": warmup, "watchdog": watchdog}
    opts |= {"reserve_gib": reserve, "size_by_bytes": by_bytes}
    overrides["ray_cluster"] = ray_cluster
    _up(ctx, overrides, spec_file, attach, as_json, {**opts, "watchdog_floor_gib": watchdog_floor_gib})


def down_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(None, help="Server name (optional when only one runs)."),
    all_: bool = typer.Option(False, "--all", help="Stop every llmdeck server."),
    drain: float = drain_timeout(20.0, " (0: stop them now; with --all, all of them together)"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Stop a server: let its requests finish, SIGTERM, then SIGKILL after a grace period. Its log stays.

    The requests the server is running are waited for (--drain, 20 s at most): vLLM's own stop cuts
    them mid-answer, then holds their connections till the 20 s grace kills it. A server started with
    vLLM's own drain (`-- --shutdown-timeout N`, vLLM 0.22+) gets N s and 20 s more before the kill.

    Examples:

      llmdeck down demo

      llmdeck down demo --drain 0        # now: what runs is cut

      llmdeck down --all --json
    """
    from llmdeck.runtime.service import down, down_all

    settings = get_settings(ctx)
    if all_:
        _warn_unreadable(settings)
        results = down_all(settings, render_draining, drain_s=drain)
    else:
        results = {(n := _pick_name(settings, name)): down(n, settings, render_draining, drain_s=drain)}
    if as_json:
        print_json(results)
    elif not results:
        err_console().print("No llmdeck servers are recorded: nothing to stop.", markup=False)
    else:
        for n, outcome in results.items():
            out_console().print(f"{n}: {outcome}", markup=False)


def status_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(None, help="Only this server (a name, or the URL of any server)."),
    timeout: float = request_timeout(10.0, detail=" (with a URL)"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Every llmdeck server (state, model, URL, uptime, live queue/KV) and the gateway's models on demand.

    Given a URL instead of a name: the state of any OpenAI-compatible server there (exit 1 when it
    is not ready: unreachable, not answering, needs an API key, not OpenAI-compatible).

    --json: the list of servers; while a gateway runs models on demand (and no name is given), an
    object {"servers": <that list>, "gateway": {url, state, budget, models}} instead; for a URL, one
    object {base_url, state, detail, models, ...}.

    Examples:

      llmdeck status

      llmdeck status demo --json

      llmdeck status --json | jq 'if type == "object" then .gateway.models else [] end'

      llmdeck status http://127.0.0.1:8000
    """
    from llmdeck.runtime.service import status

    settings = get_settings(ctx)
    from llmdeck.runtime.target import looks_like_url

    if name and looks_like_url(name):
        from llmdeck.cli.status_url import status_of_url

        status_of_url(name, settings, as_json, timeout)
        return
    statuses = status(settings, name)
    if not name:
        _warn_unreadable(settings)
    from llmdeck.cli.gateway import gateway_models_or_warn, print_gateway_models  # its models on demand
    from llmdeck.cli.status_url import print_records

    if as_json:  # the list as before; an object {servers, gateway} only while a gateway has models
        gateway = None if name else gateway_models_or_warn(settings)
        print_json(statuses if gateway is None else {"servers": statuses, "gateway": gateway})
        return
    print_records(statuses, False)
    gateway = gateway_models_or_warn(settings)
    if not print_gateway_models(gateway) and not statuses:
        err_console().print("No llmdeck servers. Start one with `llmdeck up --model DIR`.")
    print_pool(settings, None if name else gateway)


def logs_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(None, help="Server name (optional when only one runs)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
    lines: int = typer.Option(50, "--lines", "-n", min=1, help="How many lines of the tail."),
) -> None:
    """Print a server's log (it survives crashes and `down`).

    A local server's log is kept under 64 MiB while it runs: the older part moves to NAME.log.1,
    then .2 and .3, in the logs folder (an earlier start's log moves there too). A running
    container's log is docker's (`docker logs --tail N`, -f follows `docker logs -f`); `down` saves
    it whole to the same file, kept under 64 MiB, before the container is removed.

    Examples:

      llmdeck logs demo -n 200

      llmdeck logs -f            # follow the only running server until it exits
    """
    from llmdeck.errors import LlmdeckError, NotRunningError
    from llmdeck.runtime.engine_state import engine_tail
    from llmdeck.runtime.state import StateStore
    from llmdeck.util.names import validate_server_name

    settings = get_settings(ctx)
    store = StateStore(settings.servers_dir)
    record = None
    log_path = settings.logs_dir / f"{name}.log"
    if name and not store.path(validate_server_name(name)).exists():
        if not log_path.exists():
            raise NotRunningError(f"No server or log named {name!r}.", hint="See `llmdeck status`.")
    else:
        try:
            record = store.load(_pick_name(settings, name))
            log_path = record.log_path
        except LlmdeckError as exc:  # a broken record: its log still tells what happened
            if not (name and log_path.is_file()):
                raise
            err_console().print(f"{exc.message} Showing {log_path}.", markup=False, highlight=False)
    if record is not None and (text := engine_tail(record, lines)) is not None:
        sys.stdout.write(log_text(text if text.endswith("\n") or not text else text + "\n"))
        sys.stdout.flush()
    else:
        print_tail(log_path, lines)
    if follow:
        follow_tail(log_path, record)


def restart_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(None, help="Server name (optional when only one runs)."),
    timeout: float = ready_timeout(None, READY_DEFAULT),
    force: bool = typer.Option(False, "--force", help="Start even when preflight finds problems."),
    unload_ollama: bool = typer.Option(
        False, "--unload-ollama", help="Unload the models Ollama keeps loaded before starting."
    ),
    drain: float = drain_timeout(60.0, " (0: stop them now)"),
    as_json: bool = JSON_OPTION,
) -> None:
    """The safe restart: let its requests finish, stop, wait for memory to come back, check tenants,
    start, follow to ready.

    vLLM flags after `--` replace the same flags of the recorded start (the others stay as they
    were); they are checked before the server is stopped. The requests it is running are waited for
    (--drain, 60 s at most); a gateway in front holds the ones that come later for the new start.

    Examples:

      llmdeck restart demo

      llmdeck restart demo -- --max-model-len 32768

      llmdeck restart demo --ready-timeout 1800 --json
    """
    from llmdeck.runtime.service import RestartOptions, restart

    settings = get_settings(ctx)
    base = _up_options(settings, force=force, timeout_s=timeout)
    options = RestartOptions(
        **base.model_dump(exclude={"watchdog"}),
        watchdog=base.watchdog,
        unload_ollama=unload_ollama,
        drain_s=drain,
    )
    new = restart(_pick_name(settings, name), settings, options, events=render_event, changes=list(ctx.args))
    say_ready(
        new, f"[green]ready[/] {esc(new.name)} at {esc(new.base_url)}/v1 ({where(new)})", as_json=as_json
    )


def _up(
    ctx: typer.Context,
    overrides: dict[str, Any],
    spec_file: Path | None,
    attach: bool,
    as_json: bool,
    opts: dict[str, Any],
) -> None:
    """The body of `llmdeck up`: check the engine, build the spec, start, print the record."""
    from llmdeck.engines import names as engine_names
    from llmdeck.errors import UsageError

    settings = get_settings(ctx)
    engine = overrides["engine"]
    if engine is not None and engine not in engine_names():
        raise UsageError(f"Unknown engine {engine!r}.", hint="Use --engine cpu, venv or docker.")
    on_ray = overrides.pop("ray_cluster", False)
    spec = _build_spec(spec_file=spec_file, overrides=overrides, extra=list(ctx.args), settings=settings)
    if on_ray:
        from llmdeck.cluster.launch import on_cluster

        spec = on_cluster(spec, settings.state_dir)
    options = _up_options(settings, **opts)
    record = _run_up(spec, settings, options, attach=attach)
    if record is None:
        return
    line = (
        f"[green]ready[/] {esc(record.name)}: {esc(record.served_model_name)} at {esc(record.base_url)}/v1 "
        f"({where(record)}, log {esc(record.log_path)})"
    )
    say_ready(record, line, as_json=as_json)


def _write_err(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _run_up(spec: LaunchSpec, settings: Settings, options: Any, *, attach: bool) -> ServerRecord | None:
    """Up through the runtime service; --attach streams the log (or runs docker) in the foreground."""
    from llmdeck.engines import get as get_engine
    from llmdeck.runtime import attach as attached
    from llmdeck.runtime import service

    if attach and get_engine(spec.engine).containerized:
        tty = sys.stdin is not None and sys.stdin.isatty()  # stdin closed (`<&-`): None, no terminal
        attached.docker(spec, settings, options, tty=tty, events=render_event)
        return None
    if attach:
        clock = service.EventClock(render_event)
        leashed = options.model_copy(update={"leashed": True})  # killed outright, it leaves no server
        record = service.start(spec, settings, leashed, clock)
        attached.follow(record, settings, _write_err)
        return None
    return service.up(spec, settings, options, events=render_event)
