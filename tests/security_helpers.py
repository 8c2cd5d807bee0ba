"""Helpers of the security tests: a hostile fake OpenAI server, a fake engine, the CLI as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from http_fakes import JsonHandler
from repo_paths import ROOT

HOSTILE_ID = "x$(touch PWNED);y"  # the example
HOSTILE_IDS = (HOSTILE_ID, "a`touch PWNED2`b", "q'$(touch PWNED)'\"$HOME\"; touch PWNED2 #")
SECRET = "sk-TOPSECRET-4242"


class FakeHostileModelsServer(JsonHandler):
    """fake_hostile_models_server: an OpenAI-ish server whose model id is shell code (``model_id``);
    with ``key`` set, /v1/* answers 401 without it (like `vllm serve --api-key`)."""

    model_id = HOSTILE_ID
    key: str | None = None

    def _authorized(self) -> bool:
        return self.key is None or self.headers.get("Authorization") == f"Bearer {self.key}"

    def do_GET(self) -> None:
        if self.path == "/health":
            self._json(200, {})
        elif not self._authorized():
            self._json(401, {"error": "Unauthorized"})
        elif self.path == "/v1/models":
            model = {
                "id": self.model_id,
                "object": "model",
                "root": "/m",
                "max_model_len": 32768,
            }  # room for every recorded client
            self._json(200, {"object": "list", "data": [model]})
        elif self.path == "/version":
            self._json(200, {"version": "fake-hostile-1"})
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self._authorized():
            self._json(401, {"error": "Unauthorized"})
            return
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
            usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
            self.wfile.write(
                f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode()
            )
            self.wfile.flush()
            self.close_connection = True
            return
        msg = {"role": "assistant", "content": "hi", "tool_calls": []}
        self._json(200, {"choices": [{"index": 0, "message": msg, "finish_reason": "stop"}], "usage": {}})


def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["LLMDECK_STATE_DIR"] = str(tmp / "state")
    env["LLMDECK_CACHE_DIR"] = str(tmp / "cache")
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("LLMDECK_DEBUG", None)
    env.pop("LLMDECK_API_KEY", None)
    env.update(extra)
    return env


def llmdeck_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "llmdeck", *args]


def run_llmdeck(tmp: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        llmdeck_cmd(*args), env=cli_env(tmp), capture_output=True, text=True, timeout=timeout, cwd=tmp
    )


# The tiny model's sizes, all given: preflight's plan then never asks transformers for a default (a ~6 s
# import in every `llmdeck up` these fakes start: 5.5 -> 1.0 CPU s each).
FAKE_QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "max_position_embeddings": 4096,
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}


def fake_model_dir(tmp: Path) -> Path:
    """A folder that passes llmdeck's model-folder check (config.json only): no weights needed."""
    d = tmp / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(FAKE_QWEN3_CONFIG))
    return d


FAKE_ENGINE = """#!/bin/sh
# fake_dying_engine: prints what it was given, like an engine logging its arguments, then dies.
echo "fake engine argv: $*"
echo "fake engine: api_key=$VLLM_API_KEY"
echo "fake engine: key length ${#VLLM_API_KEY}"
exit 3
"""


def fake_engine(tmp: Path) -> Path:
    """fake_dying_engine: stands in for the venv's python; dies at once after printing its input."""
    path = tmp / "fake_dying_engine.sh"
    path.write_text(FAKE_ENGINE)
    path.chmod(0o755)
    return path


FAKE_SERVING_ENGINE = '''#!{python}
"""fake_serving_engine: stands in for the venv's python; serves /health and /v1/models on its --port,
or dies as vLLM does when another program holds that port ([Errno 98] Address already in use).
Asked for its vLLM version (preflight), it says the venv's."""
import http.server, json, sys

if "--port" not in sys.argv:
    print("0.32.0")
    sys.exit(0)
port = int(sys.argv[sys.argv.index("--port") + 1])


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        models = {{"object": "list", "data": [{{"id": "m", "max_model_len": 2048}}]}}
        body = b"" if self.path == "/health" else json.dumps(models).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


try:
    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
except OSError as exc:
    print(f"ERROR api_server.py: {{exc}}", flush=True)
    sys.exit(1)
print("fake engine: serving", flush=True)
server.serve_forever()
'''


def fake_serving_engine(tmp: Path) -> Path:
    """fake_serving_engine: stands in for the venv's python; a server that answers on its --port."""
    import sys

    path = tmp / "fake_serving_engine.py"
    path.write_text(FAKE_SERVING_ENGINE.format(python=sys.executable))
    path.chmod(0o755)
    return path
