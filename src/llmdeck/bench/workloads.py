"""Workloads: what each request sends.

* ``random``: prompts of an exact token length, built like vLLM's RandomDataset (token ids from the
  vocabulary minus special tokens, decode -> re-encode -> trim/extend until the length holds),
  lengths spread uniformly by ``range_ratio``.
* ``shared-prefix``: one fixed prefix of ``prefix_len`` tokens (an agent's system prompt) + a
  different suffix of ``input_len`` tokens per request: the prefix-cache case.
* ``multi-turn``: chat sessions of ``num_turns`` turns; each turn appends a user message of
  ``input_len`` tokens and the model's reply, so the context grows.
* ``agent-sessions``: both at once, a coding agent's traffic: ``multi-turn`` sessions that all open
  with the same system prompt of ``prefix_len`` tokens, so the prefix cache sees the shared prefix
  across sessions and each session's growing history across its turns.
* ``jsonl``: one request per line: ``{"prompt": "..."}`` or ``{"messages": [...]}``, optional
  ``"max_tokens"``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmdeck.bench.result_schema import ScenarioSpec
from llmdeck.errors import ConfigError, ModelPathError, UsageError
from llmdeck.util.jsonsafe import loads as _json_loads
from llmdeck.util.localfile import FileTooLargeError, read_regular


@dataclass
class WorkItem:
    index: int
    output_len: int
    prompt: str | None = None  # completions
    messages: list[dict[str, Any]] | None = None  # chat (fixed)
    user_text: str | None = None  # multi-turn: the user message of this turn
    system_text: str | None = None  # agent-sessions: the system prompt every session opens with
    prompt_len: int = 0
    session: int | None = None
    turn: int | None = None


# Files one of which a folder needs for transformers to load a tokenizer from it.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "tekken.json",
)


def _one_line(exc: Exception) -> str:
    """What went wrong, on one line (transformers' messages span several), without a Python type."""
    return " ".join(str(exc).split())[:200] or "it could not be read"


def load_tokenizer(path_or_id: str | Path) -> Any:
    """``transformers.AutoTokenizer`` from a model folder (or a local hub cache id)."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - transformers comes with the cpu extra
        raise UsageError(
            "Building exact-length prompts needs the `transformers` package, which is not installed.",
            hint="Install llmdeck with the cpu extra, or use `--workload jsonl`.",
        ) from exc
    p = check_tokenizer_path(path_or_id)
    try:
        return AutoTokenizer.from_pretrained(str(p) if p.exists() else str(path_or_id), local_files_only=True)
    except Exception as exc:
        raise ModelPathError(
            f"Cannot load a tokenizer from {str(path_or_id)!r} ({_one_line(exc)}).",
            hint="Pass --tokenizer with the served model's folder (the one holding tokenizer.json).",
        ) from exc


def check_tokenizer_path(path_or_id: str | Path) -> Path:
    """The tokenizer's folder as a path; ModelPathError (exit 2) for a path that is no tokenizer folder
    (missing, a file, a pipe, a folder without tokenizer files). Nothing is loaded: bench runs it
    before it asks the server anything."""
    p = Path(path_or_id).expanduser()
    if not p.exists() and (p.is_absolute() or str(path_or_id).startswith((".", "~"))):
        raise ModelPathError(
            f"The tokenizer folder {p} does not exist.",
            hint="Pass --tokenizer with the served model's folder (the one holding tokenizer.json).",
        )
    if p.exists() and not p.is_dir():
        raise ModelPathError(
            f"The tokenizer path {p} is not a folder.",
            hint="Pass --tokenizer with the served model's folder (the one holding tokenizer.json).",
        )
    if p.is_dir() and not any((p / name).is_file() for name in TOKENIZER_FILES):
        raise ModelPathError(
            f"{p} has no tokenizer files (none of {', '.join(TOKENIZER_FILES)}), so bench cannot build "
            "prompts of exact length from it.",
            hint="Pass --tokenizer with the served model's folder (the one holding tokenizer.json), or "
            "download the tokenizer files into it.",
        )
    return p


class PromptMaker:
    """Exact-length random text, reproducible from a seed (vLLM's RandomDataset procedure)."""

    def __init__(self, tokenizer: Any, seed: int = 0) -> None:
        self.tok = tokenizer
        self.rng = np.random.default_rng(seed)
        vocab = int(tokenizer.vocab_size)
        special = set(int(i) for i in (tokenizer.all_special_ids or []))
        self.allowed = np.array([i for i in range(vocab) if i not in special], dtype=np.int64)
        self.vocab = vocab
        if len(self.allowed) == 0:
            raise ModelPathError(
                f"The tokenizer has no ordinary tokens (vocab_size {vocab}), so bench cannot build prompts.",
                hint="Pass --tokenizer with the served model's folder (the one holding tokenizer.json).",
            )

    def fit(self, ids: list[int], target: int, max_retry: int = 10) -> tuple[str, int]:
        """decode -> re-encode -> trim/extend until the text encodes to ``target`` tokens."""
        tries = max_retry
        while True:
            text: str = self.tok.decode(ids)
            ids = list(self.tok.encode(text, add_special_tokens=False))
            if len(ids) == target or tries <= 0:
                return text, len(ids)
            if len(ids) < target:
                ids.extend(
                    int(x) for x in self.allowed[self.rng.integers(0, len(self.allowed), target - len(ids))]
                )
            else:
                ids = ids[:target]
            tries -= 1

    def ids(self, n: int, offset: int) -> list[int]:
        a = self.allowed
        return [int(x) for x in a[(offset + np.arange(n)) % len(a)]]

    def text(self, n: int, offset: int | None = None, prefix: list[int] | None = None) -> tuple[str, int]:
        off = int(self.rng.integers(0, self.vocab)) if offset is None else offset
        pre = prefix or []
        return self.fit(pre + self.ids(n, off), len(pre) + n)


def sample_lengths(spec: ScenarioSpec, n: int, rng: np.random.Generator) -> tuple[list[int], list[int]]:
    r = spec.range_ratio
    in_lo, in_hi = math.floor(spec.input_len * (1 - r)), math.ceil(spec.input_len * (1 + r))
    out_lo, out_hi = (
        max(1, math.floor(spec.output_len * (1 - r))),
        max(1, math.ceil(spec.output_len * (1 + r))),
    )
    ins = rng.integers(max(1, in_lo), max(1, in_hi) + 1, size=n)
    outs = rng.integers(out_lo, out_hi + 1, size=n)
    return [int(x) for x in ins], [int(x) for x in outs]


def build_workload(spec: ScenarioSpec, tokenizer: Any | None, count: int | None = None) -> list[WorkItem]:
    """The requests of a scenario (``count`` defaults to ``spec.num_prompts``)."""
    n = count if count is not None else spec.num_prompts
    if spec.workload == "jsonl":
        return _jsonl(spec, tokenizer, n)
    if tokenizer is None and spec.workload == "random":
        return _approximate(spec, n)
    if tokenizer is None:
        raise UsageError(
            f"The {spec.workload!r} workload needs the served model's tokenizer to build prompts of exact "
            "token length, and none is known.",
            hint="Pass --tokenizer PATH (the model folder), or bench a server started by llmdeck.",
        )
    maker = PromptMaker(tokenizer, spec.seed)
    ins, outs = sample_lengths(spec, n, maker.rng)
    offsets = maker.rng.integers(0, maker.vocab, size=n)
    items: list[WorkItem] = []
    if spec.workload == "random":
        for i in range(n):
            text, plen = maker.fit(maker.ids(ins[i], int(offsets[i]) + i), ins[i])
            items.append(WorkItem(index=i, output_len=outs[i], prompt_len=plen, **_as(spec, text)))
    elif spec.workload == "shared-prefix":
        prefix_text, plen_prefix = maker.text(spec.prefix_len) if spec.prefix_len else ("", 0)
        prefix_ids = list(tokenizer.encode(prefix_text, add_special_tokens=False)) if prefix_text else []
        for i in range(n):
            if spec.endpoint == "chat":
                suffix, slen = maker.fit(maker.ids(ins[i], int(offsets[i]) + i), ins[i])
                msgs = [{"role": "system", "content": prefix_text}, {"role": "user", "content": suffix}]
                items.append(
                    WorkItem(index=i, output_len=outs[i], messages=msgs, prompt_len=plen_prefix + slen)
                )
            else:
                text, plen = maker.fit(
                    prefix_ids + maker.ids(ins[i], int(offsets[i]) + i), len(prefix_ids) + ins[i]
                )
                items.append(WorkItem(index=i, output_len=outs[i], prompt=text, prompt_len=plen))
    elif spec.workload in ("multi-turn", "agent-sessions"):
        system = None
        if spec.workload == "agent-sessions" and spec.prefix_len:
            system = maker.text(spec.prefix_len)[0]
        turns = spec.num_turns
        for i in range(n):
            text, plen = maker.fit(maker.ids(ins[i], int(offsets[i]) + i), ins[i])
            items.append(
                WorkItem(
                    index=i,
                    output_len=outs[i],
                    user_text=text,
                    system_text=system,
                    prompt_len=plen,
                    session=i // turns,
                    turn=i % turns,
                )
            )
    return items


class SessionHistory:
    """The messages of one chat session (multi-turn, agent-sessions): the system prompt when the
    workload has one, then each turn's user message and the model's reply; every request sends all
    of it, so a turn's prompt starts with the previous turn's whole conversation."""

    def __init__(self, system_text: str | None = None) -> None:
        self.messages: list[dict[str, Any]] = []
        if system_text:
            self.messages.append({"role": "system", "content": system_text})

    def ask(self, item: WorkItem) -> list[dict[str, Any]]:
        """Append this turn's user message; the messages to send (a copy)."""
        self.messages.append({"role": "user", "content": item.user_text or ""})
        return list(self.messages)

    def reply(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})


_WORDS = "the of and to in is that for it as with was on be by at this from or an are not".split()  # noqa: SIM905


def _approximate(spec: ScenarioSpec, n: int) -> list[WorkItem]:
    """Without a tokenizer: common one-token words (length approximate; ``prompt_len`` 0 = unknown,
    the server's usage.prompt_tokens is used instead)."""
    rng = np.random.default_rng(spec.seed)
    ins, outs = sample_lengths(spec, n, rng)
    items = []
    for i in range(n):
        words = [_WORDS[(i + k * 7) % len(_WORDS)] for k in range(ins[i])]
        items.append(WorkItem(index=i, output_len=outs[i], prompt_len=0, **_as(spec, " ".join(words))))
    return items


def _as(spec: ScenarioSpec, text: str) -> dict[str, Any]:
    if spec.endpoint == "chat":
        return {"messages": [{"role": "user", "content": text}]}
    return {"prompt": text}


def _check_row(row: dict[str, Any], where: str) -> None:
    """A prompt line's fields have the types the requests need (exit 2 naming the line otherwise)."""
    out = row.get("max_tokens") or row.get("output_len")
    if out is not None and (not isinstance(out, int) or isinstance(out, bool) or out < 1):
        raise ConfigError(
            f"{where}: max_tokens/output_len {out!r} is not a positive whole number.",
            hint='Write e.g. "max_tokens": 256, or leave it out.',
        )
    msgs = row.get("messages")
    if "messages" not in row:  # a prompt that is no text had been sent as str() of it: "5", "None", "[1, 2]"
        prompt = row.get("prompt")
        if not (isinstance(prompt, str) and prompt.strip()):
            raise ConfigError(
                f'{where}: "prompt" is {json.dumps(prompt)[:60]}, not text to send.',
                hint='Write "prompt": "your text", or "messages": [{"role": "user", "content": "..."}].',
            )
    elif not (isinstance(msgs, list) and msgs and all(isinstance(m, dict) for m in msgs)) or not all(
        isinstance(m.get("role"), str) for m in msgs
    ):  # an empty list or a message without a role: the server refuses every request with HTTP 400
        raise ConfigError(
            f'{where}: "messages" is not a list of messages (objects, each with a "role").',
            hint='Write "messages": [{"role": "user", "content": "..."}].',
        )
    else:
        _check_contents(msgs, where)


def _check_contents(msgs: list[dict[str, Any]], where: str) -> None:
    """Each message's "content" is text or a list of parts: vLLM refuses every request whose content is
    a number or null (HTTP 400), and a message other than the assistant's with none at all is no OpenAI
    request (vLLM sends it as empty text). Only an assistant's may be left out or null (a tool call)."""
    for i, m in enumerate(msgs, 1):
        content, role = m.get("content"), m["role"]
        if isinstance(content, str | list) or (role == "assistant" and content is None):
            continue
        who = f'message {i} ("role": {json.dumps(role)[:40]})'
        said = "no" if "content" not in m else f"{json.dumps(content)[:60]} for its"
        raise ConfigError(
            f'{where}: {who} has {said} "content", not text or a list of parts.',
            hint='Write {"role": "user", "content": "your text"} (only an assistant\'s may go without).',
        )


MAX_PROMPTS_BYTES = 256 << 20  # 256 MiB of prompts: each line is held as a parsed object for the run
PROMPTS_HINT = 'Pass --prompts FILE.jsonl with one {"prompt": "..."} or {"messages": [...]} per line.'


def read_prompt_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a --prompts JSONL file, checked; ConfigError (exit 2) naming the file and line.
    (`tune` reads them up front too, so a bad file is refused before any server starts.) A path that
    is no regular file (missing, a folder, a pipe, a device) is a UsageError, never read."""
    if not Path(path).is_file():
        raise UsageError(f"--prompts {path} is not a file.", hint=PROMPTS_HINT)
    rows: list[dict[str, Any]] = []
    try:  # bounded, and never opened blocking: a pipe put there after the check is not waited on
        text = read_regular(Path(path), MAX_PROMPTS_BYTES).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not a UTF-8 text file ({exc.reason} at byte {exc.start}).",
            hint='Pass a JSONL file: one {"prompt": "..."} per line.',
        ) from exc
    except OSError as exc:  # too large (had been read whole), no longer a file, unreadable
        raise UsageError(
            f"--prompts {path} cannot be read ({exc.strerror or 'an I/O error'}).",
            hint="Keep the prompts the run needs (e.g. `head -n 10000 FILE > fewer.jsonl`)."
            if isinstance(exc, FileTooLargeError)
            else PROMPTS_HINT,
        ) from exc
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = _json_loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}:{lineno} is not JSON ({exc.msg}).", hint="Write one JSON object per line."
            ) from exc
        if not isinstance(row, dict) or not ("prompt" in row or "messages" in row):
            raise ConfigError(
                f'{path}:{lineno} has neither "prompt" nor "messages".',
                hint='Each line must be {"prompt": ".."} or {"messages": [{"role": "user", "content": ..}]}.',
            )
        _check_row(row, f"{path}:{lineno}")
        rows.append(row)
    if not rows:
        raise ConfigError(f"{path} holds no prompts.", hint="Add at least one JSON line.")
    return rows


def _jsonl(spec: ScenarioSpec, tokenizer: Any | None, n: int) -> list[WorkItem]:
    path = spec.jsonl_path
    if path is None or not Path(path).is_file():
        raise UsageError(
            f"The jsonl workload needs a prompt file; {str(path)!r} is not a file.",
            hint='Pass --prompts FILE.jsonl with one {"prompt": "..."} or {"messages": [...]} per line.',
        )
    rows = read_prompt_rows(Path(path))
    items: list[WorkItem] = []
    for i in range(n):
        row = rows[i % len(rows)]
        out = int(row.get("max_tokens") or row.get("output_len") or spec.output_len)
        if "messages" in row:
            msgs = row["messages"]
            items.append(WorkItem(index=i, output_len=out, messages=msgs))
        else:
            prompt = str(row["prompt"])
            plen = len(tokenizer.encode(prompt, add_special_tokens=False)) if tokenizer is not None else 0
            if spec.endpoint == "chat":
                items.append(
                    WorkItem(
                        index=i,
                        output_len=out,
                        messages=[{"role": "user", "content": prompt}],
                        prompt_len=plen,
                    )
                )
            else:
                items.append(WorkItem(index=i, output_len=out, prompt=prompt, prompt_len=plen))
    return items
