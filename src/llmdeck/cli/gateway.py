"""CLI group: gateway — one OpenAI-compatible endpoint for the box (up, down, status)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json

GATEWAY_HELP = """One OpenAI-compatible endpoint in front of the box's servers: aliases, API keys, per-model
defaults, replicas, metrics; and models started on demand within a memory budget (launch specs). It also
speaks Anthropic's Messages, OpenAI's Responses and Ollama's own API (/api/chat, /api/generate, /api/tags).

Examples:

  llmdeck gateway up --config gateway.yaml             # 127.0.0.1:4000, in the background

  llmdeck gateway up --config gateway.yaml --host 0.0.0.0   # the LAN: needs keys (or --insecure)

  llmdeck gateway up --config gateway.yaml --port 11434     # where Ollama's clients look by default

  llmdeck gateway status --json                      # also: each model on demand, its memory, queue

  open http://127.0.0.1:4000/ui                      # the live dashboard (JSON: /ui/api/state)

  llmdeck gateway down                               # stops the models it started, too
"""

UP_HELP = """Start the gateway in the background (or --attach) and wait until it answers /health.

The config (YAML) lists routes: an alias, its backends (URLs or llmdeck server names), request fields
filled in where absent (defaults) and replaced (override). A backend named by its server follows it:
while `llmdeck restart NAME` brings it back, its requests wait for it (timeouts.restart_wait_s, 900 s),
and with a new key, port or served name the gateway uses them from its next health probe. Without a
keys file the gateway is open and binds 127.0.0.1; a non-loopback --host without keys is refused unless
--insecure.

Example config:

  routes:
    - model: qwen-fast
      backends: \\[coder, http://127.0.0.1:8001]
      defaults:
        chat_template_kwargs: {enable_thinking: false}
        max_tokens: 2048
  limits:
    alice: {rpm: 30, models: \\[qwen-fast]}

A backend may name a launch spec instead (`llmdeck plan MODEL --spec-out FILE`): the gateway starts it
on the first request (requests wait in a bounded queue) and stops idle ones, least recently used first,
to keep every model within the memory budget:

  routes:
    - model: coder
      backends: \\[{spec: coder.json, ttl_s: 600}]
    - model: chat
      backends: \\[{spec: chat.json, keep: true}]
  budget: {memory_gib: auto, reserve_gib: 4, allow_unload_ollama: false}

The dashboard: http://127.0.0.1:PORT/ui (memory pool, models, live rates and TTFT, evictions,
refusals, start / stop / sleep / wake); from another host it asks for an API key (as the password).

Examples:

  llmdeck gateway up --config gateway.yaml --port 4000

  llmdeck gateway up --config gateway.yaml --attach
"""


def _up(config: Path, host: str, port: int, attach: bool, insecure: bool, settings: Any) -> Any:
    from llmdeck.gateway.config import load_config
    from llmdeck.gateway.keys import KeyRing, KeyStore
    from llmdeck.gateway.service import check_bind, start_background
    from llmdeck.util.net import validate_host

    validate_host(host)  # 'bad host' is a typo, not a network bind to refuse for want of keys
    loaded = load_config(config, settings)  # config errors: exit 2 before anything starts
    keys_on = KeyRing(KeyStore(loaded.keys_file)).enabled
    check_bind(host, keys_on=keys_on, insecure=insecure)
    if insecure and not keys_on:
        err_console().print(f"[bold red]warning:[/] serving {host} with NO API keys (--insecure).")
    if attach:  # the port checked as the background start checks it (uvicorn's own exit was 3)
        from llmdeck.gateway.serve import run
        from llmdeck.gateway.service import check_port

        check_port(host, port)
        run(config, host, port, insecure=insecure)
        return None
    managed = [b.managed.name for r in loaded.routes for b in r.backends if b.managed is not None]
    return start_background(config, host, port, settings, insecure=insecure, managed=managed)


def _print_status(data: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = out_console()
    if data.get("state") == "stopped":
        console.print("gateway: stopped")
        return
    keys = "required" if data.get("keys_required") else "off"
    console.print(
        f"gateway: {data['state']} at {escape(data['url'])} (pid {data.get('pid')}); keys {keys}"
        + ("; [bold red]INSECURE: no keys on a network bind[/]" if data.get("insecure") else "")
        + f"; log {escape(data.get('log', ''))}",
        highlight=False,
    )
    table = Table(title="routes")
    for col in ("model", "requests", "errors", "backend", "healthy", "in flight", "served as"):
        table.add_column(col)
    for route in data.get("routes", []):
        for i, b in enumerate(route["backends"]):
            first = i == 0
            table.add_row(
                escape(route["model"]) if first else "",  # aliases, URLs, names: data, never markup
                str(route["requests"]) if first else "",
                str(route["errors"]) if first else "",
                escape(b["backend"]),
                {True: "yes", False: "NO"}.get(b["healthy"], "unchecked"),  # None: no probe or reply yet
                str(b["outstanding"]),
                escape(b.get("served_model") or "?"),
            )
    if data.get("routes"):
        console.print(table)
    if data.get("models"):
        _print_models(data)


def _gib(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else "-"


def _ago(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "never"
    return f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def _print_models(data: dict[str, Any]) -> None:
    """The models the gateway starts on demand: state, memory (planned / measured), last use, queue."""
    from rich.markup import escape
    from rich.table import Table

    b = data.get("budget") or {}
    size = "auto" if b.get("memory_gib") == "auto" else f"{b.get('memory_gib')} GiB"
    table = Table(
        title=f"models on demand — budget {size} ({b.get('kind')} memory, reserve {b.get('reserve_gib')} GiB;"
        f" held {_gib(b.get('held_gib'))} GiB)"
    )
    for col in ("model", "state", "GiB planned", "measured", "last use", "in flight", "queue"):
        table.add_column(col, no_wrap=True)
    notes = []
    for m in data["models"]:
        table.add_row(
            escape(m["model"]),
            m["state"],
            _gib(m.get("planned_gib")),
            _gib(m.get("measured_gib")),
            _ago(m.get("idle_s")),
            str(m.get("in_flight", 0)),
            str(m.get("queue", 0)),
        )
        settings = [f"{k} {m[k]}" for k in ("ttl_s", "group", "sleep_level") if m.get(k) is not None]
        note = (
            m.get("last_error") or m.get("progress") or ", ".join(["keep"] * bool(m.get("keep")) + settings)
        )
        if note:
            notes.append(f"  {m['model']}: {note}")
    console = out_console()
    console.print(table)
    for line in notes:
        console.print(line, markup=False, highlight=False)


def gateway_models(settings: Any) -> dict[str, Any] | None:
    """The running gateway's models on demand (url, budget, models), or None when it has none."""
    from llmdeck.gateway.service import load_record, status

    if load_record(settings) is None:
        return None
    data = status(settings)
    if not data.get("models"):
        return None
    keys = ("state", "url", "pid", "budget", "models")
    return {k: data[k] for k in keys if k in data}


def gateway_models_or_warn(settings: Any) -> dict[str, Any] | None:
    """For `llmdeck status`: :func:`gateway_models`, but a gateway record that cannot be read is a warning
    on stderr (what is wrong, what to do) and no models: it had made `status` exit 2, its servers unshown."""
    from llmdeck.errors import NotRunningError

    try:
        return gateway_models(settings)
    except NotRunningError as exc:
        err_console().print(f"warning: {exc.render()}", markup=False, highlight=False)
        return None


def print_gateway_models(data: dict[str, Any] | None) -> bool:
    """For `llmdeck status`: the running gateway's models on demand (True when there were any)."""
    if data is None:
        return False
    _print_models(data)
    return True


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    gw = typer.Typer(name="gateway", help=GATEWAY_HELP, no_args_is_help=True)

    @gw.command("up", help=UP_HELP)
    def up_cmd(
        ctx: typer.Context,
        config: Path = typer.Option(
            Path("gateway.yaml"), "--config", "-c", help="The gateway config (YAML)."
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="Bind address (0.0.0.0: the LAN; needs keys)."),
        port: int = typer.Option(4000, "--port", "-p", help="Port."),
        attach: bool = typer.Option(False, "--attach", help="Stay in the foreground; Ctrl-C stops."),
        insecure: bool = typer.Option(False, "--insecure", help="Allow a network bind without API keys."),
        as_json: bool = JSON_OPTION,
    ) -> None:
        record = _up(config, host, port, attach, insecure, get_settings(ctx))
        if record is None:
            return
        if as_json:
            print_json(record)
        else:
            out_console().print(
                f"gateway up at {record.base_url}/v1 (pid {record.pid}); dashboard {record.base_url}/ui; "
                f"log {record.log_path}",
                markup=False,
                highlight=False,
            )

    @gw.command("down")
    def down_cmd(ctx: typer.Context) -> None:
        """Stop the gateway (SIGTERM, then SIGKILL after 10 s) and the models it started on demand.

        Example: llmdeck gateway down
        """
        from llmdeck.gateway.service import stop

        outcome = stop(get_settings(ctx))
        out_console().print(f"gateway {outcome}", markup=False)

    @gw.command("status")
    def status_cmd(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
        """Routes, backends' health and load, per-alias counts; models on demand: running / starting /
        sleeping / stopped, memory planned and measured, last use, queue.

        Example: llmdeck gateway status --json
        """
        from llmdeck.gateway.service import status

        data = status(get_settings(ctx))
        if as_json:
            print_json(data)
        else:
            _print_status(data)
        if data.get("state") in {"dead", "unhealthy"}:
            raise typer.Exit(1)

    app.add_typer(gw)
