"""Judge an all-reduce sweep (allreduce.py's JSON lines) against what the link should give.

The expectation is a link profile: its rated speed, the share of it NCCL's bus bandwidth reaches
when the link is set up right, and the small-message latency it should have. Verdicts:

* ``pass``: the large-message bus bandwidth reaches ``pass_share`` of the rated speed and the
  latency is under ``max_latency_us``;
* ``warn``: between ``fail_share`` and ``pass_share``, or latency over the limit;
* ``fail``: under ``fail_share`` — vLLM would start (15 minutes on a big model) and then decode at
  the link's pace; the fix says what usually causes it.

Profiles: ``cx7-200g`` (DGX Spark / GX10 ConnectX-7 QSFP, 200 Gb/s), ``ethernet-100g``,
``ethernet-10g``, or ``--expect-gbps`` for any link. The shares are the ones the field works with
(issue 22: ~3 GB/s on a misconfigured 200 Gb/s link, i.e. NCCL on TCP sockets or one HCA); they are
llmdeck's thresholds, to be replaced by measured figures when the two-GPU run is made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.cluster.allreduce import SCHEMA
from llmdeck.formats.netcheck_rows import parse_netcheck_rows, read_netcheck_text

LARGE_MESSAGE = 1 << 24  # 16 MiB and above: bandwidth-bound in nccl-tests' sense


class Row(BaseModel):
    schema_: str = Field(alias="schema")
    backend: Literal["gloo", "nccl"]  # what allreduce.py runs; anything else is not its row
    world_size: int = Field(ge=2)
    size_bytes: int = Field(gt=0)
    iters: int = Field(gt=0)
    time_us: float = Field(gt=0)
    algbw_gbps: float = Field(ge=0)
    busbw_gbps: float = Field(ge=0)


class LinkProfile(BaseModel):
    name: str
    rated_gbytes_s: float = Field(gt=0, description="rated speed in GB/s (Gb/s / 8)")
    pass_share: float = 0.6
    fail_share: float = 0.25
    max_latency_us: float = 100.0


PROFILES: dict[str, LinkProfile] = {
    "cx7-200g": LinkProfile(name="cx7-200g", rated_gbytes_s=25.0, max_latency_us=60.0),
    "ethernet-100g": LinkProfile(name="ethernet-100g", rated_gbytes_s=12.5, max_latency_us=80.0),
    "ethernet-10g": LinkProfile(name="ethernet-10g", rated_gbytes_s=1.25, max_latency_us=200.0),
}


class Verdict(BaseModel):
    verdict: Literal["pass", "warn", "fail"]
    backend: str
    world_size: int
    profile: LinkProfile
    busbw_gbps: float = Field(description="peak bus bandwidth over messages >= 16 MiB (GB/s)")
    latency_us: float = Field(description="time of the smallest message")
    share: float = Field(description="busbw / rated")
    reasons: list[str] = Field(default_factory=list)
    fix: str = ""
    rows: list[Row] = Field(default_factory=list)


def parse_rows(text: str, source: str = "the all-reduce output") -> list[Row]:
    """The JSON lines rank 0 printed; other lines (NCCL's INFO logs) are skipped."""
    return parse_netcheck_rows(text, Row, SCHEMA, source)


def load_rows(path: Path) -> list[Row]:
    return parse_rows(read_netcheck_text(path), str(path))


def _fix(backend: str) -> str:
    if backend == "gloo":
        return (
            "Gloo (CPU) is bound by the CPUs and the TCP stack: set GLOO_SOCKET_IFNAME to the fast link's "
            "interface on every node (`cluster up --interface IF`)."
        )
    return (
        "NCCL is most likely on TCP sockets or one HCA. On every node: NCCL_SOCKET_IFNAME and "
        "GLOO_SOCKET_IFNAME = the link's interface, NCCL_IB_HCA = every RDMA device of the link (both on "
        "DGX Spark), NCCL_IB_DISABLE=0, NCCL_IB_GID_INDEX = the RoCE v2 GID (often 3), MTU 9000 on both ends "
        "(`llmdeck cluster up --interface IF --hca A --hca B --gid-index 3`). Run with NCCL_DEBUG=INFO: "
        "'NET/IB' means RDMA, 'NET/Socket' means TCP."
    )


def judge(rows: list[Row], profile: LinkProfile) -> Verdict:
    large = [r for r in rows if r.size_bytes >= LARGE_MESSAGE] or [max(rows, key=lambda r: r.size_bytes)]
    busbw = max(r.busbw_gbps for r in large)
    latency = min(rows, key=lambda r: r.size_bytes).time_us
    share = busbw / profile.rated_gbytes_s
    reasons: list[str] = []
    verdict: Literal["pass", "warn", "fail"] = "pass"
    if share < profile.fail_share:
        verdict = "fail"
        reasons.append(
            f"bus bandwidth {busbw:.2f} GB/s is {share:.0%} of the {profile.rated_gbytes_s:g} GB/s link "
            f"(under {profile.fail_share:.0%})"
        )
    elif share < profile.pass_share:
        verdict = "warn"
        reasons.append(
            f"bus bandwidth {busbw:.2f} GB/s is {share:.0%} of the link (under {profile.pass_share:.0%})"
        )
    if latency > profile.max_latency_us:
        verdict = "fail" if verdict == "fail" else "warn"
        reasons.append(f"latency {latency:.0f} µs is over {profile.max_latency_us:g} µs")
    first = rows[0]
    return Verdict(
        verdict=verdict,
        backend=first.backend,
        world_size=first.world_size,
        profile=profile,
        busbw_gbps=busbw,
        latency_us=latency,
        share=share,
        reasons=reasons,
        fix=_fix(first.backend) if verdict != "pass" else "",
        rows=rows,
    )


def profile_for(name: str | None, expect_gbps: float | None, speed_mbps: int | None) -> LinkProfile:
    """``--expect-gbps`` (GB/s) wins, then ``--link NAME``, then the interface's rated speed."""
    if expect_gbps is not None:
        return LinkProfile(name=f"expect-{expect_gbps:g}GB/s", rated_gbytes_s=expect_gbps)
    if name is not None:
        if name not in PROFILES:
            from llmdeck.errors import UsageError

            raise UsageError(f"Unknown link profile {name!r}.", hint=f"One of: {', '.join(PROFILES)}.")
        return PROFILES[name]
    if speed_mbps:
        return LinkProfile(name=f"rated-{speed_mbps}Mb/s", rated_gbytes_s=speed_mbps / 8000)
    return PROFILES["cx7-200g"]
