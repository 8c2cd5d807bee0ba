"""The network environment NCCL, Gloo, UCX and Ray need on every node, and its checks.

What the two-box setups in the field export on each node (eugr/spark-vllm-docker
launch-cluster.sh @013cd2ea, ``get_env_flags``): ``VLLM_HOST_IP``, ``RAY_NODE_IP_ADDRESS`` and
``RAY_OVERRIDE_NODE_IP_ADDRESS`` (the node's address on the fast link), ``NCCL_SOCKET_IFNAME``,
``GLOO_SOCKET_IFNAME``, ``TP_SOCKET_IFNAME``, ``UCX_NET_DEVICES`` and
``OMPI_MCA_btl_tcp_if_include`` (all the fast link's interface), ``NCCL_IB_HCA`` (the RDMA devices,
comma-separated), ``NCCL_IB_DISABLE=0``, and Ray's memory monitor off
(``RAY_memory_monitor_refresh_ms=0``). ``NCCL_IB_GID_INDEX`` picks the RoCE v2 GID (commonly 3);
NCCL's default auto-detection is kept when it is not given.

The checks read Linux's own files: ``/sys/class/net/IF/{mtu,speed,operstate}`` and
``/sys/class/infiniband/HCA``. The field's slow-link report (issue 22: NCCL at ~3 GB/s until both
HCAs, MTU 9000 and these variables are set) is what they guard against.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.errors import UsageError

SYS_NET = Path("/sys/class/net")
SYS_IB = Path("/sys/class/infiniband")
JUMBO_MTU = 9000


# Linux interface names (IFNAMSIZ: 15 characters, no '/', no whitespace) and RDMA device names: they go
# into /sys paths and every node's environment, so nothing else (no '..', no quotes, no escapes) passes.
_IFNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}")
_HCANAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")


def validate_link_names(interface: str | None, hcas: list[str]) -> None:
    """--interface and each --hca are a device's name, or a UsageError (exit 2) naming the flag."""
    for flag, name, pattern in [("--interface", interface, _IFNAME)] + [("--hca", h, _HCANAME) for h in hcas]:
        if name is not None and (not pattern.fullmatch(name) or ".." in name):
            raise UsageError(
                f"{flag} {name!r} is not a device name.",
                hint="Give the name `ip -br link` (interfaces) or `ibv_devices` (HCAs) shows, e.g. "
                "enp1s0f1np1 or rocep1s0f1.",
            )


class NetSpec(BaseModel):
    """The fast link as the user names it."""

    interface: str | None = Field(None, description="the interface of the link between the nodes")
    hcas: list[str] = Field(default_factory=list, description="RDMA devices for NCCL_IB_HCA")
    gid_index: int | None = Field(None, ge=0, description="NCCL_IB_GID_INDEX (RoCE v2: often 3)")
    nccl_debug: str | None = None


class NetFinding(BaseModel):
    severity: Literal["ok", "warn", "fail"]
    check: str
    message: str
    fix: str = ""


def node_env(spec: NetSpec, node_ip: str) -> dict[str, str]:
    """The environment one node runs Ray and vLLM with (ordered as the field's launchers set it)."""
    env: dict[str, str] = {
        "VLLM_HOST_IP": node_ip,
        "RAY_NODE_IP_ADDRESS": node_ip,
        "RAY_OVERRIDE_NODE_IP_ADDRESS": node_ip,
    }
    if spec.interface:
        iface = spec.interface
        env |= {
            "NCCL_SOCKET_IFNAME": iface,
            "GLOO_SOCKET_IFNAME": iface,
            "TP_SOCKET_IFNAME": iface,
            "UCX_NET_DEVICES": iface,
            "OMPI_MCA_btl_tcp_if_include": iface,
        }
    if spec.hcas:
        env["NCCL_IB_HCA"] = ",".join(spec.hcas)
        env["NCCL_IB_DISABLE"] = "0"
    if spec.gid_index is not None:
        env["NCCL_IB_GID_INDEX"] = str(spec.gid_index)
    if spec.nccl_debug:
        env["NCCL_DEBUG"] = spec.nccl_debug
    # Ray's memory monitor kills workers on unified-memory boxes whose "used" includes the
    # KV cache (eugr launch-cluster.sh sets it to 0 for that reason); llmdeck's own watchdog
    # guards the node instead.
    env["RAY_memory_monitor_refresh_ms"] = "0"
    return env


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8").strip()
    except OSError:
        return None


def read_mtu(interface: str, root: Path = SYS_NET) -> int | None:
    text = _read(root / interface / "mtu")
    return int(text) if text and text.lstrip("-").isdigit() else None


def read_speed_mbps(interface: str, root: Path = SYS_NET) -> int | None:
    """The link's rated speed in Mb/s (``/sys/class/net/IF/speed``); None when the driver has none."""
    text = _read(root / interface / "speed")
    if not text or not text.lstrip("-").isdigit():
        return None
    value = int(text)
    return value if value > 0 else None


def check_link(spec: NetSpec, root: Path = SYS_NET, ib_root: Path = SYS_IB) -> list[NetFinding]:
    """The interface exists, is up, has a jumbo MTU when RDMA is used; the HCAs exist."""
    out: list[NetFinding] = []
    if not spec.interface:
        out.append(
            NetFinding(
                severity="warn",
                check="interface",
                message="No --interface given: NCCL and Gloo pick an interface themselves, often the "
                "slow one.",
                fix="Pass --interface with the link between the boxes (e.g. enp1s0f1np1 on DGX Spark).",
            )
        )
    else:
        out += _check_interface(spec, root)
    out += _check_hcas(spec, ib_root)
    return out


def _check_interface(spec: NetSpec, root: Path) -> list[NetFinding]:
    iface = str(spec.interface)
    if not (root / iface).exists():
        names = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
        return [
            NetFinding(
                severity="fail",
                check="interface",
                message=f"Interface {iface!r} does not exist on this node "
                f"(have: {', '.join(names) or 'none'}).",
                fix="Pass --interface with one of them (`ip -br addr` shows each with its address).",
            )
        ]
    out: list[NetFinding] = []
    state = _read(root / iface / "operstate")
    if state not in (None, "up", "unknown"):
        out.append(
            NetFinding(
                severity="fail",
                check="link",
                message=f"Interface {iface} is {state}.",
                fix=f"Check the cable and `sudo ip link set {iface} up`.",
            )
        )
    mtu = read_mtu(iface, root)
    if mtu is not None and mtu < JUMBO_MTU and spec.hcas:
        out.append(
            NetFinding(
                severity="warn",
                check="mtu",
                message=f"{iface} has MTU {mtu}; RoCE links are set up with {JUMBO_MTU} on both ends.",
                fix=f"`sudo ip link set {iface} mtu {JUMBO_MTU}` on every node (and in netplan to keep it).",
            )
        )
    elif mtu is not None:
        out.append(NetFinding(severity="ok", check="mtu", message=f"{iface} MTU {mtu}."))
    return out


def _check_hcas(spec: NetSpec, ib_root: Path) -> list[NetFinding]:
    out: list[NetFinding] = []
    for hca in spec.hcas:
        name = hca.split(":")[0].lstrip("^=")
        if not (ib_root / name).exists():
            out.append(
                NetFinding(
                    severity="fail",
                    check="hca",
                    message=f"RDMA device {name!r} is not in {ib_root}.",
                    fix="List them with `ibv_devices` or `ls /sys/class/infiniband`; NCCL falls back to TCP "
                    "sockets (a few GB/s) without one.",
                )
            )
    if len(spec.hcas) == 1:
        out.append(
            NetFinding(
                severity="warn",
                check="hca",
                message="One HCA given. On DGX Spark each ConnectX-7 port shows as two PCIe functions "
                "(e.g. rocep1s0f1 and roceP2p1s0f1); NCCL over one reaches about half the link.",
                fix="List both in --hca (NCCL_IB_HCA=a,b) when the box has them.",
            )
        )
    return out
