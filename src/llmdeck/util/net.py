"""Small network helpers: free ports, port checks, URL normalisation."""

from __future__ import annotations

import socket
from urllib.parse import urlparse

from llmdeck.errors import UsageError


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def validate_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise UsageError(f"Port {port} is out of range.", hint="Use a port between 1 and 65535, e.g. 8000.")
    return port


def normalize_base_url(url: str) -> str:
    """``http://host:8000/v1/`` or ``host:8000`` -> ``http://host:8000`` (no trailing /v1)."""
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw
    parsed = urlparse(raw)
    if parsed.scheme not in {"http", "https"} or not parsed.hostname:
        raise UsageError(
            f"{url!r} is not a server URL.",
            hint="Give a URL like http://127.0.0.1:8000 (with or without /v1), or a server name from "
            "`llmdeck status`.",
        )
    path = parsed.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    netloc = parsed.netloc
    return f"{parsed.scheme}://{netloc}{path}"
