"""Why did the vLLM server die? Match its log against a knowledge base of real failures.

The rules live in ``data/vllm_failures.yaml`` (id, regex, cause, fix, evidence); each one was seen in
a real log, and each has a test against that log. :func:`diagnose` returns the matching rules, the
fatal ones first; :func:`log_tail` gives the part of an unknown failure worth printing (the root
traceback, not the wrapper that says "see root cause above").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck.errors import ConfigError
from llmdeck.plan.versions import VersionRange
from llmdeck.runtime.phases import parse_line

Severity = Literal["fatal", "warning"]

_FRAME = re.compile(r'^\s*File "[^"]+", line \d+')


class Rule(BaseModel):
    """One known failure (an entry of vllm_failures.yaml)."""

    id: str
    title: str
    pattern: str
    severity: Severity = "fatal"
    generic: bool = False
    fallback: bool = Field(False, description="Reported only when no other fatal rule matched")
    cause: str
    fix: str
    evidence: str
    vllm: VersionRange = Field(
        default_factory=VersionRange, description="The vLLM releases the message exists in (default: all)."
    )

    def compiled(self) -> re.Pattern[str]:
        return _compile(self.pattern)


class Diagnosis(BaseModel):
    """A rule that matched the log, with its cause and fix filled in from the log's numbers."""

    rule_id: str
    title: str
    severity: Severity
    cause: str
    fix: str
    evidence: str
    matched_line: str = Field(description="The log line that matched (without the vLLM prefix)")
    line_number: int = Field(description="1-based line number in the log")
    values: dict[str, str] = Field(default_factory=dict, description="Named values the regex captured")
    vllm_versions: str = Field("all vLLM versions", description="The releases the rule holds for.")

    def render(self) -> str:
        holds = "" if self.vllm_versions == "all vLLM versions" else f" (holds for {self.vllm_versions})"
        return f"{self.title}{holds}: {self.cause}\nFix: {self.fix}"


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=1)
def load_rules() -> tuple[Rule, ...]:
    """The knowledge base shipped with llmdeck."""
    import yaml

    text = resources.files("llmdeck.runtime").joinpath("data/vllm_failures.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    try:
        rules = tuple(Rule.model_validate(r) for r in data["rules"])
    except (KeyError, TypeError, ValueError) as exc:  # pragma: no cover - shipped data is tested
        raise ConfigError(f"The diagnosis knowledge base is invalid: {exc}") from exc
    for rule in rules:
        rule.compiled()
    return rules


# Values computed from what a rule captured (for fixes that need arithmetic).
def _mamba_values(v: dict[str, str]) -> dict[str, str]:
    block = int(v["block"])
    return {"block_x2": str(2 * block)}


def _free_mem_values(v: dict[str, str]) -> dict[str, str]:
    free, total = float(v["free"]), float(v["total"])
    fit = math.floor((free / total) * 100 - 1) / 100 if total > 0 else 0.0
    return {"util_fit": f"{max(fit, 0.01):.2f}"}


def _addr_values(v: dict[str, str]) -> dict[str, str]:
    return {"addr_text": f" ({v['addr']})" if v.get("addr") else ""}


def _kv_values(v: dict[str, str]) -> dict[str, str]:
    return {"est": v.get("est") or "a smaller value"}


_DERIVED: dict[str, Callable[[dict[str, str]], dict[str, str]]] = {
    "mamba-align-block-size": _mamba_values,
    "free-memory-below-utilization": _free_mem_values,
    "address-in-use": _addr_values,
    "kv-cache-below-max-seq-len": _kv_values,
}


class _SafeDict(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format_map(_SafeDict(values)).strip()


_Hit = tuple[Severity, int, str, dict[str, str]]  # (best severity, line number, message, values)


def diagnose(log_text: str, *, rules: tuple[Rule, ...] | None = None) -> list[Diagnosis]:
    """Every known failure found in ``log_text``: fatal first, then in log order; one per rule.

    A match seen only in WARNING/INFO lines is reported as a warning (the server may still run).
    A generic rule is dropped when a specific rule matched the same line; a fallback rule when
    any other rule found a fatal cause.
    """
    rules = rules if rules is not None else load_rules()
    by_id = {r.id: r for r in rules}
    out = [_diagnosis(by_id[rule_id], hit) for rule_id, hit in _scan(log_text, rules).items()]
    # a fallback rule (e.g. "the engine died") says nothing new next to a specific fatal cause
    if any(d.severity == "fatal" and not by_id[d.rule_id].fallback for d in out):
        out = [d for d in out if not by_id[d.rule_id].fallback]
    out.sort(key=lambda d: (d.severity != "fatal", d.line_number))
    return out


def _scan(log_text: str, rules: tuple[Rule, ...]) -> dict[str, _Hit]:
    """Rule id -> its best hit; generic rules only on lines no specific rule matched."""
    found: dict[str, _Hit] = {}
    specific_lines: set[int] = set()
    generic_hits: list[tuple[Rule, _Hit]] = []
    after_frame = False
    for lineno, raw in enumerate(log_text.splitlines(), 1):
        if not raw:
            continue
        line = parse_line(raw)
        msg = line.message
        # a traceback's source line (after `File "...", line N, in f`) quotes code, not what happened
        is_source, after_frame = after_frame, bool(_FRAME.match(msg))
        if is_source:
            continue
        for rule in rules:
            m = rule.compiled().search(msg)
            if not m:
                continue
            sev: Severity = rule.severity
            if line.level in {"WARNING", "INFO", "DEBUG"}:
                sev = "warning"
            hit: _Hit = (sev, lineno, msg, {k: v for k, v in m.groupdict().items() if v is not None})
            if rule.generic:
                generic_hits.append((rule, hit))
                continue
            specific_lines.add(lineno)
            _keep_best(found, rule.id, hit)
    for rule, hit in generic_hits:
        if hit[1] not in specific_lines:
            _keep_best(found, rule.id, hit)
    return found


def _keep_best(found: dict[str, _Hit], rule_id: str, hit: _Hit) -> None:
    """The first hit of a rule, unless a later one is fatal where the first was only a warning."""
    prev = found.get(rule_id)
    if prev is None or (prev[0] == "warning" and hit[0] == "fatal"):
        found[rule_id] = hit


def _diagnosis(rule: Rule, hit: _Hit) -> Diagnosis:
    sev, lineno, msg, values = hit
    all_values = dict(values)
    if rule.id in _DERIVED:
        all_values.update(_DERIVED[rule.id](values))
    return Diagnosis(
        rule_id=rule.id,
        title=rule.title,
        severity=sev,
        cause=_fill(rule.cause, all_values),
        fix=_fill(rule.fix, all_values),
        evidence=rule.evidence.strip(),
        matched_line=msg.strip()[:500],
        line_number=lineno,
        values=values,
        vllm_versions=rule.vllm.describe(),
    )


# ---- the tail of an unknown failure ---------------------------------------------------------

_TB_START = re.compile(r"^\s*Traceback \(most recent call last\):")
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|$)")
_WRAPPER = re.compile(
    r"Engine core initialization failed|See root cause above|EngineDeadError|"
    r"During handling of the above exception|The above exception was the direct cause"
)
_NOISE = re.compile(r"^\s*\^+\s*$|^\s*~+\^*~*\s*$")


def _clean(raw: str) -> str:
    line = parse_line(raw)
    return line.message if line.level or line.proc else line.raw


def log_tail(log_text: str, n: int = 40) -> str:
    """The part of a log worth showing for an unknown failure, at most ``n`` lines.

    Traceback-aware: picks the root-cause traceback (the last one whose exception is not vLLM's
    "Engine core initialization failed. See root cause above." wrapper), keeps its first and last
    frames and the exception lines, and drops the ``^^^^`` markers and the log prefixes.
    Without a traceback, it returns the last ``n`` non-empty lines.
    """
    lines = [_clean(r) for r in log_text.splitlines()]
    lines = [ln for ln in lines if ln.strip() and not _NOISE.match(ln)]
    if not lines:
        return ""
    # find tracebacks: (start index, exception index)
    blocks: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if _TB_START.match(lines[i]):
            j = i + 1
            while j < len(lines) and (
                lines[j].startswith((" ", "\t")) or not _EXC_LINE.match(lines[j].strip())
            ):
                if _TB_START.match(lines[j]):
                    break
                j += 1
            if j < len(lines) and _EXC_LINE.match(lines[j].strip()):
                blocks.append((i, j))
                i = j + 1
                continue
        i += 1
    if not blocks:
        return "\n".join(_shorten(ln) for ln in lines[-n:])
    root = None
    for start, exc in reversed(blocks):
        if not _WRAPPER.search(lines[exc]):
            root = (start, exc)
            break
    start, exc = root or blocks[-1]
    end = exc + 1  # continuation lines of the exception message (e.g. pydantic's indented details)
    while end < len(lines) and lines[end].startswith((" ", "\t")) and end - exc < 6:
        end += 1
    block = lines[start:end]
    if len(block) > n:
        keep_tail = n - 4
        block = [
            block[0],
            *block[1:3],
            f"  ... ({len(block) - 3 - keep_tail} lines cut) ...",
            *block[-keep_tail:],
        ]
    # the last lines of the log, if they say something the block does not (e.g. the final wrapper)
    extra = [ln for ln in lines[end:] if _EXC_LINE.match(ln.strip()) and ln not in block][-2:]
    room = n - len(block)
    if extra and room > 1:
        block = [*block, "...", *extra[-(room - 1) :]]
    return "\n".join(_shorten(ln) for ln in block)


def _shorten(line: str, width: int = 400) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."
