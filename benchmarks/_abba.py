"""What the CPU engine's A/B benchmarks share: the tiny model's check, the ABBA order, the host facts."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".cache" / "test-tiny"


def need_tiny_model() -> None:
    if not (MODEL / "config.json").is_file():
        sys.exit(f"{MODEL} is missing: run the tests once (`make unit`) to make the tiny model.")


def abba(a: str, b: str, rounds: int, one: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    """``one(kind)`` in the order A B B A, ``rounds`` times, each run printed as it ends."""
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        for kind in (a, b, b, a):
            runs.append(one(kind) | {"round": r})
            print(json.dumps(runs[-1]), flush=True)
    return runs


def host(**extra: Any) -> dict[str, Any]:
    facts = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}
    return facts | extra
