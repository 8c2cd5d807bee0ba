"""vLLM versions: parsing, ranges, and which behaviours hold for which releases.

Every lint rule and every version-bound piece of the memory math names the vLLM range it was
checked for (from the release's own source: the ``vllm`` wheels 0.22.0 and 0.33.0 on PyPI, and for the
model-runner, in-flight and MXFP4 rules every release 0.22.0-0.34.0). 0.22.0 and 0.26.0 were also run on
an H200 against the plan (evidence/plan/families/results*). 0.34.0's source was read for the command
line, the hybrid and quantization rules, the YaRN length and the block size; its KV sizing after warmup
(the extensible KV cache) is not modelled, so an unknown target still follows 0.33.0's memory math.
A target the planner cannot pin down (an image tag such as ``latest`` or ``nightly``, an unknown
image) is *unknown*: a rule bound to some versions then reports a warning naming them instead
of an error, and the memory math assumes the newest release checked (:data:`NEWEST_CHECKED`).
"""

from __future__ import annotations

from pydantic import BaseModel

from llmdeck.errors import UsageError

# The releases whose source the planner's rules were read from.
CHECKED_VERSIONS = ("0.22.0", "0.26.0", "0.33.0", "0.34.0")
NEWEST_CHECKED = "0.33.0"


def version_tuple(v: str) -> tuple[int, ...]:
    """``"v0.22.1rc1"`` → ``(0, 22, 1)``; ``"latest"`` → ``()``."""
    parts: list[int] = []
    for piece in v.strip().lstrip("v").split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def check_version_option(value: str | None, option: str = "--vllm-version") -> None:
    """UsageError (exit 2) when a vLLM version given on the command line does not read as one."""
    if value is not None and not version_tuple(value):
        raise UsageError(
            f"{option} {value!r} is not a version.",
            hint=f"Give the vLLM release, e.g. {option} 0.22.0 (or leave it out).",
        )


def is_known(version: str | None) -> bool:
    return bool(version and version_tuple(version))


class VersionRange(BaseModel):
    """``[since, until)``: a behaviour seen from ``since`` on and gone by ``until`` (None = open)."""

    since: str | None = None
    until: str | None = None

    def contains(self, version: str) -> bool:
        v = version_tuple(version)
        if self.since and v < version_tuple(self.since):
            return False
        return not (self.until and v >= version_tuple(self.until))

    @property
    def is_all(self) -> bool:
        return self.since is None and self.until is None

    def describe(self) -> str:
        if self.is_all:
            return "all vLLM versions"
        if self.since and self.until:
            return f"vLLM >= {self.since} and < {self.until}"
        if self.since:
            return f"vLLM >= {self.since}"
        return f"vLLM < {self.until}"


ALL_VERSIONS = VersionRange()


def effective_version(target: str | None) -> str:
    """The version whose behaviour the math follows: the target when known, else the newest checked."""
    return target if is_known(target) and target is not None else NEWEST_CHECKED


def at_least(target: str | None, version: str) -> bool:
    """Whether the math for ``target`` follows ``version``'s behaviour (unknown → newest checked)."""
    return version_tuple(effective_version(target)) >= version_tuple(version)


# Granite 4.0 (GraniteMoeHybrid): vLLM builds its layers by the legacy names 'mamba'/'attention' until 0.26
# (vllm PR #47867 takes both), and transformers renames them from 5.13 (remap_legacy_layer_types); vLLM
# 0.24-0.25 need transformers >= 5.5.3. Bounds from the released wheels on either side. Read by plan's
# lint, preflight and doctor.
GRANITE_LAYER_NAMES_FIXED_IN = "0.26.0"
TRANSFORMERS_RENAMES_LAYER_TYPES = "5.13.0"


def granite_transformers_pin(vllm_version: str | None) -> str:
    """The transformers requirement under which this vLLM (< 0.26) still builds Granite 4.0."""
    return "transformers>=5.5.3,<5.13" if at_least(vllm_version, "0.24.0") else "transformers<5.13"
