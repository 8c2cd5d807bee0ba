"""The official SDKs (anthropic, openai) against llmdeck's gateway: every error and edge it can produce.

In front of a real vLLM server (the tiny CPU Qwen3 with hermes tools and the qwen3 reasoning parser) and
three FAKE upstreams (a hung one, a dead port, and a proxy to the real server that cuts its streams after
a few events), the gateway runs in this process. Each case is driven through the SDK as a client would
(default retries on), and one line says what the SDK raised, its status, how many attempts it made and
how long it took.

    PYTHONPATH=src:tests:/tmp/sdks-site python evidence/gateway/sdk_sweep.py --backend http://127.0.0.1:PORT

``--on-demand SPEC.json``: also a managed model (the launch spec of the same tiny model; run with the
real server stopped: one real server at a time), started by the first request.
Output: evidence/gateway/results/sdk_sweep.txt.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai

from gateway_fakes import UvicornThread, _raw_server, fake_silent_server
from llmdeck.gateway.app import build_app
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyStore
from llmdeck.util.net import free_port

LINES: list[str] = []
TOOL_OA = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOOL_CHAT = {"type": "function", "function": {k: v for k, v in TOOL_OA.items() if k != "type"}}
TOOL_ANT = {
    "name": "get_weather",
    "description": TOOL_OA["description"],
    "input_schema": TOOL_OA["parameters"],
}


def say(line: str) -> None:
    print(line, flush=True)
    LINES.append(line)


class Attempts:
    """An httpx2 client that counts the requests the SDK sends (its retries) and their statuses."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.client = httpx2.Client(event_hooks={"response": [self._hook]}, timeout=120)

    def _hook(self, response: httpx2.Response) -> None:
        h = response.headers
        extra = "".join(f" {k}={h[k]}" for k in ("retry-after", "x-should-retry") if k in h)
        self.seen.append(f"{response.status_code}{extra}")


def run(case: str, expected: str, fn: Callable[[Attempts], Any]) -> Any:
    hook = Attempts()
    t0 = time.monotonic()
    result: Any = None
    try:
        result = fn(hook)
        seen = f"ok {str(result)[:160]}"
    except Exception as exc:  # the SDK's typed error: its class, status and message
        status = getattr(exc, "status_code", "-")
        seen = f"{type(exc).__module__.split('.')[0]}.{type(exc).__name__} status={status} {str(exc)[:300]}"
    say(f"- {case}\n    expected: {expected}\n    seen: {seen}")
    say(f"    attempts: {len(hook.seen)} {hook.seen}  elapsed: {time.monotonic() - t0:.1f} s")
    return result


@contextlib.contextmanager
def cutting_proxy(backend: str, events: int = 2) -> Iterator[str]:
    """A FAKE upstream: a TCP proxy to the real vLLM that relays an event stream's head and its first
    ``events`` events, then closes (a backend that crashed mid-stream); anything else is relayed whole."""
    host, port = backend.removeprefix("http://").split(":")

    def handler(conn: socket.socket) -> None:
        up = socket.create_connection((host, int(port)))
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(65536)
        head, _, rest = request.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(rest) < length:
            rest += conn.recv(65536)
        head = head.replace(b"keep-alive", b"close")
        up.sendall(head + b"\r\n\r\n" + rest)
        seen, sent = b"", 0
        with contextlib.suppress(OSError):
            while chunk := up.recv(65536):
                seen += chunk
                if b"text/event-stream" in seen and seen.count(b"\n\n") > events:
                    end = 0
                    for _ in range(events):
                        end = seen.index(b"\n\n", end) + 2
                    conn.sendall(seen[sent:end])
                    break
                conn.sendall(chunk)
                sent = len(seen)
        up.close()
        conn.shutdown(socket.SHUT_RDWR)
        conn.close()

    with _raw_server(handler) as url:
        yield url


def gateway_config(backend: str, hung: str, cut: str, dead: str, spec: str | None) -> str:
    managed = (
        (
            f"  - {{model: ondemand, backends: [{{spec: {spec}}}]}}\n"
            "  - {model: toobig, backends: [{spec: big.json, memory_gib: 900}]}\n"
            "  - {model: broken, backends: [{spec: broken.json, memory_gib: 1}]}\n"
        )
        if spec
        else ""
    )
    return f"""
routes:
  - model: tiny
    backends: [{backend}]
    defaults: {{chat_template_kwargs: {{enable_thinking: false}}}}
  - {{model: hung, backends: [{hung}]}}
  - {{model: cut, backends: [{cut}]}}
  - {{model: dead, backends: [{dead}]}}
{managed}keys_file: keys.json
limits:
  slow: {{rpm: 2}}
timeouts: {{connect_s: 2, first_byte_s: 3, response_s: 15, idle_s: 30}}
health: {{interval_s: 2, timeout_s: 2}}
budget: {{memory_gib: 6, queue: {{wait_s: 20, failed_retry_s: 60}}}}
"""


def raw(url: str, path: str, body: bytes, key: str, **headers: str) -> str:
    with httpx2.Client(timeout=30) as c:
        r = c.post(
            url + path,
            content=body,
            headers={"x-api-key": key, "content-type": "application/json", **headers},
        )
        return f"HTTP {r.status_code} retry-after={r.headers.get('retry-after')} {r.text[:300]}"


def raw_get(url: str, path: str, key: str) -> str:
    with httpx2.Client(timeout=30) as c:
        r = c.get(url + path, headers={"x-api-key": key})
        return f"HTTP {r.status_code} {r.text[:300]}"


def errors(url: str, key: str, slow_key: str, tiny_only: str) -> None:
    say("\n## errors")
    msg = [{"role": "user", "content": "Say hi."}]

    def ant(k: str, h: Attempts) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=url, api_key=k, http_client=h.client)

    def oa(k: str, h: Attempts) -> openai.OpenAI:
        return openai.OpenAI(base_url=url + "/v1", api_key=k, http_client=h.client)

    def m(h: Attempts, model: str = "tiny", k: str = key, n: int = 2, **kw: Any) -> Any:
        return (
            ant(k, h)
            .with_options(max_retries=n)
            .messages.create(model=model, max_tokens=8, messages=msg, **kw)
        )

    def c(h: Attempts, model: str = "tiny", k: str = key, n: int = 2, **kw: Any) -> Any:
        return (
            oa(k, h)
            .with_options(max_retries=n)
            .chat.completions.create(model=model, max_tokens=8, messages=msg, **kw)
        )

    def r(h: Attempts, model: str = "tiny", k: str = key, n: int = 2, **kw: Any) -> Any:
        return (
            oa(k, h)
            .with_options(max_retries=n)
            .responses.create(model=model, max_output_tokens=16, input="Say hi.", **kw)
        )

    for name, call in (("messages", m), ("chat", c), ("responses", r)):
        run(
            f"{name}: wrong key",
            "401 AuthenticationError, no retry",
            lambda h, f=call: f(h, k="sk-llmdeck-nope"),
        )
        run(f"{name}: unknown model", "404 NotFoundError, no retry", lambda h, f=call: f(h, model="nosuch"))
        n = 2 if name == "messages" else 0  # 3 x response_s once is enough
        run(
            f"{name}: upstream hung past response_s (max_retries={n})",
            "504 (GatewayTimeout)",
            lambda h, f=call, n=n: f(h, model="hung", n=n),
        )
        run(
            f"{name}: upstream down (dead port)",
            "502 then 503 backend_down, Retry-After honoured",
            lambda h, f=call: f(h, model="dead"),
        )
    big = "word " * 3000
    run(
        "messages: too long for the context",
        "400 BadRequestError with vLLM's reason",
        lambda h: ant(key, h).messages.create(
            model="tiny", max_tokens=8, messages=[{"role": "user", "content": big}]
        ),
    )
    run(
        "chat: too long for the context",
        "400 BadRequestError with vLLM's reason",
        lambda h: oa(key, h).chat.completions.create(
            model="tiny", max_tokens=8, messages=[{"role": "user", "content": big}]
        ),
    )
    run(
        "responses: too long for the context",
        "400 BadRequestError with vLLM's reason",
        lambda h: oa(key, h).responses.create(model="tiny", max_output_tokens=8, input=big),
    )
    for i in range(3):
        run(
            f"messages: key rpm 2, request {i + 1}",
            "3rd: 429 honoured Retry-After (then ok)",
            lambda h: m(h, k=slow_key),
        )
    for i in range(2):
        run(
            f"chat: key rpm 2, max_retries=0, request {i + 1}",
            "2nd: 429 RateLimitError, Retry-After",
            lambda h: (
                oa(slow_key, h)
                .with_options(max_retries=0)
                .chat.completions.create(model="tiny", max_tokens=8, messages=msg)
            ),
        )
    huge = "x" * (33 << 20)
    run(
        "messages: body over 32 MiB",
        "413 (ContentTooLargeError), no retry",
        lambda h: ant(key, h).messages.create(
            model="tiny", max_tokens=8, messages=[{"role": "user", "content": huge}]
        ),
    )
    run(
        "chat: body over 32 MiB",
        "413, no retry",
        lambda h: oa(key, h).chat.completions.create(
            model="tiny", max_tokens=8, messages=[{"role": "user", "content": huge}]
        ),
    )
    run(
        "messages: key may not use the model",
        "403 PermissionDeniedError, no retry",
        lambda h: m(h, k=tiny_only, model="cut"),
    )
    run(
        "chat: key may not use the model",
        "403 PermissionDeniedError, no retry",
        lambda h: c(h, k=tiny_only, model="cut"),
    )
    run(
        "messages stream: too long for the context",
        "400 BadRequestError before the stream",
        lambda h: list(
            ant(key, h).messages.create(
                model="tiny", max_tokens=8, stream=True, messages=[{"role": "user", "content": big}]
            )
        ),
    )
    run(
        "responses stream: too long for the context",
        "400 BadRequestError before the stream",
        lambda h: list(
            oa(key, h).responses.create(model="tiny", max_output_tokens=8, input=big, stream=True)
        ),
    )
    say("- GET /v1/messages, raw: " + raw_get(url, "/v1/messages", key))
    say(
        "- vLLM's 400 on /v1/messages, raw: "
        + raw(
            url,
            "/v1/messages",
            json.dumps(
                {"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": big}]}
            ).encode(),
            key,
        )
    )
    say("- body not JSON, raw: " + raw(url, "/v1/messages", b"{not json", key))
    say("- body not JSON (chat), raw: " + raw(url, "/v1/chat/completions", b"{not json", key))
    say(
        "- rate limit raw (messages): "
        + raw(
            url,
            "/v1/messages",
            json.dumps({"model": "tiny", "max_tokens": 4, "messages": msg}).encode(),
            slow_key,
        )
    )


def streams(url: str, key: str) -> None:
    say("\n## streams and tools")
    msg = [{"role": "user", "content": "Say hi."}]

    def anth_stream(h: Attempts, model: str = "tiny") -> list[str]:
        client = anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client)
        with client.messages.create(model=model, max_tokens=16, messages=msg, stream=True) as s:
            return [e.type for e in s]

    def resp_stream(h: Attempts, model: str = "tiny") -> list[str]:
        client = openai.OpenAI(base_url=url + "/v1", api_key=key, http_client=h.client)
        with client.responses.create(model=model, max_output_tokens=16, input="Say hi.", stream=True) as s:
            return [e.type for e in s]

    def chat_stream(h: Attempts, model: str = "tiny") -> list[str]:
        client = openai.OpenAI(base_url=url + "/v1", api_key=key, http_client=h.client)
        out = client.chat.completions.create(model=model, max_tokens=16, messages=msg, stream=True)
        return [str(ch.choices[0].finish_reason if ch.choices else "usage") for ch in out]

    run("messages stream: event order", "message_start ... message_stop", anth_stream)
    run("responses stream: event order", "response.created ... response.completed", resp_stream)
    run("chat stream", "chunks, last finish_reason", chat_stream)
    run(
        "messages stream cut mid-way",
        "an error raised (not a hang, not a silent end)",
        lambda h: anth_stream(h, "cut"),
    )
    run("responses stream cut mid-way", "an error raised", lambda h: resp_stream(h, "cut"))
    run("chat stream cut mid-way", "an error raised", lambda h: chat_stream(h, "cut"))

    def final_message(h: Attempts) -> Any:
        client = anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client)
        with client.messages.stream(model="cut", max_tokens=16, messages=msg) as s:
            return s.get_final_message()

    def final_response(h: Attempts) -> Any:
        client = openai.OpenAI(base_url=url + "/v1", api_key=key, http_client=h.client)
        with client.responses.stream(model="cut", max_output_tokens=16, input="Say hi.") as s:
            return s.get_final_response()

    run("messages.stream() helper, cut mid-way", "get_final_message raises", final_message)
    run("responses.stream() helper, cut mid-way", "get_final_response raises", final_response)
    run(
        "messages stream to a hung upstream", "504 before the stream starts", lambda h: anth_stream(h, "hung")
    )
    run(
        "messages: count_tokens",
        "input_tokens > 0",
        lambda h: anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client).messages.count_tokens(
            model="tiny", messages=msg
        ),
    )
    run(
        "count_tokens: unknown model",
        "404 NotFoundError",
        lambda h: anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client).messages.count_tokens(
            model="nosuch", messages=msg
        ),
    )

    def ant(h: Attempts) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client)

    def oa(h: Attempts) -> openai.OpenAI:
        return openai.OpenAI(base_url=url + "/v1", api_key=key, http_client=h.client)

    run(
        "count_tokens: wrong key",
        "401 AuthenticationError",
        lambda h: anthropic.Anthropic(
            base_url=url, api_key="sk-llmdeck-nope", http_client=h.client
        ).messages.count_tokens(model="tiny", messages=msg),
    )
    run(
        "messages: forced tool call",
        "a tool_use block",
        lambda h: [
            b.type
            for b in ant(h)
            .messages.create(
                model="tiny",
                max_tokens=64,
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=[TOOL_ANT],
                tool_choice={"type": "tool", "name": "get_weather"},
            )
            .content
        ],
    )
    run(
        "responses: forced tool call",
        "a function_call item",
        lambda h: [
            o.type
            for o in oa(h)
            .responses.create(
                model="tiny",
                max_output_tokens=64,
                input="Weather in Paris?",
                tools=[TOOL_OA],
                tool_choice={"type": "function", "name": "get_weather"},
            )
            .output
        ],
    )
    run(
        "chat: forced tool call",
        "tool_calls",
        lambda h: (
            oa(h)
            .chat.completions.create(
                model="tiny",
                max_tokens=64,
                messages=[{"role": "user", "content": "Weather in Paris?"}],
                tools=[TOOL_CHAT],
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
            )
            .choices[0]
            .message.tool_calls
        ),
    )
    first = run(
        "responses: store=true",
        "a resp_ id",
        lambda h: oa(h).responses.create(model="tiny", max_output_tokens=8, input="Say hi.", store=True).id,
    )
    run(
        "responses: previous_response_id",
        "ok (the backend that stored it)",
        lambda h: (
            oa(h)
            .responses.create(
                model="tiny", max_output_tokens=8, input="And again.", previous_response_id=first
            )
            .id
        ),
    )
    run("responses: retrieve the stored id", "ok", lambda h: oa(h).responses.retrieve(first).status)
    run(
        "responses: previous_response_id unknown",
        "400/404 with the reason",
        lambda h: oa(h).responses.create(
            model="tiny", max_output_tokens=8, input="x", previous_response_id="resp_nosuch"
        ),
    )
    nostore = run(
        "responses: store=false",
        "a resp_ id",
        lambda h: oa(h).responses.create(model="tiny", max_output_tokens=8, input="Say hi.", store=False).id,
    )
    run(
        "responses: previous_response_id of a store=false reply",
        "an error that says it was not stored",
        lambda h: oa(h).responses.create(
            model="tiny", max_output_tokens=8, input="x", previous_response_id=nostore
        ),
    )
    run(
        "responses: retrieve unknown id",
        "404 NotFoundError",
        lambda h: oa(h).responses.retrieve("resp_nosuch"),
    )


def on_demand(url: str, key: str) -> None:
    say("\n## on demand (managed launch spec)")
    msg = [{"role": "user", "content": "Say hi."}]
    run(
        "messages: a model too big for the budget",
        "503, not retried (it will never fit)",
        lambda h: anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client).messages.create(
            model="toobig", max_tokens=8, messages=msg
        ),
    )
    run(
        "chat: a model too big for the budget",
        "503, not retried",
        lambda h: openai.OpenAI(
            base_url=url + "/v1", api_key=key, http_client=h.client
        ).chat.completions.create(model="toobig", max_tokens=8, messages=msg),
    )
    run(
        "messages: a model whose start fails (--no-such-flag)",
        "503 with vLLM's diagnosis, not retried",
        lambda h: anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client).messages.create(
            model="broken", max_tokens=8, messages=msg
        ),
    )
    run(
        "chat: the same, within failed_retry_s",
        "503 at once, not retried",
        lambda h: openai.OpenAI(
            base_url=url + "/v1", api_key=key, http_client=h.client
        ).chat.completions.create(model="broken", max_tokens=8, messages=msg),
    )
    run(
        "messages: a model loading on demand (wait_s 20)",
        "waits; 503 model_not_ready Retry-After 10, then ok",
        lambda h: (
            anthropic.Anthropic(base_url=url, api_key=key, http_client=h.client)
            .messages.create(model="ondemand", max_tokens=8, messages=msg)
            .stop_reason
        ),
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--on-demand", default=None, help="a launch spec file (the real server stopped)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "sdk_sweep.txt"))
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sdk-sweep-"))
    keys = KeyStore(tmp / "keys.json")
    key, slow_key = keys.create("ci"), keys.create("slow")
    tiny_only = keys.create("tiny-only", models=["tiny"])
    spec = None
    if args.on_demand:
        spec = str(tmp / "spec.json")
        Path(spec).write_text(Path(args.on_demand).read_text())
        big = json.loads(Path(spec).read_text())  # another model (its own port): declared too big to fit
        big.update(name=big["name"] + "-big", port=free_port())
        (tmp / "big.json").write_text(json.dumps(big))
        broken = {**big, "name": big["name"] + "-broken", "port": free_port()}  # a flag vLLM does not know
        broken["vllm_args"] = [*broken["vllm_args"], "--no-such-flag"]
        (tmp / "broken.json").write_text(json.dumps(broken))
    say(f"anthropic {anthropic.__version__}, openai {openai.__version__}; backend {args.backend}")
    with fake_silent_server(answer_probe=True) as hung, cutting_proxy(args.backend) as cut:
        dead = f"http://127.0.0.1:{free_port()}"
        text = gateway_config(args.backend, hung, cut, dead, spec)
        from llmdeck.settings import Settings

        loaded = parse_config(text, source=tmp / "gateway.yaml", settings=Settings())
        with UvicornThread(build_app(loaded)) as gw:
            if spec:
                on_demand(gw.url, key)
            else:
                errors(gw.url, key, slow_key, tiny_only)
                streams(gw.url, key)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    threading.excepthook = lambda a: None
    sys.exit(main())
