"""``ray status`` read as data: the nodes alive, pending and failed, and the cluster's resources.

The format is Ray's autoscaler summary (ray 2.60.0 ``ray/autoscaler/_private/util.py``
``format_info_string``): sections ``Active:``, ``Pending:``, ``Recent failures:`` under
``Node status``, then ``Total Usage:`` lines ``used/total resource``. A real capture of a two-node
local cluster started by llmdeck is in tests/fixtures/cluster/.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from llmdeck.errors import OperationError

_NODE = re.compile(r"^\s*(\d+)\s+(\S+)")
MAX_NODES = 100_000  # Ray's largest clusters are thousands of nodes; more is not Ray's summary
_USAGE = re.compile(r"^\s*([\d.]+)(\S*)/([\d.]+)(\S*)\s+(\S+)")


class RayStatus(BaseModel):
    active: list[str] = Field(default_factory=list, description="node ids (or node types) alive")
    pending: list[str] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)
    totals: dict[str, str] = Field(default_factory=dict, description="resource -> 'used/total'")

    @property
    def nodes_alive(self) -> int:
        return len(self.active)


def _count_nodes(line: str) -> list[str]:
    m = _NODE.match(line)
    if not m:
        return []
    count = int(m.group(1))
    if count > MAX_NODES:  # was: a list that long, built in memory (MemoryError: "internal error")
        raise OperationError(
            f"`ray status` counts {m.group(1)[:30]} nodes on one line: not Ray's node summary.",
            hint="Is a Ray head answering at that address? Run `ray status` on the head to see it.",
        )
    return [m.group(2)] * count


def parse_ray_status(text: str) -> RayStatus:
    """Parse ``ray status``; raises OperationError when the text is not Ray's summary."""
    if "Node status" not in text or "Active:" not in text:
        first = text.strip().splitlines()[:1]
        raise OperationError(
            "`ray status` did not print Ray's node summary"
            + (f" (it printed: {first[0][:200]!r})" if first else " (it printed nothing)")
            + ".",
            hint="Is the head up at that address? `llmdeck cluster status` reads it from the recorded "
            "cluster.",
        )
    out = RayStatus()
    section = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        key = line.strip()
        if key in ("Active:", "Pending:", "Recent failures:", "Total Usage:", "Usage:"):
            section = key
            continue
        if not key or key.startswith(("(", "-", "=")) or not raw.startswith(" "):
            if not raw.startswith(" "):
                section = "" if key not in ("Node status", "Resources") else section
            continue
        if section == "Active:":
            out.active += _count_nodes(line)
        elif section == "Pending:":
            out.pending += _count_nodes(line) or [key]
        elif section == "Recent failures:":
            out.failures.append(key)
        elif section in ("Total Usage:", "Usage:"):
            m = _USAGE.match(line)
            if m:
                out.totals[m.group(5)] = f"{m.group(1)}{m.group(2)}/{m.group(3)}{m.group(4)}"
    return out
