"""Interleaved A/B of two gateways on the same vLLM: the TTFT of a request whose cap must be fitted,
and of one whose cap fits, through gateway A and gateway B, one request each in turn (ABBA order, so
drift over the run — prefix cache, clocks, the other tenant — falls on both alike). outcap_probe.py
measures each target's cases in a block, one target after the other: two such runs on an H100 gave
before-after differences of -55 and +21 ms for the same case, so its blocks could not tell a one-send
saving from drift.

Run after outcap_probe.py (both gateways have learnt the backend by then: the first refusal teaches
it). Cases: outcap_probe's ``fits`` (cap 1024), ``recorded`` (Claude Code's 32000) and
``chat-recorded``. Prints, per case, each side's TTFT p50 and the median of the paired differences
(B minus A, request by request) with the share of rounds where B was faster.

    python evidence/device/outcap_ab.py --url http://127.0.0.1:8000 --model M --alias coder \
        --a before=http://127.0.0.1:4001 --b after=http://127.0.0.1:4000 --rounds 30 --out ab.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import httpx
from outcap_probe import bodies, one

CASES = ("fits", "recorded", "chat-recorded")


def _ms(run: dict[str, Any]) -> float | None:
    t = run.get("ttft_s")
    return round(t * 1000, 1) if isinstance(t, float) else None


def rounds(
    client: httpx.Client, sides: list[tuple[str, str]], alias: str, cases: dict[str, Any], n: int
) -> dict:
    times: dict[str, dict[str, list[float | None]]] = {c: {label: [] for label, _ in sides} for c in CASES}
    for i in range(n):
        order = sides if i % 2 == 0 else sides[::-1]  # ABBA: each side first as often as second
        for case in CASES:
            body = {**cases[case], "model": alias}
            for label, url in order:
                times[case][label].append(_ms(one(client, url, body, None)))
    return times


def summary(times: dict[str, dict[str, list[float | None]]], a: str, b: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case, by in times.items():
        pairs = [(x, y) for x, y in zip(by[a], by[b], strict=True) if x is not None and y is not None]
        diffs = [y - x for x, y in pairs]
        out[case] = {
            "pairs": len(pairs),
            f"{a}_p50_ms": round(statistics.median(x for x, _ in pairs), 1) if pairs else None,
            f"{b}_p50_ms": round(statistics.median(y for _, y in pairs), 1) if pairs else None,
            "diff_p50_ms": round(statistics.median(diffs), 1) if diffs else None,
            f"{b}_faster_share": round(sum(d < 0 for d in diffs) / len(diffs), 2) if diffs else None,
            "ttft_ms": by,
        }
        print(
            f"  {case}: {a} p50 {out[case][f'{a}_p50_ms']} ms, {b} p50 {out[case][f'{b}_p50_ms']} ms; "
            f"paired {b}-{a} median {out[case]['diff_p50_ms']} ms, {b} faster in "
            f"{out[case][f'{b}_faster_share']} of {len(pairs)} rounds",
            flush=True,
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="vLLM itself: its max_model_len sizes the cases")
    ap.add_argument("--model", required=True)
    ap.add_argument("--alias", required=True)
    ap.add_argument("--a", required=True, help="LABEL=URL")
    ap.add_argument("--b", required=True, help="LABEL=URL")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sides = [tuple(s.split("=", 1)) for s in (args.a, args.b)]
    with httpx.Client(timeout=httpx.Timeout(300.0, connect=10.0)) as client:
        max_model_len = int(client.get(args.url + "/v1/models").json()["data"][0]["max_model_len"])
        cases = bodies(args.model, max_model_len)
        times = rounds(client, sides, args.alias, cases, args.rounds)  # type: ignore[arg-type]
    doc = {"max_model_len": max_model_len, "rounds": args.rounds, "a": sides[0][0], "b": sides[1][0]}
    doc["cases"] = summary(times, sides[0][0], sides[1][0])
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
