"""Claude Code's recorded request with output caps a small context cannot hold, direct and through the
gateway: status, ``x-llmdeck-max-tokens-lowered``, the first event's time (TTFT; the stream is closed
there: a random model's reply could run to its cap).

Cases (``M`` = the server's max_model_len, read from ``/v1/models``):

* ``fits``: the recorded request with a cap of 1024 (the baseline the others' time is compared with);
* ``recorded``: the cap as Claude Code 2.1.332 sends it (32000): under ``M`` = 32768, but prompt + cap
  are over it;
* ``over``: a cap of ``M + 8000`` (over the whole context);
* ``chat-recorded``: the same prompt and tools on ``/v1/chat/completions`` (as chat messages) with the
  recorded cap;
* ``too-long``: a prompt that is itself over ``M`` (the recorded one and ~``M`` tokens of text) with the
  recorded cap: both must stay vLLM's overflow 400, on which Claude Code compacts;
* ``fits-again``: ``fits`` once more, last (the gateway has learnt the backend by then);
* ``under``: the recorded prompt with a cap of ``M // 2``: under the context, but prompt + cap over it on
  any ``M`` under twice the prompt (~23.4k): on a 16384 context the recorded case's shape on the H100's
  32768 (where ``under`` fits, a second baseline), the 32000 being over 16384.

Each case's TTFT p50 is of all its runs and of all but the first (``rest``): on vLLM < 0.32 the gateway
learns from the first refusal that the backend counts the cap against the prompt's room; since roomcap's
``count_first`` each later request whose cap cannot fit is counted first and sent once (before: refused,
counted, sent again, every time). ``--vllm-log`` (vLLM's log, with its access lines) adds the requests
each case made upstream: ``sends`` (the API's POSTs) and ``counts`` (count_tokens, tokenize).

    python evidence/device/outcap_probe.py --url http://127.0.0.1:8000 --model M \
        --gateway after=http://127.0.0.1:4000 --gateway before=http://127.0.0.1:4001 --alias coder \
        --key KEY --repeat 5 --out outcap.json [--vllm-log /root/vllm-M-8000.log]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time
from typing import Any

import httpx

from llmdeck.checks.traffic import chat_view, load_recording, replay_body
from llmdeck.gateway.surfaces import fold_system_messages

HEADER = "x-llmdeck-max-tokens-lowered"
# a stream's first answer: a Messages delta, a chat delta of content or reasoning (the tiny CPU model's
# first), or a chat chunk that ends it
FIRST = ('"content_block_delta"', '"delta":{"content"', '"delta":{"reasoning', '"finish_reason":"')


def one(client: httpx.Client, url: str, body: dict[str, Any], key: str | None) -> dict[str, Any]:
    """One streamed request; closed at its first content event (or read whole when it is an error).
    A body with ``_path`` goes there (chat: ``/v1/chat/completions``), else to ``/v1/messages``."""
    body = dict(body)
    path = body.pop("_path", "/v1/messages")
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    if key:
        headers["x-api-key"] = key
    t0 = time.perf_counter()
    headers["connection"] = "close"  # a refusal sent before a long body is read closes the connection
    with client.stream("POST", url + path, json=body, headers=headers) as resp:
        out: dict[str, Any] = {"status": resp.status_code, "lowered": resp.headers.get(HEADER)}
        if resp.status_code != 200:
            out["body"] = resp.read().decode(errors="replace")[:600]
            out["s"] = time.perf_counter() - t0
            return out
        for line in resp.iter_lines():
            if line.startswith("data:") and any(k in line for k in FIRST):
                out["ttft_s"] = time.perf_counter() - t0
                break
            if line.startswith("data:") and '"message_stop"' in line:
                out["ttft_s"] = time.perf_counter() - t0  # no delta came: the stop is its first answer
                break
    return out


def bodies(model: str, max_model_len: int) -> dict[str, dict[str, Any]]:
    rec = load_recording("claude-code")
    assert rec is not None
    recorded = rec.max_tokens or 32000
    long_text = "lorem ipsum dolor sit amet " * (max_model_len // 5)
    too_long = replay_body(rec, model, max_tokens=recorded)
    too_long["messages"] = [*too_long["messages"], {"role": "user", "content": long_text}]
    cases = {
        "fits": replay_body(rec, model, max_tokens=1024),
        "recorded": replay_body(rec, model, max_tokens=recorded),
        "over": replay_body(rec, model, max_tokens=max_model_len + 8000),
        "too-long": too_long,
        "under": replay_body(rec, model, max_tokens=max_model_len // 2),
    }
    messages, tools = chat_view(rec.agent.path, replay_body(rec, model, max_tokens=recorded))
    for body in cases.values():  # as the gateway's fold_system does: vLLM 0.22 refuses a mid-way system
        fold_system_messages(body)  # message, and direct must be sent what the gateway sends
        body["messages"] = _alternate(body["messages"])
    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")  # one, first
    messages = [{"role": "system", "content": system}, *(m for m in messages if m["role"] != "system")]
    chat = {"_path": "/v1/chat/completions", "model": model, "messages": messages, "tools": tools}
    cases["chat-recorded"] = {**chat, "max_tokens": recorded, "stream": True}
    cases["fits-again"] = cases["fits"]  # once the gateway has learnt the backend: still sent once, uncounted
    return cases


def _alternate(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two user turns in a row merged into one (the Messages API wants them alternating)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"] == "user":
            prev = out[-1]["content"]
            blocks = prev if isinstance(prev, list) else [{"type": "text", "text": prev}]
            out[-1] = {"role": "user", "content": [*blocks, {"type": "text", "text": m["content"]}]}
        else:
            out.append(m)
    return out


def _p50(times: list[float]) -> float | None:
    return round(statistics.median(times) * 1000, 1) if times else None


class VllmLog:
    """The requests vLLM's access log shows since the last ``take`` (None: no log given)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.at = self._size()

    def _size(self) -> int:
        return os.path.getsize(self.path) if self.path and os.path.exists(self.path) else 0

    def take(self) -> dict[str, int] | None:
        if not self.path:
            return None
        time.sleep(0.3)  # the access line is written as the reply ends
        with open(self.path, "rb") as f:
            f.seek(self.at)
            new = f.read().decode(errors="replace")
        self.at += len(new.encode())
        posts = re.findall(r'"POST (/v1/[\w/.-]+|/tokenize)\S* HTTP', new)
        counts = sum(1 for p in posts if p.endswith("/count_tokens") or p == "/tokenize")
        return {"sends": len(posts) - counts, "counts": counts}


def target(
    client: httpx.Client, url: str, model: str, key: str | None, cases: dict[str, Any], repeat: int,
    upstream: VllmLog | None = None,
) -> dict[str, Any]:  # fmt: skip
    result: dict[str, Any] = {}
    for name, body in cases.items():
        body = {**body, "model": model}
        if upstream is not None:
            upstream.take()
        runs = [one(client, url, body, key) for _ in range(1 if name == "too-long" else repeat)]
        times = [r.get("ttft_s") for r in runs]
        result[name] = {
            "statuses": [r["status"] for r in runs],
            "lowered": sorted({r["lowered"] for r in runs if r["lowered"]}),
            "ttft_p50_ms": _p50([t for t in times if t is not None]),
            "ttft_rest_p50_ms": _p50([t for t in times[1:] if t is not None]),
            "ttft_ms": [round(t * 1000, 1) if t is not None else None for t in times],
            "upstream": upstream.take() if upstream is not None else None,
            "first": runs[0],
        }
        print(
            f"  {name}: {result[name]['statuses']} lowered={result[name]['lowered']} "
            f"ttft p50 {result[name]['ttft_p50_ms']} ms (rest {result[name]['ttft_rest_p50_ms']} ms) "
            f"upstream {result[name]['upstream']} {runs[0].get('body', '')[:300]}",
            flush=True,
        )
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--gateway", action="append", required=True, help="LABEL=URL (repeatable)")
    ap.add_argument("--alias", required=True)
    ap.add_argument("--key")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vllm-log", help="vLLM's log (its access lines): the requests each case sent it")
    args = ap.parse_args()
    upstream = VllmLog(args.vllm_log) if args.vllm_log else None
    with httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0)) as client:
        models = client.get(args.url + "/v1/models").json()["data"]
        max_model_len = int(models[0]["max_model_len"])
        cases = bodies(args.model, max_model_len)
        doc: dict[str, Any] = {
            "max_model_len": max_model_len,
            "recorded_cap": cases["recorded"]["max_tokens"],
        }
        print(f"max_model_len {max_model_len}; direct ({args.url})", flush=True)
        doc["direct"] = target(client, args.url, args.model, None, cases, args.repeat, upstream)
        for spec in args.gateway:
            label, _, url = spec.partition("=")
            print(f"through the gateway {label} ({url}, alias {args.alias})", flush=True)
            doc[f"gateway-{label}"] = target(client, url, args.alias, args.key, cases, args.repeat, upstream)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
