"""Turn a recorder capture (JSON lines) into a client recording: src/llmdeck/checks/recordings/.

Keeps the client's chat requests as sent (system prompt, tools, parameters), drops headers but the
user agent, replaces the throwaway work and home directories with neutral paths, and counts each
request's prompt tokens with the served tokenizer (the tiny model's real Qwen3 tokenizer and chat
template, .cache/test-tiny). ``reads`` (which reply fields the client parses) comes from the
client's own source, cited in READS below.

    python evidence/clients/make_recording.py --client opencode --version 1.18.33 \
        --package "npm opencode-ai@1.18.33" --command "opencode run ..." \
        --capture /tmp/rec/opencode.jsonl --workdir /tmp/rec/opencode --tokenizer .cache/test-tiny
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "src" / "llmdeck" / "checks" / "recordings"

AI_SDK_STREAM = (
    "tool_calls deltas by index; the first delta of an index must carry id and function.name "
    "(else 'Expected 'id' to be a string.'), arguments are concatenated and JSON-parsed at the end"
)
READS: dict[str, dict[str, Any]] = {
    "opencode": {
        "reasoning": ["reasoning_content", "reasoning"],
        "tool_call_deltas": AI_SDK_STREAM,
        "compaction": "usable = limit.context - limit.output; compacts when the last reply's usage total "
        "reaches it (limit.output is also sent as max_tokens)",
        "source": "opencode-ai 1.18.33 binary, bundled @ai-sdk/openai-compatible: "
        "`delta.reasoning_content ?? delta.reasoning`; session compaction `isOverflow`",
    },
    "continue": {
        "reasoning": [],
        "tool_call_deltas": "tool_calls deltas by index; id from the first delta of an index (mapped by "
        "index after), arguments concatenated and JSON-parsed",
        "compaction": "threshold = contextLength - maxTokens - min(max(maxTokens, 0.2*(contextLength - "
        "maxTokens)), 15000); maxTokens is sent as max_tokens",
        "source": "@continuedev/cli 1.5.47 src/stream/streamChatResponse.helpers.ts (reads delta.content "
        "and delta.tool_calls only: thinking is not shown), src/compaction.ts shouldAutoCompact",
    },
    "cline": {
        "reasoning": ["reasoning_content", "reasoning"],
        "tool_call_deltas": AI_SDK_STREAM,
        "compaction": "agentic compaction against the model's context window (cline auth / settings)",
        "source": "cline 3.0.65 CLI, @ai-sdk/openai-compatible 3.0.37 (user agent of its requests)",
    },
    "aider": {
        "reasoning": ["reasoning_content", "reasoning"],
        "tool_call_deltas": "none: aider sends no tools (whole-file edit format for an unknown model)",
        "compaction": "summarizes chat history past max_chat_history_tokens; sends no max_tokens",
        "source": "aider-chat 0.86.2 through litellm and the openai Python SDK (user agent)",
    },
}


def _scrub(value: Any, subs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in subs:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_scrub(v, subs) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, subs) for k, v in value.items()}
    return value


def _count(tok: Any, body: dict[str, Any]) -> int:
    ids = tok.apply_chat_template(
        body["messages"], tools=body.get("tools") or None, add_generation_prompt=True, tokenize=True
    )
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


def build(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(args.tokenizer))
    subs = [(str(args.workdir), "/home/user/project")]
    if args.home:
        subs.append((str(args.home), "/home/user"))
    requests: list[dict[str, Any]] = []
    for line in args.capture.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        body = entry.get("body")
        if not entry["path"].endswith("/chat/completions") or not isinstance(body, dict):
            continue
        body = _scrub(body, subs)
        requests.append(
            {
                "path": "/v1/chat/completions",
                "user_agent": entry["headers"].get("user-agent"),
                "prompt_tokens": _count(tok, body),
                "tools": len(body.get("tools") or []),
                "body": body,
            }
        )
    if not requests:
        raise SystemExit(f"{args.capture}: no chat request recorded")
    main = max(range(len(requests)), key=lambda i: requests[i]["prompt_tokens"])
    for i, req in enumerate(requests):
        req["role"] = "agent" if i == main else "auxiliary"
    return {
        "schema_version": 1,
        "kind": "llmdeck.client-recording",
        "client": args.client,
        "client_version": args.version,
        "package": args.package,
        "command": args.command,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "tokenizer": "Qwen3 (the tiny model's real Qwen3 tokenizer and chat template)",
        "reads": READS[args.client],
        "requests": requests,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--client", required=True, choices=sorted(READS))
    ap.add_argument("--version", required=True)
    ap.add_argument("--package", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--capture", type=Path, required=True)
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--home", type=Path)
    ap.add_argument("--tokenizer", type=Path, default=ROOT / ".cache" / "test-tiny")
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = ap.parse_args()
    rec = build(args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"{args.client}-{args.version}.json"
    out.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    agent = next(r for r in rec["requests"] if r["role"] == "agent")
    print(
        f"{out}: {len(rec['requests'])} requests, agent prompt {agent['prompt_tokens']} tokens, "
        f"{agent['tools']} tools"
    )


if __name__ == "__main__":
    main()
