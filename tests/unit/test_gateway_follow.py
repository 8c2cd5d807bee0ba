"""A `server:` backend follows its llmdeck server's record (gateway/follow.py): `restart NAME -- --api-key
NEW` (or `--port`) had left a running gateway sending the old key, every request and probe a 401, until the
gateway itself restarted. A tiny fake upstream (named so: FakeKeyedModels) asks for one bearer key."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from http_fakes import JsonHandler
from llmdeck.engines.spec import LaunchSpec
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.routing import Router
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.settings import Settings


class FakeKeyedModels(JsonHandler):
    """A fake vLLM /v1/models that asks for the key the test sets on the server."""

    def do_GET(self) -> None:
        want = f"Bearer {self.server.key}"  # type: ignore[attr-defined]
        if self.headers.get("Authorization") != want:
            self._json(401, {"error": "Unauthorized"})
            return
        entry = {"id": self.server.model, "max_model_len": 4096, "root": getattr(self.server, "root", None)}  # type: ignore[attr-defined]
        self._json(200, {"data": [entry]})


@pytest.fixture()
def upstreams() -> Iterator[list[ThreadingHTTPServer]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), FakeKeyedModels) for _ in range(2)]
    for server in servers:
        server.key, server.model = "sk-old", "coder"  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield servers
    for server in servers:
        server.shutdown()
        server.server_close()


def _record(store: StateStore, tmp_path: Path, port: int, key: str, served: str = "coder") -> None:
    spec = LaunchSpec(name="coder", engine="cpu", model=str(tmp_path), port=port, served_model_name=served)
    store.save(ServerRecord(name="coder", spec=spec, argv=["x"], pid=None, log_path=tmp_path / "c.log"))
    store.save_secrets("coder", {"VLLM_API_KEY": key})


def _probe(router: Router) -> None:
    async def go() -> None:
        async with httpx.AsyncClient() as client:
            await router.probe_all(client, 5.0)

    asyncio.run(go())


def test_a_restart_with_a_new_key_port_and_name_is_followed(
    tmp_path: Path, upstreams: list[ThreadingHTTPServer]
) -> None:
    old, new = upstreams
    settings = Settings(state_dir=tmp_path / "state")
    store = StateStore(settings.servers_dir)
    _record(store, tmp_path, old.server_address[1], "sk-old")
    text = "routes:\n  - model: a\n    backends:\n      - server: coder\n"
    router = Router(parse_config(text, source=tmp_path / "gateway.yaml", settings=settings))
    (state,) = router.backends.values()
    _probe(router)
    assert state.healthy and state.checked_at is not None
    # `llmdeck restart coder -- --api-key sk-new --port P2 --served-model-name coder2`
    new.key, new.model = "sk-new", "coder2"  # type: ignore[attr-defined]
    _record(store, tmp_path, new.server_address[1], "sk-new", served="coder2")
    old.key = "sk-gone"  # type: ignore[attr-defined]
    _probe(router)
    assert state.healthy, state.last_error
    assert state.url.endswith(f":{new.server_address[1]}")
    assert state.backend.api_key == "sk-new" and state.model_name() == "coder2"


def test_what_the_config_pinned_stays(
    tmp_path: Path, upstreams: list[ThreadingHTTPServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`model:` and `api_key_env` in the YAML are the user's word: a record's change does not undo them;
    a record that is gone leaves the backend as it was (the probe says whether it answers)."""
    up = upstreams[0]
    settings = Settings(state_dir=tmp_path / "state")
    store = StateStore(settings.servers_dir)
    _record(store, tmp_path, up.server_address[1], "sk-old")
    monkeypatch.setenv("CODER_KEY", "sk-old")
    text = (
        "routes:\n  - model: a\n    backends:\n"
        "      - server: coder\n        model: pinned\n        api_key_env: CODER_KEY\n"
    )
    router = Router(parse_config(text, source=tmp_path / "gateway.yaml", settings=settings))
    (state,) = router.backends.values()
    _record(store, tmp_path, up.server_address[1], "sk-new", served="other")
    _probe(router)
    assert state.healthy and state.backend.api_key == "sk-old" and state.model_name() == "pinned"
    store.remove("coder")
    _probe(router)
    assert state.healthy and state.backend.api_key == "sk-old"


def test_a_server_started_again_is_learnt_again(tmp_path: Path, upstreams: list[ThreadingHTTPServer]) -> None:
    """What the gateway learnt of a server (that it counts the output cap against the prompt's room, its
    context) is forgotten when the record says it was started again (another pid and start) or its
    /v1/models entry changed: before, a vLLM 0.31 restarted as 0.32 stayed marked till the gateway
    restarted. A probe that finds the same server keeps it."""
    (up, _) = upstreams
    settings = Settings(state_dir=tmp_path / "state")
    store = StateStore(settings.servers_dir)
    _record(store, tmp_path, up.server_address[1], "sk-old")
    text = "routes:\n  - model: a\n    backends:\n      - server: coder\n"
    router = Router(parse_config(text, source=tmp_path / "gateway.yaml", settings=settings))
    (state,) = router.backends.values()
    _probe(router)
    state.reserves_cap = True
    _probe(router)
    assert state.reserves_cap and state.max_model_len == 4096  # the same server
    _record(store, tmp_path, up.server_address[1], "sk-old")  # `llmdeck restart coder`: a new start
    _probe(router)
    assert not state.reserves_cap
    state.reserves_cap = True
    up.model = "coder"  # type: ignore[attr-defined]
    up.root = "/models/other"  # type: ignore[attr-defined]
    _probe(router)
    assert not state.reserves_cap
