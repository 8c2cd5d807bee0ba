"""The one place that knows what a secret looks like, and hides it wherever llmdeck shows or stores one.

Secrets: API keys (``--api-key X``, ``VLLM_API_KEY``, ``OPENAI_API_KEY``, ``apiKey`` in client
configs, Codex's ``experimental_bearer_token``, any ``sk-`` key of 16+ characters), Hugging Face
tokens (``HF_TOKEN``, ``hf_...``), ``Authorization`` headers and passwords in URLs
(``http://user:pass@host``). Every function returns a copy; nothing is changed in place.

Used by: the log header and the server record (runtime), ``status --json`` (its log tail), bench
result files (``target``), ``connect --json``, ``plan --spec-out`` and every ``--json`` output
(``llmdeck.cli.output.print_json``), and the ``docker run`` argv (``-e KEY`` without the value).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"

# vLLM flags whose value is a secret, and the variable that passes the same value through the
# environment instead of argv (vLLM reads VLLM_API_KEY when --api-key is not given; huggingface_hub
# reads HF_TOKEN).
SECRET_FLAGS: dict[str, str] = {"--api-key": "VLLM_API_KEY", "--hf-token": "HF_TOKEN"}
_SECRET_FLAG_RE = re.compile(r"^--[a-z0-9-]*(api-key|token|password|secret)$")
# Names of variables and config keys that hold secrets: *_API_KEY, apiKey, HF_TOKEN, *_PASSWORD …
# (after removing '_' and '-', lowercase). "max_tokens"/"tokenizer" are not secrets.
_SECRET_NAME_RE = re.compile(
    r"(apikey|accesstoken|authtoken|hftoken|hubtoken|bearertoken|password|passwd|secret|authorization|^token"
    r"|accesskey|secretkey|privatekey|sessiontoken|githubtoken|gitlabtoken|credentials)$"
)
# Placeholder values clients need when a server has no key: not secrets, kept as they are.
PLACEHOLDERS = frozenset({"", "EMPTY", "none", "None", "null", REDACTED})

# A word after a flag name or "api_key:" that is prose or a placeholder, not a value: "pass --api-key or
# set ...", "(--api-key / VLLM_API_KEY)", "api_key: the server answers 401", "--api-key KEY",
# "--api-key $KEY", "sk-llmdeck-…". Only these words of prose: any other word may be a (weak) key, and a
# key shown is worse than a hint that reads "<redacted>".
_PROSE = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "for",
        "from",
        "given",
        "if",
        "in",
        "is",
        "not",
        "of",
        "on",
        "or",
        "pass",
        "sent",
        "set",
        "the",
        "to",
        "when",
        "with",
        "header",
        "flag",
        "option",
        "value",
        # a check's verdict after its name: "api_key rejected (...)"
        "accepted",
        "failed",
        "invalid",
        "missing",
        "needed",
        "ok",
        "passed",
        "rejected",
        "required",
        "skipped",
        "wrong",
    ]
)
_NOT_A_VALUE = re.compile(r"[A-Z][A-Z_]*|[$<(/].*|.*(?:…|\.\.\.).*|[^A-Za-z0-9]*")


def looks_like_secret(value: str) -> bool:
    """True for a value that may be a real secret; False for a placeholder or a word of prose."""
    v = value.rstrip(".,;:)!?`]}")
    return v not in PLACEHOLDERS and v.lower() not in _PROSE and not _NOT_A_VALUE.fullmatch(v)


def _flag_value(m: re.Match[str]) -> str:
    """``--api-key X``: X hidden when given with '=' or quoted (always a value), or when it looks like one."""
    flag, sep, quote, value = m.group(1), m.group(2), m.group(3), m.group(4)
    bound = "=" in sep or bool(quote)
    if value in PLACEHOLDERS or value.startswith("$") or not (bound or looks_like_secret(value)):
        return m.group(0)
    return f"{flag}{sep}{quote}{REDACTED}{quote}"


def _named_value(m: re.Match[str]) -> str:
    """``KEY=X``, ``"apiKey": "X"``, ``'api_key': ['X']``: hidden; ``api_key: X`` only when X looks like
    a key."""
    head, sep, mid, quote, value = m.groups()
    if not (sep == "=" or quote or "[" in mid or looks_like_secret(value)):
        return m.group(0)
    return f"{head}{sep}{mid}{quote}{REDACTED}{quote}"


def _prose_value(m: re.Match[str]) -> str:
    """``API key sk-...`` in a sentence: the key hidden, "API key header" kept."""
    return m.group(1) + REDACTED if looks_like_secret(m.group(2)) else m.group(0)


_Repl = str | Callable[[re.Match[str]], str]
# every shorter spelling of a secret flag argparse takes, from five characters on (--api, --api-k, ...)
_ABBREVIATIONS = "|".join(re.escape(flag[2:n]) for flag in SECRET_FLAGS for n in range(len(flag) - 1, 4, -1))
_TEXT_PATTERNS: list[tuple[re.Pattern[str], _Repl]] = [
    # Authorization: Bearer X / Basic X (headers, curl lines, logged requests)
    (
        re.compile(r"(?i)\b(authorization\s*[:=]\s*[\"']?(?:bearer|basic|token)?\s*)[^\s\"',}]+"),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{4,}"), r"\1" + REDACTED),
    # --api-key X, --api-key=X, --hf-token X (argv inside text: log headers, ps lines). Tried only where a
    # run of flag characters starts (it holds a "--" and ends with the name): tried at every "--", a run of
    # 4,000 dashes took 0.3 s (every start scanned to the run's end)
    (
        re.compile(
            r"(?<![a-z0-9-])((?=[a-z0-9-]*?--)[a-z0-9-]*+(?:(?<=api-key)|(?<=token)|(?<=password)|(?<=secret)))"
            r"(\s+|=)(?!-)(['\"]?)([^\s'\"]+)\3"
        ),
        _flag_value,
    ),
    # argv as a list: ['--api-key', 'X'] (a Python repr, a failed subprocess's command), ["--api-key","X"]
    (
        re.compile(
            r"([\"']--[a-z0-9-]*(?:api-key|token|password|secret)[\"']\s*,\s*)([\"'])(?!<redacted>)[^\"']+\2"
        ),
        r"\1\2" + REDACTED + r"\2",
    ),
    # abbreviations argparse expands: --api-ke X, --hf-tok=X (each secret flag's prefixes from --api on)
    (
        re.compile(rf"(--(?:{_ABBREVIATIONS}))(\s+|=)(?!-)(['\"]?)([^\s'\"]+)\3"),
        _flag_value,
    ),
    # a token in a URL's query: ?token=X, &api_key=X, &key=X
    (re.compile(r"(?i)([?&](?:token|access_token|api_key|apikey|key)=)[^&\s\"']+"), r"\1" + REDACTED),
    # KEY=VALUE, "apiKey": "X", 'api_key': ['X'], api_key: X (env dumps, JSON, YAML, Python reprs); tried
    # where a name starts (leading dashes kept): tried at every word's start, 4,000 characters of "-a"
    # took 3 s
    (
        re.compile(
            r"(?i)([\"']?(?<![A-Za-z0-9_-])-*+\b[A-Za-z0-9_-]*(?:api[_-]?key|access[_-]?token|auth[_-]?token|hf[_-]?token|bearer[_-]?token|"
            r"password|passwd|secret)[\"']?\s*)([:=])(\s*\[?\s*)([\"']?)(?!none\b|null\b|EMPTY\b|<redacted>)"
            r"([^\s\"',\]}]+)\4"
        ),
        _named_value,
    ),
    # prose: "API key sk-...", "api key: X" (a client's or vLLM's own message)
    (re.compile(r"(?i)\b(api[ _-]?key\s*[:=]?\s+)([^\s\"',\]}]+)"), _prose_value),
    # Hugging Face tokens wherever they are
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), REDACTED),
    # OpenAI-style keys (llmdeck's own sk-llmdeck-..., sk-ant-..., sk-proj-...) wherever they are:
    # cline's `auth -k KEY`, a TOML line, a client's echo of its settings
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), REDACTED),
    # passwords in URLs: scheme://user:password@host; tried once a run (from its first word's start, as
    # before) where every word's start was tried: 4,000 characters of "-a" took 30 ms
    (
        re.compile(r"((?<![a-z0-9+.-])(?>[a-z0-9+.-]*?\b(?=[a-z]))[a-z][a-z0-9+.-]*://[^\s/:@]*:)[^\s/@]+@"),
        r"\1" + REDACTED + "@",
    ),
]


def is_secret_name(name: str) -> bool:
    """True for a variable or config key that holds a secret (``HF_TOKEN``, ``apiKey``, ``VLLM_API_KEY``)."""
    return bool(_SECRET_NAME_RE.search(name.replace("_", "").replace("-", "").lower()))


def secret_flag(flag: str) -> str | None:
    """The secret flag ``flag`` spells: itself, or the one it abbreviates as argparse reads it
    (``--api-ke`` is ``--api-key`` to vLLM); None for another flag."""
    if flag in SECRET_FLAGS:
        return flag
    whole = [f for f in SECRET_FLAGS if len(flag) >= 5 and f.startswith(flag)]
    return whole[0] if len(whole) == 1 else None


def is_secret_flag(flag: str) -> bool:
    """True for a command-line flag whose value is a secret (``--api-key``, ``--hf-token``, an
    abbreviation of one, ``--api``: ambiguous to vLLM, but its value may be the key all the same)."""
    if secret_flag(flag) or _SECRET_FLAG_RE.match(flag):
        return True
    return len(flag) >= 5 and any(f.startswith(flag) for f in SECRET_FLAGS)


def redact_url(url: str) -> str:
    """``http://user:pass@host:8000`` -> ``http://user:<redacted>@host:8000``, also without the scheme
    (``user:pass@proxy:3128``, as proxy variables are often set); other URLs unchanged."""
    if "@" in url and "://" not in url and not url.startswith("//"):
        return redact_url("//" + url)[2:]
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:{REDACTED}@{netloc[1]}"))


def redact_text(text: str) -> str:
    """Hide secrets in free text (a log, a command line, an error message)."""
    for pattern, repl in _TEXT_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def redact_argv(argv: Sequence[str]) -> list[str]:
    """An argv with the values of secret flags (``--api-key X``, ``--api-key=X``) and of
    ``KEY=VALUE`` secret assignments (``-e HF_TOKEN=X``) hidden."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, value = arg.partition("=")
        if flag.startswith("--") and is_secret_flag(flag):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        if eq and not flag.startswith("-") and is_secret_name(flag) and value not in PLACEHOLDERS:
            out.append(f"{flag}={REDACTED}")
            continue
        out.append(redact_text(arg))
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Variables with secret names keep their name, not their value."""
    return {k: (REDACTED if is_secret_name(k) and v not in PLACEHOLDERS else v) for k, v in env.items()}


def redact_data(data: Any) -> Any:
    """JSON-like data with secrets hidden: values of secret keys, argv-like string lists, every
    string (URL passwords, bearer tokens, ``KEY=VALUE`` secrets in text)."""
    if isinstance(data, Mapping):
        out: dict[Any, Any] = {}
        for key, value in data.items():
            if isinstance(key, str) and is_secret_name(key) and isinstance(value, str):
                out[key] = value if value in PLACEHOLDERS else REDACTED
            elif isinstance(key, str) and key == "env" and isinstance(value, Mapping):
                out[key] = redact_data(redact_env({str(k): str(v) for k, v in value.items()}))
            else:
                out[key] = redact_data(value)
        return out
    if isinstance(data, list | tuple):
        if data and all(isinstance(x, str) for x in data):
            return redact_argv(data)
        return [redact_data(x) for x in data]
    if isinstance(data, str):
        return redact_text(data)
    return data


def api_key_problem(key: str) -> str | None:
    """Why ``key`` cannot travel as ``Authorization: Bearer KEY`` (None when it can). An HTTP header
    carries ASCII only, and whitespace or a control character cuts the header or is refused by the
    client library; the reason never quotes the key."""
    if any(ord(c) > 126 for c in key):
        return "it has a character outside ASCII, which an HTTP header cannot carry"
    if any(ord(c) <= 32 or ord(c) == 127 for c in key):
        return "it has a space, a line break or another control character (often a copy-paste edge)"
    return None


def hide_key(value: Any, key: str) -> Any:
    """``value`` (JSON data) with ``key`` redacted in its strings, never in its structure (a key such as
    `null` or `0` had been replaced in the JSON text, which then did not parse): a string that is the
    key, a bearer token or an assignment of it, and, for a key of 8 characters or more, any string
    holding it."""
    if isinstance(value, dict):
        # a name in the structure (a provider called `vllm`) is hidden only when the key is a long one
        return {(hide_key(k, key) if len(key) >= 8 else k): hide_key(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [hide_key(v, key) for v in value]
    if not isinstance(value, str):
        return value
    if value == key:
        return "<redacted>"
    if len(key) >= 8:
        return value.replace(key, "<redacted>")
    import re

    # a short key after '=', ':' or a space (KEY=value, Bearer value), as a whole word only
    return re.sub(rf"(?<=[=: ]){re.escape(key)}(?=$|[\s\"',;])", "<redacted>", value)
