"""Which vLLM releases take which ``vllm serve`` flag: ``data/vllm_flags.json``, built by
``evidence/plan/vllm-cli/flag_table.py`` from each release's own parser (0.22.0-0.34.0).

vLLM's parser is argparse's: it also takes any unambiguous prefix of a flag (``--max-model`` is
``--max-model-len``), and underscores for dashes.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from importlib import resources

from pydantic import BaseModel

from llmdeck.plan.versions import version_tuple


class FlagTable(BaseModel):
    source: str
    releases: list[str]
    flags: dict[str, tuple[str, str | None]]

    def release_for(self, target: str | None) -> str | None:
        """The dumped release standing for ``target`` (same minor; a patch release keeps its flags), or
        None when the target is unknown or newer than every dump."""
        t = version_tuple(target) if target else None
        if not t:
            return None
        for release in self.releases:
            if version_tuple(release)[:2] == t[:2]:
                return release
        return None

    def takes(self, release: str, flag: str) -> bool:
        span = self.flags.get(flag)
        if span is None:
            return False
        since, until = span
        v = version_tuple(release)
        return v >= version_tuple(since) and (until is None or v < version_tuple(until))

    def expand(self, prefix: str, release: str | None = None) -> str | None:
        """The one flag ``prefix`` abbreviates (in ``release``, else in any release), as argparse reads it."""
        names = [f for f in self.flags if release is None or self.takes(release, f)]
        matches = [f for f in names if f.startswith(prefix)]
        return matches[0] if len(matches) == 1 else None

    def nearest(self, flag: str) -> str | None:
        found = difflib.get_close_matches(flag, list(self.flags), n=1, cutoff=0.75)
        return found[0] if found else None


@lru_cache(maxsize=1)
def flag_table() -> FlagTable:
    text = resources.files("llmdeck.plan").joinpath("data/vllm_flags.json").read_text(encoding="utf-8")
    return FlagTable.model_validate(json.loads(text))
