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
  recorded cap: both must stay vLLM's overflow 400, on which Claude Code compacts.

    python evidence/device/outcap_probe.py --url http://127.0.0.1:8000 --model M \
        --gateway after=http://127.0.0.1:4000 --gateway before=http://127.0.0.1:4001 --alias coder \
        --key KEY --repeat 5 --out outcap.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import httpx

from llmdeck.checks.traffic import chat_view, load_recording, replay_body
from llmdeck.gateway.surfaces import fold_system_messages

HEADER = "x-llmdeck-max-tokens-lowered"


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
            if line.startswith("data:") and ('"content_block_delta"' in line or '"delta":{"content"' in line):
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
    }
    messages, tools = chat_view(rec.agent.path, replay_body(rec, model, max_tokens=recorded))
    for body in cases.values():  # as the gateway's fold_system does: vLLM 0.22 refuses a mid-way system
        fold_system_messages(body)  # message, and direct must be sent what the gateway sends
        body["messages"] = _alternate(body["messages"])
    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")  # one, first
    messages = [{"role": "system", "content": system}, *(m for m in messages if m["role"] != "system")]
    chat = {"_path": "/v1/chat/completions", "model": model, "messages": messages, "tools": tools}
    cases["chat-recorded"] = {**chat, "max_tokens": recorded, "stream": True}
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


def target(
    client: httpx.Client, url: str, model: str, key: str | None, cases: dict[str, Any], repeat: int
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, body in cases.items():
        body = {**body, "model": model}
        runs = [one(client, url, body, key) for _ in range(1 if name == "too-long" else repeat)]
        times = [r["ttft_s"] for r in runs if "ttft_s" in r]
        result[name] = {
            "statuses": [r["status"] for r in runs],
            "lowered": sorted({r["lowered"] for r in runs if r["lowered"]}),
            "ttft_p50_ms": round(statistics.median(times) * 1000, 1) if times else None,
            "first": runs[0],
        }
        print(
            f"  {name}: {result[name]['statuses']} lowered={result[name]['lowered']} "
            f"ttft p50 {result[name]['ttft_p50_ms']} ms {runs[0].get('body', '')[:300]}",
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
    args = ap.parse_args()
    with httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0)) as client:
        models = client.get(args.url + "/v1/models").json()["data"]
        max_model_len = int(models[0]["max_model_len"])
        cases = bodies(args.model, max_model_len)
        doc: dict[str, Any] = {
            "max_model_len": max_model_len,
            "recorded_cap": cases["recorded"]["max_tokens"],
        }
        print(f"max_model_len {max_model_len}; direct ({args.url})", flush=True)
        doc["direct"] = target(client, args.url, args.model, None, cases, args.repeat)
        for spec in args.gateway:
            label, _, url = spec.partition("=")
            print(f"through the gateway {label} ({url}, alias {args.alias})", flush=True)
            doc[f"gateway-{label}"] = target(client, url, args.alias, args.key, cases, args.repeat)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
