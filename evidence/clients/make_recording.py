"""Turn a recorder capture (JSON lines) into a client recording: src/llmdeck/checks/recordings/.

Keeps the client's model requests (chat completions, Anthropic Messages, Responses) as sent
(system prompt, tools, parameters), drops headers but the
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

from llmdeck.checks.surfaces import chat_view, surface_of

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "src" / "llmdeck" / "checks" / "recordings"

AI_SDK_STREAM = (
    "tool_calls deltas by index; the first delta of an index must carry id and function.name "
    "(else 'Expected 'id' to be a string.'), arguments are concatenated and JSON-parsed at the end"
)
READS: dict[str, dict[str, Any]] = {
    "claude-code": {
        "reasoning": [],
        "thinking": "thinking blocks (content_block_start type thinking / redacted_thinking, thinking_delta, "
        "signature_delta): shown as thinking and sent back in later turns; it asks thinking: adaptive",
        "tool_call_deltas": "tool_use content blocks (id, name), input streamed as input_json_delta "
        "partial_json, JSON-parsed at content_block_stop; results go back as tool_result blocks in a user "
        "message",
        "usage": [
            "message_start.message.usage.input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "message_delta.usage.output_tokens",
        ],
        "compaction": "auto-compacts near its context window: CLAUDE_CODE_MAX_CONTEXT_TOKENS, else 1M for "
        "a model it does not know (it prints that it assumes 1m; 2.1.197 assumed 200K); with the window set "
        "it refuses a prompt over it itself ('Prompt is too long', exit 1, nothing sent); sends max_tokens "
        "32000 (CLAUDE_CODE_MAX_OUTPUT_TOKENS lowers it)",
        "context_overflow": "prints 'Prompt is too long · the provider said: <the server's message>' and "
        "`claude -p` exits 1 after that one request, in about 0.5 s (no retry; measured with recorder.py "
        "--refuse-context; 2.1.197 printed 'API Error: 400 <the message>' in about 3 s)",
        "source": "claude-code 2.1.332 binary (stream events: thinking_delta, signature_delta, "
        "input_json_delta, redacted_thinking; CLAUDE_CODE_MAX_OUTPUT_TOKENS, CLAUDE_CODE_MAX_CONTEXT_TOKENS; "
        "deferred tools: ToolSearch, defer_loading, tool_reference); 2.1.197 also sent HEAD / twice first",
    },
    "codex": {
        "reasoning": [],
        "thinking": "reasoning output items (response.reasoning_summary_text.delta / reasoning_text); asks "
        "reasoning.summary auto and include reasoning.encrypted_content",
        "tool_call_deltas": "function_call output items from response.output_item.done (call_id, name, "
        "arguments as a JSON string); results go back as function_call_output items with the whole history "
        "(store: false) every turn",
        "usage": [
            "response.completed.response.usage.input_tokens",
            "input_tokens_details.cached_tokens",
            "output_tokens",
            "output_tokens_details.reasoning_tokens",
            "total_tokens",
        ],
        "compaction": "compacts against the model's context window (model_context_window in config.toml; "
        "fallback metadata for an unknown model); sends no max_output_tokens",
        "context_overflow": "prints 'ERROR: <the server's 400 body>' and `codex exec` exits 1 after that one "
        "request, in about 2 s (no retry; measured with recorder.py --refuse-context); a stream that ends "
        "without response.completed is retried ('stream disconnected before completion')",
        "source": "codex 0.171.0 binary (response.output_item.done, response.completed, "
        "response.reasoning_summary_text.delta, context_window_exceeded, 'exceeded retry limit')",
    },
    "opencode": {
        "reasoning": ["reasoning_content", "reasoning"],
        "tool_call_deltas": AI_SDK_STREAM,
        "compaction": "usable = limit.context - limit.output; compacts when the last reply's usage total "
        "reaches it (limit.output is also sent as max_tokens)",
        "context_overflow": "retries the refused request (HTTP 400) with backoff: the session hangs, "
        "nothing is shown",
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
        "context_overflow": "exits 1 after one HTTP 400, in about 4 s (no retry)",
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


SCRUB_KEYS = {"metadata", "client_metadata", "prompt_cache_key"}  # per-install ids, session ids


def _blank(value: Any) -> Any:
    """Per-install and session ids, with the shape kept (a server validates metadata's type)."""
    if isinstance(value, dict):
        return {k: "<recorded-id>" for k in value}
    return "<recorded-id>" if isinstance(value, str) else value


def _count(tok: Any, path: str, body: dict[str, Any]) -> int:
    messages, tools = chat_view(path, body)
    ids = tok.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return len(ids)


MODEL_PATHS = ("chat/completions", "messages", "responses")


def build(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(args.tokenizer))
    # Claude Code also names its memory folder after the work dir, with / and . as -
    slug = "".join("-" if c in "/." else c for c in str(args.workdir))
    subs = [(str(args.workdir), "/home/user/project"), (slug, "-home-user-project")]
    if args.home:
        subs.append((str(args.home), "/home/user"))
    requests: list[dict[str, Any]] = []
    for line in args.capture.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        body = entry.get("body")
        path = entry["path"]
        if str(entry["headers"].get("user-agent", "")).startswith("curl/"):
            continue  # record.sh's own readiness probe
        if not path.endswith(MODEL_PATHS) or not isinstance(body, dict):
            continue
        path = "/v1/" + next(p for p in MODEL_PATHS if path.endswith(p))
        body = {k: (_blank(v) if k in SCRUB_KEYS else v) for k, v in _scrub(body, subs).items()}
        requests.append(
            {
                "path": path,
                "query": entry.get("query") or None,
                "user_agent": entry["headers"].get("user-agent"),
                "prompt_tokens": _count(tok, path, body),
                "tools": len(body.get("tools") or []),
                "body": body,
            }
        )
    if not requests:
        raise SystemExit(f"{args.capture}: no model request recorded")
    entries = [json.loads(line) for line in args.capture.read_text(encoding="utf-8").splitlines()]
    others = sorted(
        {
            f"{e['method']} {e['path']}"
            for e in entries
            if not str(e["headers"].get("user-agent", "")).startswith("curl/")
        }
    )
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
        "surface": surface_of(requests[0]["path"]),
        "other_requests": [o for o in others if not o.endswith(MODEL_PATHS)],
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
