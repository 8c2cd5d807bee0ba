"""Which probes each client needs, and which parsers suit which model family."""

from __future__ import annotations

from llmdeck.errors import UsageError

CLIENTS: tuple[str, ...] = (
    "opencode",
    "openclaw",
    "continue",
    "cline",
    "aider",
    "claude-code",
    "codex",
    "openai",
)

_CORE = frozenset({"health", "api_key", "models", "chat", "streaming_usage"})
_AGENT = _CORE | {
    "tool_auto",
    "tool_named",
    "tool_parallel",
    "tool_result",
    "reasoning_split",
    "long_context",
}

# Coding agents (opencode, openclaw, cline) drive everything through tool calls and read
# `content` plus the reasoning field; Continue also autocompletes through /v1/completions.
REQUIRED: dict[str, frozenset[str]] = {
    "opencode": _AGENT,
    "openclaw": _AGENT,
    "cline": _AGENT,
    "continue": _CORE | {"completions", "reasoning_split"},
    "aider": _CORE,  # no tools: a whole-file edit format, streamed
    # Claude Code speaks only /v1/messages, Codex only /v1/responses: their surface probes
    # (client_probes) decide; the chat-completions probes are shown, not required
    "claude-code": frozenset({"health", "api_key", "models"}),
    "codex": frozenset({"health", "api_key", "models"}),
    "openai": _CORE,
}

AGENT_CLIENTS = frozenset({"opencode", "openclaw", "cline"})


def validate_client(client: str | None) -> str | None:
    if client is None:
        return None
    name = client.strip().lower()
    if name not in CLIENTS:
        raise UsageError(
            f"Unknown client {client!r}.",
            hint=f"Use one of: {', '.join(CLIENTS)}.",
        )
    return name


def required_probes(client: str | None) -> frozenset[str]:
    """The probes that must pass for ``client``; no client means the plain OpenAI API (core)."""
    return REQUIRED[client] if client else REQUIRED["openai"]


def suggest_parsers(*names: str | None) -> tuple[str | None, str | None]:
    """(tool parser, reasoning parser) for a model family, from its served name or path.

    Sources: vLLM's tool-calling docs and llmdeck's vllm-facts (Qwen3.5/3.6 and Qwen3-Coder need
    `qwen3_coder`; `hermes` leaves opencode silent there — seed 004; original Qwen3 uses hermes).
    """
    text = " ".join(n for n in names if n).lower().replace("_", ".")
    if not text:
        return None, None
    if "qwen3" in text and "coder" in text:
        return "qwen3_coder", None
    if any(k in text for k in ("qwen3.5", "qwen3.6", "qwen3-5", "qwen3-6", "qwen35", "qwen36")):
        return "qwen3_coder", "qwen3"
    if "qwq" in text:
        return "hermes", "deepseek_r1"
    if "qwen3" in text:
        return "hermes", "qwen3"
    if "qwen2.5" in text or "qwen2" in text:
        return "hermes", None
    if "gpt-oss" in text:
        return "openai", "openai_gptoss"
    if "llama-4" in text or "llama4" in text:
        return "llama4_pythonic", None
    if "llama-3" in text or "llama3" in text:
        return "llama3_json", None
    if "mistral" in text or "devstral" in text:
        return "mistral", None
    if "deepseek-r1" in text:
        return None, "deepseek_r1"
    if "glm-4.5" in text or "glm-4.6" in text or "glm-4.7" in text:
        return "glm45", "glm45"
    return None, None
