"""The plan against the KV-cache lines vLLM printed, for every start of one results folder.

    .venv/bin/python evidence/plan/families/compare.py evidence/plan/families/results-v0.26

One line a start: vLLM's KV tokens, the plan's from vLLM's printed available memory (the KV math) and
from its own memory model, the model runner both sides took, and the weights planned against loaded.
The vLLM version is read from each log. tests/unit/test_plan_family_evidence.py asserts the same.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from predict import H200_BYTES, plan_on_h200  # this folder's predict.py (the script's folder is on sys.path)


def _num(pat: str, text: str) -> float | None:
    m = re.search(pat, text)
    return float(m.group(1).replace(",", "")) if m else None


def _plan(run: dict[str, Any], text: str, total_bytes: int, kv_gib: float | None) -> Any:
    version = re.search(r"Initializing a V1 LLM engine \(v([\d.]+)\)", text)
    flags = shlex.split(run["flags"])
    return plan_on_h200(
        run["model"], flags, version.group(1) if version else "0.22.0", total_bytes=total_bytes, kv_gib=kv_gib
    )


def _pct(planned: int, seen: float) -> str:
    return f"{planned:,} ({(planned / seen - 1) * 100:+.2f}%)"


def main(folder: str) -> None:
    results = Path(folder)
    device = json.loads((results / "device.json").read_text())
    total_bytes = int(device.get("gpu_total_bytes", H200_BYTES))
    print("run | model | flags | runner vLLM/plan | vLLM KV tokens | plan given | plan own | weights GiB")
    for line in (results / "runs.jsonl").read_text().splitlines():
        run = json.loads(line)
        text = (results / "logs" / Path(run["log"]).name).read_text(errors="replace")
        tokens = _num(r"GPU KV cache size: ([\d,]+) tokens", text)
        if run.get("status") != "ok" or tokens is None:
            print(f"{run['run']} | {run['model']} | did not start")
            continue
        available = _num(r"Available KV cache memory: ([\d.]+) GiB", text)
        given, own = _plan(run, text, total_bytes, available), _plan(run, text, total_bytes, None)
        runner = "V2" if "Using V2 Model Runner" in text else "V1"
        loaded = _num(r"Model loading took ([\d.]+) GiB", text)
        flags = run["flags"].split("--max-num-seqs 8", 1)[-1].strip() or "-"
        print(
            f"{run['run']} | {run['model']} | {flags} | {runner}/{own.memory.overhead.model_runner} | "
            f"{int(tokens):,} | {_pct(given.memory.capacity.kv_cache_tokens, tokens)} | "
            f"{_pct(own.memory.capacity.kv_cache_tokens, tokens)} | "
            f"{loaded} loaded / {own.memory.weights_gib:.2f} planned"
        )


if __name__ == "__main__":
    main(sys.argv[1])
