"""What the dashboard's data costs the gateway: ``/ui/api/state`` polled while the load runs (issue 37).

Two figures (gateway_overhead.py ``--poll-ui S``):

* paired: a target ``llmdeck+ui`` — the same gateway process and load as ``llmdeck``, with one poller
  fetching ``/ui/api/state`` every S seconds (as an open dashboard tab does) — in the same rotating
  rounds; its CPU per 1,000 requests against ``llmdeck``'s. On a shared 2-core box the rounds' CPU moves
  by ~10%, so this bounds a 1% effect only loosely;
* direct: the gateway's CPU for a poll, measured apart (idle gateway, polls spaced past the state's
  1 s cache so each one builds the state afresh, less the same stretch without polls), divided by S
  and by the gateway's CPU rate during the 64-stream rounds: the share of its CPU an open tab costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

STATE = "/ui/api/state"


async def polled(
    run: Awaitable[dict[str, Any]], base: str, key: str | None, every_s: float
) -> dict[str, Any]:
    """``run`` (a load) with ``/ui/api/state`` fetched every ``every_s`` meanwhile; adds ``ui_polls``."""
    stop = asyncio.Event()
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def poller() -> tuple[int, int]:
        n = bad = 0
        async with httpx.AsyncClient(timeout=10, headers=headers) as client:
            while not stop.is_set():
                resp = await client.get(base + STATE)
                n += 1
                bad += resp.status_code != 200 or b'"schema_version":1' not in resp.content
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), every_s)
        return n, bad

    task = asyncio.create_task(poller())
    try:
        result = await run
    finally:
        stop.set()
        polls, bad = await task
    result["ui_polls"], result["ui_bad_polls"] = polls, bad
    return result


async def poll_cost(
    base: str, key: str | None, pid: int, cpu_seconds: Callable[[int], float], n: int = 20, gap_s: float = 1.1
) -> dict[str, Any]:
    """The idle gateway's CPU for ``n`` polls spaced ``gap_s`` (each builds the state), less idle."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=10, headers=headers) as client:
        await client.get(base + STATE)  # the first builds the caches (meminfo, NVML, Ollama, servers)
        await asyncio.sleep(gap_s)
        c0, t0 = cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(n * gap_s)
        idle = cpu_seconds(pid) - c0
        idle_wall = time.monotonic() - t0
        sizes = []
        c0, t0 = cpu_seconds(pid), time.monotonic()
        for _ in range(n):
            resp = await client.get(base + STATE)
            resp.raise_for_status()
            sizes.append(len(resp.content))
            await asyncio.sleep(gap_s)
        busy = cpu_seconds(pid) - c0
        busy_wall = time.monotonic() - t0
    per_poll = max(0.0, busy - idle * busy_wall / idle_wall) / n
    return {
        "polls": n,
        "gap_s": gap_s,
        "idle_cpu_s": idle,
        "polled_cpu_s": busy,
        "cpu_ms_per_poll": per_poll * 1000,
        "state_bytes": statistics.median(sizes),
    }


def ui_summary(
    runs: dict[str, list[dict[str, Any]]], cost: dict[str, Any] | None, every_s: float
) -> dict[str, Any]:
    """The paired CPU delta (llmdeck+ui against llmdeck) and the direct share of the gateway's CPU."""
    plain, ui = runs["llmdeck"], runs["llmdeck+ui"]

    def per_k(r: dict[str, Any]) -> float:
        return float(r["proxy_cpu_s"]) / r["ok"] * 1000

    deltas = [per_k(u) / per_k(p) - 1 for p, u in zip(plain, ui, strict=True)]
    rate = statistics.median(float(r["proxy_cpu_s"]) / r["wall_s"] for r in plain)  # CPU s per s, loaded
    out: dict[str, Any] = {
        "poll_every_s": every_s,
        "polls_during_load": sum(r["ui_polls"] for r in ui),
        "bad_polls": sum(r["ui_bad_polls"] for r in ui),
        "gateway_cpu_per_wall_s_at_load": rate,
        "paired_cpu_per_request_delta_rounds": deltas,
        "paired_cpu_per_request_delta_median": statistics.median(deltas),
    }
    if cost is not None:
        out["poll_cost"] = cost
        out["direct_share_of_gateway_cpu"] = cost["cpu_ms_per_poll"] / 1000 / every_s / rate
    return out


def ui_table(s: dict[str, Any]) -> str:
    lines = [
        f"\ndashboard polling /ui/api/state every {s['poll_every_s']:g} s: {s['polls_during_load']} polls "
        f"during the load ({s['bad_polls']} bad); gateway CPU {s['gateway_cpu_per_wall_s_at_load']:.3f} s/s "
        f"at load; paired CPU/request delta median {s['paired_cpu_per_request_delta_median']:+.2%} (rounds "
        + ", ".join(f"{d:+.1%}" for d in s["paired_cpu_per_request_delta_rounds"])
        + ")"
    ]
    if "poll_cost" in s:
        c = s["poll_cost"]
        lines.append(
            f"one poll costs the gateway {c['cpu_ms_per_poll']:.2f} ms CPU ({c['state_bytes']:.0f} bytes): "
            f"{s['direct_share_of_gateway_cpu']:.3%} of its CPU at this load"
        )
    return "\n".join(lines)
