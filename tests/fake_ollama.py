"""A FAKE Ollama for unit tests: Ollama's ``/api/*`` shapes only, from its documented answers.

It serves the example responses of Ollama's docs (``tests/fixtures/ollama``, README there): ``GET
/api/tags``, ``GET /api/ps``, ``POST /api/show`` and ``POST /api/generate`` with ``keep_alive: 0``
(an unload: the model leaves ``/api/ps``; recorded in ``unloaded``). A model in the tags without a
captured ``/api/show`` answer gets the fields ``ShowResponse`` always has (``api/types.go``:
``details`` and ``model_info``), its details those of the tags; a model not in the tags gets
Ollama's 404 ``{"error": "model 'x' not found"}``. No inference: this is not an engine.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from http_fakes import JsonHandler
from repo_paths import TEST_FIXTURES

FIXTURES = TEST_FIXTURES / "ollama"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text("utf-8"))


def documented_box() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(tags, ps, shows by name) from the documented answers, as one Ollama would hold them: the
    tags of api.md and openapi.yaml, plus the running models of both ps examples (a loaded model is
    a local one: its ps entry's name, digest, size and details are those of its tags entry)."""
    tags = fixture("api_tags.docs.json")["models"] + fixture("api_tags.openapi.json")["models"]
    ps = fixture("api_ps.docs.json")["models"] + fixture("api_ps.openapi.json")["models"]
    names = {m["name"] for m in tags}
    for m in ps:
        if m["name"] not in names:
            keys = ("name", "model", "size", "digest", "details")
            tags.append({k: copy.deepcopy(m[k]) for k in keys})
    llava = fixture("api_show.llava.docs.json")
    tags.append({"name": "llava:latest", "model": "llava:latest", "details": copy.deepcopy(llava["details"])})
    shows = {"llava:latest": llava, "gemma4": fixture("api_show.gemma4.openapi.json")}
    return {"models": tags}, {"models": ps}, shows


@dataclass
class FakeOllama:
    """The FAKE's state; ``raw`` (path -> bytes) answers a path with a garbled body instead."""

    tags: dict[str, Any]
    ps: dict[str, Any]
    shows: dict[str, Any]
    raw: dict[str, bytes] = field(default_factory=dict)
    unloaded: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    show_delay_s: float = 0.0  # /api/show answers this late (an Ollama stuck loading)

    def show(self, name: str) -> tuple[int, Any]:
        if name in self.shows:
            return 200, self.shows[name]
        entry = next((m for m in self.tags["models"] if m["name"] == name), None)
        if entry is None:
            return 404, {"error": f"model '{name}' not found"}
        return 200, {"details": entry.get("details", {}), "model_info": {}}


def _handler(state: FakeOllama) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def _raw(self) -> bool:
            body = state.raw.get(self.path)
            if body is None:
                return False
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return True

        def do_GET(self) -> None:
            state.requests.append(f"GET {self.path}")
            if self._raw():
                return
            if self.path == "/api/tags":
                self._json(200, state.tags)
            elif self.path == "/api/ps":
                self._json(200, state.ps)
            elif self.path == "/api/version":
                self._json(200, {"version": "0.0.0-fake"})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            state.requests.append(f"POST {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self._raw():
                return
            name = str(body.get("model") or body.get("name") or "")
            if self.path == "/api/show":
                time.sleep(state.show_delay_s)
                self._json(*state.show(name))
            elif self.path == "/api/generate" and body.get("keep_alive") in (0, "0", "0s"):
                state.unloaded.append(name)
                state.ps["models"] = [m for m in state.ps["models"] if m["name"] != name]
                self._json(200, {"model": name, "response": "", "done": True, "done_reason": "unload"})
            else:
                self._json(404, {"error": "not found"})

    return Handler


@contextlib.contextmanager
def running(state: FakeOllama | None = None) -> Iterator[tuple[str, FakeOllama]]:
    """Serve the FAKE on 127.0.0.1 (a free port); yields (base URL, state)."""
    if state is None:
        state = FakeOllama(*documented_box())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
