"""The real Codex (0.171.0) through llmdeck's gateway when the backend's Responses stream breaks mid-way.

The gateway runs in this process in front of a FAKE cutting proxy: a TCP proxy to the real CPU vLLM 0.32
server (the EOS-biased tiny Qwen3, ``--max-model-len 16384``) that relays an event stream's first
``--events`` events and then closes the connection (a backend that crashed mid-reply); anything else it
relays whole. ``codex exec`` runs once against it (default retries); the script records what Codex showed,
its exit status and time, and each request the gateway logged; then one stream of its own shows the last
events the gateway sent after the cut.

``--prompt-lines N``: no cut; one prompt of N lines (1000: ~9k tokens, with Codex's own ~9k over the
16384-token context), to see what Codex shows for vLLM's context-overflow 400 (codex_overflow*.txt).

Run it with the gateway code to test on PYTHONPATH (this checkout's src, or origin/main's for "before"):

    PYTHONPATH=src:tests python evidence/gateway/codex_cut.py --backend http://127.0.0.1:PORT \
        --codex .cache/clients/codex/node_modules/.bin/codex --out evidence/gateway/results/codex_cut.txt
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from gateway_fakes import UvicornThread, _raw_server
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore

LINES: list[str] = []


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


def _read_request(conn: socket.socket) -> bytes:
    request = b""
    while b"\r\n\r\n" not in request:
        request += conn.recv(65536)
    head, _, rest = request.partition(b"\r\n\r\n")
    length = next(
        (int(ln.split(b":")[1]) for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")),
        0,
    )
    while len(rest) < length:
        rest += conn.recv(65536)
    return head.replace(b"keep-alive", b"close") + b"\r\n\r\n" + rest


@contextlib.contextmanager
def cutting_proxy(backend: str, events: int) -> Iterator[str]:
    """FAKE upstream: relays to the real vLLM; an event stream is cut after ``events`` events."""
    host, port = backend.removeprefix("http://").split(":")

    def handler(conn: socket.socket) -> None:
        up = socket.create_connection((host, int(port)))
        up.sendall(_read_request(conn))
        seen = b""
        with contextlib.suppress(OSError):
            while chunk := up.recv(65536):
                seen += chunk
                if b"text/event-stream" not in seen.split(b"\r\n\r\n", 1)[0]:
                    conn.sendall(seen)  # no event stream: relayed whole
                    seen = b""
                elif seen.count(b"\n\n") > events:
                    break
            if seen:  # the head and the first events (all of a shorter stream but its last); then the crash
                ends = [i + 2 for i in range(len(seen)) if seen.startswith(b"\n\n", i)]
                conn.sendall(seen[: ends[min(events, len(ends) - 1) - 1]] if ends else seen)
        up.close()
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()

    with _raw_server(handler) as url:
        yield url


class Access(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if not msg.startswith("GET /v1/models"):
            self.lines.append(msg.split(" ms=")[0])


def codex_config(url: str, key: str) -> str:
    return f"""model = "coder"
model_provider = "llmdeck"
model_context_window = 16384
model_auto_compact_token_limit = 12288
check_for_update_on_startup = false
[analytics]
enabled = false
[feedback]
enabled = false
[features]
plugins = false
[model_providers.llmdeck]
name = "llmdeck (coder)"
base_url = "{url}/v1"
wire_api = "responses"
experimental_bearer_token = "{key}"
"""


def run_codex(binary: str, home: Path, prompt: str) -> str:
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    (home / "work").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"))
    argv = [binary, "exec", "--skip-git-repo-check", prompt]
    t0 = time.monotonic()
    res = subprocess.run(argv, cwd=home / "work", env=env, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    shown = [ln[:400] for ln in (res.stdout + res.stderr).splitlines() if ln.strip() and " fox." not in ln]
    tail = "\n      ".join(shown[-16:])
    return f"rc={res.returncode} in {took:.1f} s; its last lines:\n      {tail}"


def last_events(url: str, key: str) -> list[str]:
    body = {"model": "coder", "input": "Say hi.", "stream": True}
    with httpx.stream(
        "POST", f"{url}/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}, timeout=60
    ) as r:
        text = r.read().decode()
    out = []
    for block in text.split("\n\n")[-3:]:
        data = "".join(ln[5:] for ln in block.splitlines() if ln.startswith("data:"))
        if data:
            obj = json.loads(data)
            if isinstance(obj.get("response"), dict):
                keep = ("id", "status", "error")
                obj["response"] = {k: v for k, v in obj["response"].items() if k in keep}
            out.append(json.dumps(obj)[:400])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--codex", required=True)
    ap.add_argument("--events", type=int, default=5)
    ap.add_argument("--label", default="")
    ap.add_argument(
        "--prompt-lines", type=int, default=0, help="no cut: a prompt of N lines (~9 tokens each)"
    )
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "codex_cut.txt"))
    args = ap.parse_args()
    binary = str(Path(args.codex).resolve())
    tmp = Path(tempfile.mkdtemp(prefix="codex-cut-"))
    key = KeyStore(tmp / "keys.json").create("ci")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    access = Access()
    logging.getLogger("llmdeck.gateway.access").addHandler(access)
    logging.getLogger("llmdeck.gateway.access").setLevel(logging.INFO)
    events = 1 << 30 if args.prompt_lines else args.events
    how = f"a prompt of {args.prompt_lines} lines" if args.prompt_lines else f"cut after {events} events"
    say(f"{version}; gateway code: {args.label}; backend {args.backend}, {how}")
    with cutting_proxy(args.backend, events) as cut:
        text = f"routes:\n  - model: coder\n    backends: ['{cut}']\nkeys_file: keys.json\n"
        text += "health: {interval_s: 2, timeout_s: 2}\n"
        from llmdeck.settings import Settings

        loaded = parse_config(text, source=tmp / "gateway.yaml", settings=Settings())
        with UvicornThread(build_app(loaded)) as gw:
            (tmp / "home" / ".codex").mkdir(parents=True)
            (tmp / "home" / ".codex" / "config.toml").write_text(codex_config(gw.url, key))
            text = " ".join(f"line {i}: the quick brown fox." for i in range(args.prompt_lines))
            prompt = f"Note this: {text}" if args.prompt_lines else "Say hi."
            say("  codex exec: " + run_codex(binary, tmp / "home", prompt))
            if args.prompt_lines:
                Path(args.out).write_text("\n".join(LINES) + "\n", encoding="utf-8")
                return 0
            for line in access.lines:
                say(f"  gateway: {line}")
            say("  the last events the gateway sends after the cut (a stream of this script's):")
            for event in last_events(gw.url, key):
                say(f"    {event}")
    Path(args.out).write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
