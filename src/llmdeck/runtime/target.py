"""The one way to name a target: what `check`, `connect`, `bench`, `status` and the gateway talk to — a
URL (``http://host:port``, ``host:port``, an IP) or the name of a server llmdeck started."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from llmdeck.errors import UsageError
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.util.net import normalize_base_url

if TYPE_CHECKING:
    from llmdeck.settings import Settings


class Target(BaseModel):
    """An OpenAI-compatible endpoint: where it is, and what llmdeck knows about it."""

    base_url: str
    model: str | None = None
    record: ServerRecord | None = None
    source: str = "url"  # "url", "name", "only-server" or "default"

    @property
    def api_base(self) -> str:
        """The base URL with ``/v1``, as OpenAI clients want it."""
        return self.base_url + "/v1"


def looks_like_url(text: str) -> bool:
    """True for a URL or host:port; server names (``^[A-Za-z0-9][A-Za-z0-9._-]*$``) never look like one."""
    if "://" in text or text.startswith(("localhost", "[")):
        return True
    head = text.split("/", 1)[0]
    if ":" in head:  # host:port
        return True
    parts = head.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)


def resolve_target(target: str | None, settings: Settings) -> Target:
    """A URL (normalised), a server NAME from the state dir, or nothing.

    Nothing means: the only server llmdeck knows about, else ``http://<settings.host>:<settings.port>``.
    Raises :class:`UsageError` (exit 2) for a malformed URL or an unknown name.
    """
    store = StateStore(settings.servers_dir)
    if target is None or not target.strip():
        records = store.list()
        if len(records) == 1:
            rec = records[0]
            return Target(
                base_url=rec.base_url, model=rec.served_model_name, record=rec, source="only-server"
            )
        from llmdeck.util.net import local_url

        return Target(base_url=normalize_base_url(local_url(settings.host, settings.port)), source="default")
    text = target.strip()
    if looks_like_url(text):
        return Target(base_url=normalize_base_url(text), source="url")
    if store.path(text).exists():
        rec = store.load(text)
        return Target(base_url=rec.base_url, model=rec.served_model_name, record=rec, source="name")
    known = ", ".join(r.name for r in store.list()) or "none"
    raise UsageError(
        f"{text!r} is neither a server URL nor the name of a server llmdeck started (known: {known}).",
        hint="Give a URL such as http://127.0.0.1:8000, or a name from `llmdeck status`.",
    )
