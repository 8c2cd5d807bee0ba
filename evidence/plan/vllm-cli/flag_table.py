"""Build llmdeck's table of which vLLM releases take which `vllm serve` flag from the dumps here.

    python evidence/plan/vllm-cli/flag_table.py > src/llmdeck/plan/data/vllm_flags.json

Each flag gets the first release whose parser takes it and the first that no longer does (null: still
there in the newest dump). tests/unit/test_vllm_flag_releases.py holds the table against the dumps.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent


def releases() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in HERE.glob("vllm*.json"):
        dump = json.loads(path.read_text(encoding="utf-8"))
        out[dump["vllm_version"]] = set(dump["flags"])
    return dict(sorted(out.items(), key=lambda kv: tuple(int(p) for p in kv[0].split("."))))


def table() -> dict[str, object]:
    dumps = releases()
    order = list(dumps)
    spans: dict[str, list[str | None]] = {}
    for flag in sorted(set().union(*dumps.values())):
        have = [flag in dumps[v] for v in order]
        first = have.index(True)
        last = len(have) - 1 - have[::-1].index(True)
        if not all(have[first : last + 1]):
            raise SystemExit(f"--{flag} leaves and comes back: {dict(zip(order, have, strict=True))}")
        spans[flag] = [order[first], order[last + 1] if last + 1 < len(order) else None]
    return {
        "source": "evidence/plan/vllm-cli/vllm*.json (each release's own parser); flag_table.py",
        "releases": order,
        "flags": spans,
    }


def render(t: dict[str, object]) -> str:
    """One flag a line, so a new release's dump reads as a small diff."""
    flags = t["flags"]
    assert isinstance(flags, dict)
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in flags.items())
    return (
        f'{{\n "source": {json.dumps(t["source"])},\n "releases": {json.dumps(t["releases"])},\n'
        f' "flags": {{\n{rows}\n }}\n}}\n'
    )


if __name__ == "__main__":
    sys.stdout.write(render(table()))
