"""The real Claude Code (2.1.332) through llmdeck's gateway when a conversation outgrows the context.

The gateway runs in this process in front of a real CPU vLLM 0.32 server (the EOS-biased tiny Qwen3,
``--max-model-len`` as ``--context`` says: 2048 or 16384). Between the two sits a FAKE recording proxy
(it notes each request's size and the reply's status and error message); on the route ``coder-rw`` it
also rewrites vLLM's context-overflow 400 into Anthropic's wording (``prompt is too long: N tokens > M
maximum``), to see whether Claude Code does anything different with that wording (it would be the
gateway's job to do so, if it helped).

Cases, each run with ``claude -p`` in a throwaway home, on both routes:

* ``first``: Claude Code's own base prompt (~11.7k tokens) is already too long.
* ``history``: a small system prompt and no tools (``--system-prompt``, ``--tools ""``); each turn adds
  ``--turn-lines`` lines (~9 tokens each, ``--continue``) until the history no longer fits.
* ``window``: ``history`` with ``CLAUDE_CODE_MAX_CONTEXT_TOKENS`` = ``--context`` (what ``llmdeck
  connect`` writes from the server's max_model_len): does Claude Code compact before the server refuses?
* ``max_tokens``: no ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` (Claude Code asks 32000 tokens out).
* ``--no-thinking``: the model answers in text, not thinking blocks (a compaction's summary is then
  not empty).

    PYTHONPATH=src:tests python evidence/gateway/claude_overflow.py --backend http://127.0.0.1:PORT \
        --claude .cache/clients/claude-code/node_modules/.bin/claude

Output: ``--out`` (the runs kept: results/claude_overflow_{2048,16k,16k_text}.txt, see the README).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore

LINES: list[str] = []
VLLM_OVERFLOW = re.compile(r"maximum context length is (\d+) tokens.*?at least (\d+) input tokens", re.S)


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


class RecordingProxy:
    """A FAKE upstream: relays to the real vLLM, notes each request; ``rewrite`` puts vLLM's overflow 400
    in Anthropic's words (the N it gives is vLLM's "at least N": vLLM 0.32 stops counting at M + 1)."""

    def __init__(self, backend: str, rewrite: bool) -> None:
        self.backend, self.rewrite = backend, rewrite
        self.seen: list[str] = []
        self.app = Starlette(routes=[Route("/{path:path}", self.relay, methods=["GET", "POST", "HEAD"])])

    async def relay(self, request: Request) -> Response:
        body = await request.body()
        info = ""
        if body:
            obj = json.loads(body)
            info = (
                f" msgs={len(obj.get('messages', []))} max_tokens={obj.get('max_tokens')} bytes={len(body)}"
            )
        async with httpx.AsyncClient(timeout=300) as client:
            up = await client.request(
                request.method,
                self.backend + request.url.path,
                content=body,
                headers={"content-type": "application/json"},
            )
        content = up.content
        if up.status_code == 400 and (m := VLLM_OVERFLOW.search(up.text)) and self.rewrite:
            message = f"prompt is too long: {m.group(2)} tokens > {m.group(1)} maximum"
            err = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
            content = json.dumps(err).encode()
        if request.url.path.startswith("/v1/messages"):
            why = json.loads(content)["error"]["message"][:90] if up.status_code != 200 else ""
            self.seen.append(f"{request.method} {request.url.path} {up.status_code}{info} {why}".rstrip())
        ctype = up.headers.get("content-type", "application/json")
        return Response(content, status_code=up.status_code, media_type=ctype)


def claude(binary: str, url: str, key: str, home: Path, prompt: str, *extra: str, **env: str) -> str:
    (home / "work").mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    base.update(
        HOME=str(home), IS_SANDBOX="1", ANTHROPIC_BASE_URL=url, ANTHROPIC_AUTH_TOKEN=key,
        ANTHROPIC_API_KEY="", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1", **env,
    )  # fmt: skip
    argv = [binary, "-p", prompt, "--dangerously-skip-permissions", *extra]
    res = subprocess.run(argv, cwd=home / "work", env=base, capture_output=True, text=True, timeout=600)
    shown = " | ".join(
        line
        for line in (res.stdout + res.stderr).splitlines()
        if line.strip() and "unrecognized_model" not in line and "doesn't recognize the model" not in line
    )
    return f"rc={res.returncode} shows: {shown[:400]!r}"


def history(binary: str, url: str, key: str, home: Path, args: argparse.Namespace, **env: str) -> None:
    text = " ".join(f"line {i}: the quick brown fox." for i in range(args.turn_lines))  # ~9 tokens a line
    small = ["--tools", "", "--system-prompt", "Be terse."]
    for turn in range(1, args.turns + 1):
        prompt, more = ("Say hi.", []) if turn == 1 else (f"Note this: {text}", ["--continue"])
        say(f"    turn {turn}: {claude(binary, url, key, home, prompt, *small, *more, **env)}")


def cases(args: argparse.Namespace, url: str, key: str, tmp: Path, model: str, proxy: RecordingProxy) -> None:
    env = {"ANTHROPIC_MODEL": model, "ANTHROPIC_SMALL_FAST_MODEL": model}
    out = {**env, "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256"}
    win = {**out, "CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(args.context)}
    small = ["--tools", "", "--system-prompt", "Be terse."]
    runs: dict[str, Any] = {
        "first": lambda: say("    " + claude(args.claude, url, key, tmp / f"{model}-1", "Say hi.", **out)),
        "history": lambda: history(args.claude, url, key, tmp / f"{model}-2", args, **out),
        "window": lambda: history(args.claude, url, key, tmp / f"{model}-3", args, **win),
        "max_tokens": lambda: say(
            "    " + claude(args.claude, url, key, tmp / f"{model}-4", "Say hi.", *small, **env)
        ),
    }
    for name in args.cases.split(","):
        proxy.seen.clear()
        say(f"  [{name}]")
        runs[name]()
        for line in proxy.seen:
            say(f"    request: {line}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--claude", required=True)
    ap.add_argument("--context", type=int, default=2048, help="the server's max-model-len")
    ap.add_argument("--turn-lines", type=int, default=120, help="lines a turn adds (~9 tokens each)")
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--no-thinking", action="store_true", help="the model answers in text (summaries)")
    ap.add_argument("--cases", default="first,history,window,max_tokens")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "claude_overflow.txt"))
    args = ap.parse_args()
    args.claude = str(Path(args.claude).resolve())
    tmp = Path(tempfile.mkdtemp(prefix="claude-overflow-"))
    key = KeyStore(tmp / "keys.json").create("ci")
    version = subprocess.run([args.claude, "--version"], capture_output=True, text=True).stdout.strip()
    say(f"Claude Code {version}; backend {args.backend} (vLLM, max-model-len {args.context})")
    plain, rw = RecordingProxy(args.backend, False), RecordingProxy(args.backend, True)
    with UvicornThread(plain.app) as p1, UvicornThread(rw.app) as p2:
        text = "routes:\n"
        for alias, p in (("coder", p1), ("coder-rw", p2)):
            text += f"  - model: {alias}\n    backends: [{p.url}]\n"
            # the EOS-biased model: ~130 tokens at temperature 1; --no-thinking: text, not thinking blocks
            kwargs = ", chat_template_kwargs: {enable_thinking: false}" if args.no_thinking else ""
            text += f"    messages: {{override: {{temperature: 1.0{kwargs}}}}}\n"
        text += "keys_file: keys.json\n"
        from llmdeck.settings import Settings

        loaded = parse_config(text, source=tmp / "gateway.yaml", settings=Settings())
        with UvicornThread(build_app(loaded)) as gw:
            for model, proxy in (("coder", plain), ("coder-rw", rw)):
                how = "vLLM's 400 rewritten to Anthropic's words" if proxy.rewrite else "vLLM's 400 as it is"
                say(f"route {model}: {how}")
                cases(args, gw.url, key, tmp, model, proxy)
    Path(args.out).write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    logging.getLogger("llmdeck").setLevel(logging.WARNING)
    sys.exit(main())
