"""Small network helpers: free ports, port checks, URL normalisation."""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlparse

from llmdeck.errors import UsageError


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and we could bind it (IPv4 or IPv6 host)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
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


_HOST_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"^{_HOST_LABEL}(\.{_HOST_LABEL})*\.?$")
HOST_ACCEPTED = "an IP address (127.0.0.1, 0.0.0.0, ::1) or a host name (localhost, gpu-box.lan)"


def is_valid_host(host: str) -> bool:
    """True for an IPv4/IPv6 address or an RFC 1123 host name (no spaces, no scheme, no port)."""
    if not host or len(host) > 253:
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return bool(_HOSTNAME.match(host))
    return True


def validate_host(host: str, what: str = "--host") -> str:
    """The host unchanged, or a UsageError naming ``what`` (a flag or a setting)."""
    if not is_valid_host(host):
        raise UsageError(
            f"{what} {host!r} is not a host.",
            hint=f"Use {HOST_ACCEPTED}, without a scheme or port.",
        )
    return host


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
