"""Parse the ``vllm serve`` flags a user passes after ``--``.

Accepts ``--flag value``, ``--flag=value``, bare booleans, ``--no-<flag>`` negations, vLLM's short
aliases (``-tp 2``, ``-q fp8``, ``-O3``); keeps the order so the flags can be rendered back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.errors import UsageError
from llmdeck.plan.flag_releases import flag_table
from llmdeck.plan.vllm_cli import (
    AUTO_MAX_MODEL_LEN,
    BOOLEAN_FLAGS,
    HUMAN_INT_FLAGS,
    JSON_FLAGS,
    KV_CACHE_DTYPES,
    MAMBA_DTYPES,
    MODEL_DTYPES,
    MULTI_VALUE_FLAGS,
    SHORT_ALIASES,
    paired_flag,
    parse_int_flag,
)
from llmdeck.util.jsonsafe import loads as _json_loads

# Whole-number flags vLLM refuses below 1 (argparse accepts them; the engine config dies on them).
POSITIVE_INT_FLAGS = (
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "data-parallel-size",
    "max-num-seqs",
    "max-num-batched-tokens",
    "max-model-len",
    "block-size",
    "mamba-block-size",  # vllm 0.22.0 config/cache.py:120 (gt=0)
)
_EXAMPLE_SIZES = {
    "max-num-batched-tokens": 2048,
    "max-model-len": 2048,
    "block-size": 16,
    "mamba-block-size": 256,
}
# Flags whose values vLLM takes from a fixed list (argparse or the engine config refuses the rest).
_MAMBA_HINT = "Use auto (from the checkpoint), float32 or bfloat16."
CHOICE_FLAGS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("dtype", MODEL_DTYPES, "Use auto (the checkpoint's dtype), bfloat16 or float16."),
    ("mamba-cache-dtype", MAMBA_DTYPES, _MAMBA_HINT),
    ("mamba-ssm-cache-dtype", MAMBA_DTYPES, _MAMBA_HINT),
    ("mamba-cache-mode", ("align", "all", "none"), "Use align or none (all: vLLM before 0.32 only)."),
    ("kv-cache-dtype", KV_CACHE_DTYPES, "Use auto (the model's dtype) or fp8; check the spelling against "
     "`vllm serve --help`."),
)  # fmt: skip
MAX_FLAG_INT = 1 << 40  # a bound far above any real setting; keeps the memory math in floats
# Flags llmdeck sets itself from the launch spec (never duplicated in vllm_args).
SPEC_FLAGS = frozenset({"host", "port", "served-model-name", "model"})


class VllmFlags(BaseModel):
    """Parsed flags: ``values`` maps flag name (no dashes prefix) to its value, in order."""

    values: dict[str, str | bool] = Field(default_factory=dict)
    more: dict[str, list[str]] = Field(
        default_factory=dict, description="the values after the first of a flag that takes several"
    )
    positional: list[str] = Field(default_factory=list)
    opposites: list[str] = Field(
        default_factory=list, description="vLLM >= 0.33's opposite spellings given (--disable-prefix-caching)"
    )

    def get(self, name: str) -> str | bool | None:
        return self.values.get(name)

    def has(self, name: str) -> bool:
        return name in self.values

    def get_int(self, name: str) -> int | None:
        value = self.values.get(name)
        if value is None or isinstance(value, bool):
            return None
        try:
            number = parse_int_flag(name, value)  # as vLLM's argparse reads it: 32k on the flags that take it
        except (ValueError, OverflowError) as exc:  # OverflowError: 1e999k is an infinite float
            human = " (or 32k, 32K)" if name in HUMAN_INT_FLAGS else ""
            why = f" ({exc})" if "suffix" in str(exc) else ""
            raise UsageError(
                f"--{name} needs a whole number{human}, got {value!r}{why}.",
                hint=f"Write e.g. --{name} 8192.",
            ) from exc
        if abs(number) > MAX_FLAG_INT:
            raise UsageError(
                f"--{name} {value} is out of range (at most {MAX_FLAG_INT:,}).",
                hint=f"Write e.g. --{name} 8192.",
            )
        return number

    def get_float(self, name: str) -> float | None:
        value = self.values.get(name)
        if value is None or isinstance(value, bool):
            return None
        try:
            return float(value)
        except ValueError as exc:
            raise UsageError(
                f"--{name} needs a number, got {value!r}.", hint=f"Write e.g. --{name} 0.85."
            ) from exc

    def check_values(self) -> None:
        """UsageError (exit 2) for a value vLLM refuses at start-up: a size below 1, an unknown
        value outside :data:`CHOICE_FLAGS`' lists, malformed JSON (so plan never passes a flag the engine
        dies on)."""
        for name in POSITIVE_INT_FLAGS:
            number = self.get_int(name)
            if number == AUTO_MAX_MODEL_LEN and name == "max-model-len":
                continue  # auto: vLLM fits the longest context memory holds
            if number is not None and number < 1:
                raise UsageError(
                    f"--{name} {self.values[name]} is out of range: vLLM needs a whole number of at least 1"
                    + (" (or auto, -1: the longest that fits)." if name == "max-model-len" else "."),
                    hint=f"Write e.g. --{name} {_EXAMPLE_SIZES.get(name, 1)}, or "
                    "leave it out for vLLM's default.",
                )
        port = self.get_int("port")
        if port is not None and not 1 <= port <= 65535:
            raise UsageError(
                f"--port {self.values['port']} is not a TCP port (1-65535).", hint="Write e.g. --port 8000."
            )
        for name, choices, hint in CHOICE_FLAGS:
            value = self.values.get(name)
            if isinstance(value, str) and value not in choices:
                raise UsageError(
                    f"--{name} {value!r} is not one of vLLM's choices ({', '.join(choices)}).", hint=hint
                )
        self.check_json()

    def check_json(self) -> None:
        """UsageError (exit 2) naming the first flag vLLM reads as JSON whose value is not JSON."""
        for name in JSON_FLAGS:
            value = self.values.get(name)
            if not isinstance(value, str):
                continue
            try:
                _json_loads(value)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"--{name} {value[:80]!r} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                    f"{exc.msg}); vLLM reads it as JSON and would stop before it starts.",
                    hint=f'Write it as JSON, quoted whole for the shell: --{name} \'{{"key": "value"}}\'.',
                ) from exc

    def check_model(self, model: str) -> None:
        """UsageError (exit 2) for a model named in the flags (``--model X`` or a positional) other than
        ``model``: llmdeck names the model itself, so such a flag would be dropped."""
        given = self.values.get("model")
        named = [*self.positional, *([given] if isinstance(given, str) else [])]
        for other in named:
            if other.rstrip("/") != model.rstrip("/"):
                flag = f"--model {other!r}" if other == given else repr(other)
                raise UsageError(
                    f"{flag} after `--` names another model than {model!r}; llmdeck passes its own "
                    "MODEL argument to vLLM, so this one would be dropped.",
                    hint="Give the model as llmdeck's own MODEL argument (`llmdeck plan MODEL`, "
                    "`llmdeck up --model MODEL`), not after `--`.",
                )

    def get_bool(self, name: str) -> bool | None:
        """True/False when set (``--x``, ``--no-x``, ``--x=false``), None when absent."""
        value = self.values.get(name)
        if value is None:
            return None
        if isinstance(value, bool):
            return value
        return value.strip().lower() not in {"0", "false", "no", "off"}

    def get_json(self, name: str) -> Any:
        value = self.values.get(name)
        if not isinstance(value, str):
            return None
        try:
            return _json_loads(value)
        except json.JSONDecodeError:
            return None

    def set(self, name: str, value: str | bool) -> None:
        self.values[name] = value
        self.more.pop(name, None)

    def remove(self, name: str) -> None:
        self.values.pop(name, None)
        self.more.pop(name, None)

    def to_argv(self, *, skip: frozenset[str] = frozenset()) -> list[str]:
        """Render the flags back to ``vllm serve`` argv (``--no-x`` for False booleans; no positionals)."""
        argv: list[str] = []
        for name, value in self.values.items():
            if name in skip:
                continue
            if value is True:
                argv.append(f"--{name}")
            elif value is False:
                argv.append(f"--no-{name}")
            else:
                argv.extend([f"--{name}", value, *self.more.get(name, [])])
        return argv


def _normalize(name: str) -> str:
    """The flag vLLM reads: underscores as dashes, and an unambiguous prefix as its whole flag
    (argparse's abbreviations: ``--max-model 4096`` is ``--max-model-len 4096`` to vLLM)."""
    name = name.strip().lstrip("-").replace("_", "-")
    table = flag_table()
    if not name or name in table.flags:
        return name
    return table.expand(name) or name


def parse_vllm_flags(args: list[str] | tuple[str, ...]) -> VllmFlags:
    """Parse ``vllm serve`` flags; raise UsageError (exit 2) for a value-less non-boolean flag."""
    flags = VllmFlags()
    tokens = list(args)
    if tokens and tokens[0] == "--":
        tokens = tokens[1:]
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    i = 0
    while i < len(tokens):
        i += _take(flags, tokens, i)
    if flags.positional and flags.has("model"):
        raise UsageError(
            "The vLLM flags name the model twice (a positional model and --model).",
            hint="Name the model once, as llmdeck plan's MODEL argument.",
        )
    return flags


def _take(flags: VllmFlags, tokens: list[str], i: int) -> int:
    """Read the flag at ``tokens[i]`` into ``flags``; how many tokens it used (1 or 2)."""
    tok = tokens[i]
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if tok in SHORT_ALIASES or tok.startswith("-O"):
        return _take_short(flags, tok, nxt)
    if not tok.startswith("--") or tok == "--":
        if tok != "--":
            _take_positional(flags, tok)
        return 1
    body = tok[2:]
    if "=" in body:
        _take_with_value(flags, tok, body)
        return 1
    name = _normalize(body)
    if name.startswith("no-") and name[3:] in BOOLEAN_FLAGS:
        flags.set(name[3:], False)
        return 1
    if paired_flag(name) is not None:  # vLLM 0.33+'s --disable-x for --no-enable-x (and the reverse)
        _set_opposite(flags, name, True)
        return 1
    if name.startswith("no-") and (paired := paired_flag(name[3:])) is not None:
        raise UsageError(
            f"{tok}: vLLM has no --no- form of --{name[3:]}, the opposite spelling of --{paired}.",
            hint=f"Write --{paired} to turn it on.",
        )
    if name in BOOLEAN_FLAGS:
        # argparse BooleanOptionalAction takes no value; accept an explicit true/false anyway
        if nxt is not None and nxt.lower() in {"true", "false"}:
            flags.set(name, nxt.lower() == "true")
            return 2
        flags.set(name, True)
        return 1
    if nxt is None or (nxt.startswith("--") and len(nxt) > 2):
        if _maybe_newer(name):  # as with a value: a warning for an unknown release, an error for a known
            flags.set(name, True)
            return 1
        raise _no_value(tok, name)
    flags.set(name, nxt)
    return 2 + _take_more(flags, name, tokens, i + 2)


def _maybe_newer(name: str) -> bool:
    """A flag no vLLM llmdeck knows has, that is no misspelling or start of one it knows: maybe a newer
    vLLM's boolean. Left to the lint rule ``flag-unknown``, which weighs it against the target release."""
    table = flag_table()
    return (
        name not in table.flags
        and not any(f.startswith(name) for f in table.flags)
        and table.nearest(name) is None
    )


def _no_value(tok: str, name: str) -> UsageError:
    """A flag with no value after it: a misspelt or ambiguous flag is named as such (a boolean flag
    misspelt read as 'has no value'), a real one is told to take its value."""
    table = flag_table()
    if name not in table.flags:
        several = sorted(f for f in table.flags if f.startswith(name))
        if len(several) > 1:
            return UsageError(
                f"{tok} is the start of {len(several)} vLLM flags ({', '.join(several[:3])}, ...); "
                "`vllm serve` stops with `ambiguous option`.",
                hint="Write the whole flag.",
            )
        near = table.nearest(name)
        return UsageError(
            f"No vLLM {table.releases[0]}-{table.releases[-1]} has a {tok} flag; `vllm serve` stops "
            "with `unrecognized arguments`.",
            hint=f"Did you mean --{near}?" if near else "Check the spelling against `vllm serve --help`.",
        )
    return UsageError(
        f"The vLLM flag {tok} has no value.",
        hint=f"Write {tok} VALUE (or {tok}=VALUE); boolean flags llmdeck knows take none.",
    )


def _set_opposite(flags: VllmFlags, name: str, on: bool) -> None:
    """``--disable-x`` (on) is ``--enable-x`` off: kept under the flag it pairs with, spelling noted."""
    flags.set(str(paired_flag(name)), not on)
    flags.opposites.append(name)


def _take_more(flags: VllmFlags, name: str, tokens: list[str], j: int) -> int:
    """The further values of a flag vLLM reads several of (``--cudagraph-capture-sizes 1 2 4``)."""
    if name not in MULTI_VALUE_FLAGS:
        return 0
    taken = 0
    while j + taken < len(tokens) and not tokens[j + taken].startswith("-"):
        flags.more.setdefault(name, []).append(tokens[j + taken])
        taken += 1
    return taken


def _take_short(flags: VllmFlags, tok: str, nxt: str | None) -> int:
    """A short alias (``-tp 2``, ``-ep``) or vLLM's ``-O3`` / ``-O 3`` / ``-O=3`` optimization level."""
    if tok.startswith("-O") and tok != "-O":
        flags.set("optimization-level", tok[3:] if tok[2] == "=" else tok[2:])
        return 1
    name = SHORT_ALIASES.get(tok, "optimization-level")
    if name in BOOLEAN_FLAGS:
        flags.set(name, True)
        return 1
    if nxt is None or nxt.startswith("--"):
        raise UsageError(f"The vLLM flag {tok} (--{name}) has no value.", hint=f"Write {tok} VALUE.")
    flags.set(name, nxt)
    return 2


def _take_positional(flags: VllmFlags, tok: str) -> None:
    """vLLM takes one positional argument, the model; anything else would vanish from the command."""
    if tok.startswith("-") and len(tok) > 1 and not tok[1:].replace(".", "", 1).isdigit():
        raise UsageError(
            f"llmdeck does not know the vLLM flag {tok!r}, so it cannot pass it on.",
            hint="Write the flag's long form (--name VALUE, as `vllm serve --help` lists it).",
        )
    if flags.positional:
        raise UsageError(
            f"{tok!r} in the vLLM flags is neither a flag nor a flag's value "
            f"(after {flags.positional[0]!r}).",
            hint="Give each value right after its --flag; quote a value that holds spaces.",
        )
    flags.positional.append(tok)


_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def _take_with_value(flags: VllmFlags, tok: str, body: str) -> None:
    """``--name=value``: a boolean flag reads the value as true/false; ``--no-x=...`` is an error."""
    name, value = body.split("=", 1)
    name = _normalize(name)
    if name.startswith("no-") and name[3:] in BOOLEAN_FLAGS:
        raise UsageError(f"{tok}: a --no- flag takes no value.", hint=f"Write --{name} alone.")
    paired = paired_flag(name)
    if name in BOOLEAN_FLAGS or paired is not None:
        word = value.strip().lower()
        if word not in _TRUE_WORDS | _FALSE_WORDS:
            off = f"--{paired}" if paired is not None else f"--no-{name}"
            raise UsageError(
                f"{tok}: {value!r} is not true or false, and --{name} is an on/off flag.",
                hint=f"Write --{name} to turn it on, {off} to turn it off.",
            )
        if paired is not None:
            _set_opposite(flags, name, word in _TRUE_WORDS)
        else:
            flags.set(name, word in _TRUE_WORDS)
    else:
        flags.set(name, value)
