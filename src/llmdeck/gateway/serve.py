"""Run the gateway in this process: ``python -m llmdeck.gateway.serve --config FILE --host H --port P``.

``llmdeck gateway up`` starts this in the background with its output in the gateway's log (``--log``:
rotated past a size, logcap.py); ``--attach`` runs it in the foreground. uvicorn serves the Starlette
app; its own access log is off (the gateway logs each request itself, without prompts or keys).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from llmdeck.errors import InternalError, LlmdeckError, OperationError


class UTCFormatter(logging.Formatter):
    """Times in UTC, labelled (``2026-12-06T05:52:51.204Z``): the log's header line (written by llmdeck
    in UTC) and every line after it had been in two clocks, the lines in the machine's local time
    with no zone, so under TZ=Asia/Shanghai a request seemed to come 8 hours after the start."""

    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def converter(self, secs: float | None = None) -> time.struct_time:
        return time.gmtime(secs)


def setup_logging(log: Path | None = None) -> None:
    """INFO and up to stdout; with ``log`` (stdout is that file: `gateway up`) rotated past a size."""
    from llmdeck.gateway.logcap import CappedLog

    handler = logging.StreamHandler(sys.stdout) if log is None else CappedLog(log)
    handler.setFormatter(UTCFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    # httpx logs every request at INFO (the readiness polls of the models the gateway starts): the
    # gateway's own access log says what matters
    logging.getLogger("httpx").setLevel(logging.WARNING)


# What the gateway may import while it serves (its routes start models on demand, probe, relay): read
# at its start, so that `pip install -U llmdeck` under a running gateway cannot mix two versions in one
# process (an on-demand start had failed on every request with an ImportError until a restart).
PRELOAD = ("gateway", "runtime", "engines", "plan", "client", "util", "formats", "catalog", "model")


def preload() -> None:
    """Import every module of the packages the gateway serves from (each a few ms; ~1 s in all)."""
    import importlib
    import pkgutil

    for package in PRELOAD:
        root = importlib.import_module(f"llmdeck.{package}")
        for info in pkgutil.walk_packages(root.__path__, prefix=f"llmdeck.{package}."):
            importlib.import_module(info.name)


def run(config: Path, host: str, port: int, *, insecure: bool, log_file: Path | None = None) -> None:
    """Load the config, enforce the bind policy, serve until SIGTERM/Ctrl-C."""
    import uvicorn

    from llmdeck.gateway.app import build_app
    from llmdeck.gateway.config import load_config
    from llmdeck.gateway.keys import KeyRing, KeyStore
    from llmdeck.gateway.service import check_bind
    from llmdeck.settings import Settings

    setup_logging(log_file)
    preload()
    log = logging.getLogger("llmdeck.gateway")
    settings = Settings()
    loaded = load_config(config, settings)
    keys_on = KeyRing(KeyStore(loaded.keys_file)).enabled
    check_bind(host, keys_on=keys_on, insecure=insecure)
    if insecure and not keys_on:
        log.warning(
            "INSECURE: serving %s:%s without API keys (--insecure); anyone who can reach it may use it",
            host,
            port,
        )
    log.info(
        "llmdeck gateway on http://%s:%s; routes: %s; keys: %s",
        host,
        port,
        ", ".join(r.alias for r in loaded.routes),
        f"required ({loaded.keys_file})" if keys_on else "off",
    )
    app = build_app(loaded, insecure=insecure and not keys_on, settings=settings)
    from llmdeck.gateway.headtimeout import head_timeout_protocol

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            # a connection that never sends a whole head is closed, and one whose client leaves the
            # reply unread for the idle timeout (a stopped process: its socket never times out)
            http=head_timeout_protocol(stall_s=loaded.config.timeouts.idle_s),
            host=host,
            port=port,
            access_log=False,
            log_config=None,
            timeout_graceful_shutdown=5,
            timeout_keep_alive=30,
        )
    )
    # Not uvicorn.run: after a graceful shutdown uvicorn raises the Ctrl-C or SIGTERM again, and
    # uvicorn.run swallowed it, so `gateway up --attach` had exited 0 however it was stopped (now the
    # CLI's 130 / 143); and a port it could not bind was its own exit 3.
    server.run()
    if not server.started:
        raise OperationError(
            f"The gateway did not start on {host}:{port} (see the lines above).",
            hint="Check that the port is free (`llmdeck gateway status`, `ss -ltnp`), then run again.",
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m llmdeck.gateway.serve")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4000)
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--log", type=Path, default=None, help="the file stdout is (rotated past a size)")
    args = parser.parse_args(argv)
    try:
        run(args.config, args.host, args.port, insecure=args.insecure, log_file=args.log)
    except LlmdeckError as exc:
        if isinstance(exc, InternalError):  # meant for a caller inside llmdeck: a bug, with its traceback
            raise
        sys.stderr.write(f"error: {exc.render()}\n")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # a Ctrl-C uvicorn raises again once it has shut down: no traceback
        sys.exit(130)


if __name__ == "__main__":
    main()
