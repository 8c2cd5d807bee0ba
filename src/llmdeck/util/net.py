"""Small network helpers: free ports, port checks, URL normalisation."""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

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


def bind_problem(port: int, host: str = "127.0.0.1") -> str | None:
    """Why ``host:port`` cannot be bound, or None when it can: "in use", "no such host" (the name does
    not resolve), "not this machine's address", "not allowed" (a port below 1024 without root)."""
    import errno

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return "no such host"
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr)
        except OSError as exc:
            return {
                errno.EADDRNOTAVAIL: "not this machine's address",
                errno.EACCES: "not allowed",
            }.get(exc.errno or 0, "in use")
    return None


def bind_hint(host: str, problem: str) -> str:
    """The fix for :func:`bind_problem`'s answer other than "in use"."""
    if problem == "not allowed":
        return "Ports below 1024 need root: choose one above 1023 with --port."
    return (
        f"{host!r} is not an address of this machine: bind 127.0.0.1 (this machine only), 0.0.0.0 (every "
        "interface), or one of its own addresses (`ip -brief addr`) with --host or LLMDECK_HOST."
    )


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
        ipaddress.ip_address(bare_host(host))
    except ValueError:
        # a name's last label is never all digits (RFC 3696 2): 999.1.1.1 is a bad address, not a name
        return bool(_HOSTNAME.match(host)) and not host.rstrip(".").rsplit(".", 1)[-1].isdigit()
    return True


def bare_host(host: str) -> str:
    """``[::1]`` (an IPv6 address as a URL writes it) as the address alone, ``::1``: a server binds that,
    and ``local_url`` adds the brackets back. Anything else unchanged."""
    if host.startswith("[") and host.endswith("]") and ":" in host:
        return host[1:-1]
    return host


def validate_host(host: str, what: str = "--host") -> str:
    """The host (an IPv6 address without its URL brackets), or a UsageError naming ``what``."""
    if not is_valid_host(host):
        raise UsageError(
            f"{what} {host!r} is not a host.",
            hint=f"Use {HOST_ACCEPTED}, without a scheme or port.",
        )
    return bare_host(host)


def validate_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise UsageError(f"Port {port} is out of range.", hint="Use a port between 1 and 65535, e.g. 8000.")
    return port


def _url_problem(raw: str) -> str:
    """What makes ``raw`` unusable as an http(s) URL, or ``""``."""
    try:
        parts = urlsplit(raw)
    except ValueError:  # "Invalid IPv6 URL": an unclosed [
        return "its [IPv6] host has no closing bracket"
    if parts.scheme not in {"http", "https"}:
        return f"it must start with http:// or https:// (not {parts.scheme or 'nothing'}://)"
    host = parts.hostname or ""
    if not host:
        return "it names no host"
    if not is_valid_host(host.replace("_", "-")):  # "_" is fine in a URL (Docker service names)
        return f"{host!r} is not {HOST_ACCEPTED}"
    try:
        port = parts.port
    except ValueError:
        port_text = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
        if port_text.isdigit():
            return f"the port {port_text} is not between 1 and 65535"
        return f"the port {port_text!r} is not a number between 1 and 65535"
    if port is not None and not 1 <= port <= 65535:
        return f"the port {port} is not between 1 and 65535"
    if any(ch.isspace() or not ch.isprintable() for ch in parts.path):  # "/v1 ; rm -rf ~" had been taken
        return "its path holds a space or a control character (a URL writes a space as %20)"
    return ""


def parse_http_url(url: str, *, what: str = "The URL", example: str = "http://127.0.0.1:8000") -> str:
    """The one parser of user-given http(s) URLs: ``scheme://netloc/path`` (no query, no trailing
    ``/``; ``http://`` added when there is no scheme), or a UsageError (exit 2) that says what is wrong
    with it (an unclosed ``[``, a port that is no number or out of range, a host with a space, ...)."""
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw
    problem = _url_problem(raw)
    if problem:
        from llmdeck.util.redact import redact_url

        shown = "".join(ch if ch.isprintable() else "?" for ch in redact_url(url.strip()))[:200]
        raise UsageError(
            f"{what} {shown!r} is not a usable http(s) URL: {problem}.",
            hint=f"Give a URL like {example}.",
        )
    parts = urlsplit(raw)
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def normalize_base_url(url: str) -> str:
    """``http://host:8000/v1/`` or ``host:8000`` -> ``http://host:8000`` (no trailing /v1); a UsageError
    (exit 2) for a URL that is not one."""
    out = parse_http_url(
        url,
        what="The server URL",
        example="http://127.0.0.1:8000 (with or without /v1), or a server name from `llmdeck status`",
    )
    return out[: -len("/v1")] if out.endswith("/v1") else out


def tls_problem(exc: BaseException) -> str | None:
    """A TLS handshake that met plain HTTP or an untrusted certificate, in words (the stdlib's
    "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)" tells a user nothing); None
    for any other failure."""
    text = str(exc)
    if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text or "HTTP_REQUEST" in text:
        return "the URL says https but the server answers plain HTTP: use http://"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "its TLS certificate is not trusted here: use a certificate this machine trusts, or http://"
    return None


def connect_failure(exc: BaseException) -> str:
    """Why a connection failed, in words: :func:`tls_problem`, else the exception's own text."""
    return tls_problem(exc) or str(exc)


def local_url(host: str, port: int) -> str:
    """The URL a client on this machine reaches a server bound to ``host``:``port`` at: a wildcard
    (0.0.0.0, ::) as 127.0.0.1, an IPv6 address in brackets (``::1`` had made ``http://::1:8026``)."""
    host = "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
