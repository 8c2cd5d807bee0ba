"""An endpoint that answers, but not as a Hugging Face hub: a router's or proxy's login page, a web
server's index, an API of something else. huggingface_hub would stop on it with a bare
``JSONDecodeError``; here it is one :class:`DownloadError` (exit 1) that says what came back and to
check ``--endpoint`` / ``HF_ENDPOINT``. And any other failure of a download, in words."""

from __future__ import annotations

from llmdeck.errors import DownloadError, LlmdeckError
from llmdeck.fetch.verify import MIRROR_HINT
from llmdeck.util.jsonsafe import loads as json_loads

ENDPOINT_HINT = (
    "Check --endpoint (or HF_ENDPOINT): it should be https://huggingface.co or a mirror of it (a login "
    "page usually means a proxy or captive portal is in the way). "
)


def _start(body: bytes) -> str:
    return " ".join(body.lstrip()[:200].decode("utf-8", errors="replace").split())[:80]


def received(body: bytes) -> str:
    """What a reply's body is, in words, with its start: ``an HTML page ('<html><body>login...')``."""
    start = _start(body)
    if not start:
        return "an empty body"
    low = start.lower()
    kind = "an HTML page" if low.startswith("<") and ("<html" in low or "<!doctype" in low) else "text"
    return f"{kind} ({start!r})"


def not_a_hub(endpoint: str, repo_id: str, what: str) -> DownloadError:
    """The error for an endpoint whose reply about ``repo_id`` is not the hub's JSON."""
    return DownloadError(
        f"{endpoint} did not answer like a Hugging Face hub: asked about {repo_id}, it sent {what} "
        "instead of the hub's JSON.",
        hint=ENDPOINT_HINT + MIRROR_HINT,
    )


def check_hub_reply(endpoint: str, repo_id: str, status: int, body: bytes) -> None:
    """A 200 reply to ``/api/models/REPO/revision/REV`` must be a JSON object (any other status is for
    huggingface_hub to explain: 401 gated, 404 missing ...). DownloadError otherwise."""
    if status != 200:
        return
    try:
        data = json_loads(body)
    except ValueError:  # UnicodeDecodeError, JSONDecodeError, jsonsafe's too-deep/too-long
        raise not_a_hub(endpoint, repo_id, f"HTTP 200 with {received(body)}") from None
    if not isinstance(data, dict):
        raise not_a_hub(endpoint, repo_id, f"HTTP 200 with JSON that is not an object ({_start(body)!r})")


def other_failure(exc: BaseException, repo_id: str, endpoint: str) -> LlmdeckError:
    """A download's failure no other case of map_hub_error names, in words (no Python class name: it
    had read "failed: ReadError: ..."); a full disk says so, not "check the network"."""
    import errno

    from llmdeck.client.httpmap import http_failure_words

    why = http_failure_words(exc).splitlines()[0][:300]
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DownloadError(
            f"Downloading {repo_id} from {endpoint} failed: the disk is full ({why}).",
            hint="Free some disk space (or pass --local-dir on another disk), then run the same command "
            "again: whole files are kept.",
        )
    return DownloadError(
        f"Downloading {repo_id} from {endpoint} failed: {why}.",
        hint="Check the network, then run the same command again: whole files are kept. " + MIRROR_HINT,
    )
