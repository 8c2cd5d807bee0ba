"""Before `connect` writes, or `launch` starts, Claude Code or Codex: does the server take the request
shape that client sends on every turn?

Measured on the H200 (evidence/device/agents-clients/): vLLM 0.22.0's Messages API refuses Claude Code's
mid-conversation system message (HTTP 400 "Input should be 'user' or 'assistant'"), so the real
`claude -p` exits 1 on its first turn; through `llmdeck gateway` with `messages: {fold_system: true}`
it exits 0. Codex speaks only the Responses API: a server without ``/v1/responses`` fails it at once.
One small request each (a few tokens) tells, and the user gets the fix instead of the client's error.
Anything but a definite refusal (a timeout, another error) lets the launch go on: `check --client`
gives the whole picture.
"""

from __future__ import annotations

from typing import Any

import httpx

from llmdeck.checks.http import Http
from llmdeck.checks.probes_surfaces import SYSTEM_WORDS
from llmdeck.connect.configs import ServeInfo
from llmdeck.errors import LlmdeckError, OperationError

ROLE_REFUSAL = "'user' or 'assistant'"  # vLLM 0.22.0's pydantic message for a system role in `messages`
FOLD = "put `llmdeck gateway` in front with `messages: {fold_system: true}` on the route"


def _ask(info: ServeInfo, path: str, body: dict[str, Any], timeout: float) -> tuple[int, str] | None:
    http = Http(info.base_url, info.api_key, timeout=timeout)
    try:
        reply = http.request("POST", path, body)
    except (httpx.HTTPError, LlmdeckError):  # unreachable, cut off, too slow: not a refusal
        return None
    finally:
        http.close()
    return reply.status_code, reply.error_message() if not reply.ok else ""


def claude_system_refusal(info: ServeInfo, timeout: float) -> str | None:
    """Why the server refuses Claude Code's second system message; None when it takes it."""
    body = {
        "model": info.model,
        "max_tokens": 1,
        "system": "You are a coding agent.",
        "messages": [
            {"role": "user", "content": "Hello."},
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Say hi."},
        ],
    }
    got = _ask(info, "/v1/messages?beta=true", body, timeout)
    if got is None or got[0] != 400:
        return None
    status, message = got
    if ROLE_REFUSAL in message:
        return (
            f"this server's Messages API takes no system role in `messages` (HTTP {status}: "
            f"{message[:160]}); vLLM 0.32 takes it, 0.22 does not"
        )
    if any(w in message.lower() for w in SYSTEM_WORDS):  # the check's own words
        return f"the model's chat template refuses a system message mid-conversation (HTTP {status})"
    return None


def codex_responses_missing(info: ServeInfo, timeout: float) -> str | None:
    """Why the server cannot take Codex's Responses requests; None when /v1/responses answers."""
    body = {"model": info.model, "input": "Say hi.", "max_output_tokens": 1, "store": False}
    got = _ask(info, "/v1/responses", body, timeout)
    if got is None or got[0] not in (404, 405):
        return None
    return f"it has no /v1/responses (HTTP {got[0]}); Codex speaks only the Responses API"


def check_client_surface(client: str, info: ServeInfo, timeout: float = 60.0) -> None:
    """Raise OperationError (exit 1) when ``info``'s server refuses what ``client`` sends every turn."""
    if client == "claude-code" and (why := claude_system_refusal(info, timeout)):
        raise OperationError(
            f"{info.base_url} refuses Claude Code's requests: {why}. Claude Code sends a second system "
            "message on its first turn and would exit with an API error; no configuration was written.",
            hint=f"Upgrade vLLM (0.32 takes it), or {FOLD} and point Claude Code at the gateway "
            "(`llmdeck launch claude-code gateway --model ALIAS`); `llmdeck check --client claude-code` "
            "shows every finding.",
        )
    if client == "codex" and (why := codex_responses_missing(info, timeout)):
        raise OperationError(
            f"{info.base_url} cannot serve Codex: {why}; no configuration was written.",
            hint="Serve the model with vLLM (it serves /v1/responses), or through `llmdeck gateway` in "
            "front of a vLLM backend; `llmdeck check --client codex` shows every finding.",
        )
