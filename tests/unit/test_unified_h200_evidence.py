"""The H200 figures of issue 35 (evidence/device/unified/), read back from the kept files."""

from __future__ import annotations

import json
import re

from repo_paths import ROOT

UNIFIED = ROOT / "evidence" / "device" / "unified" / "qwen3-0.6b"


def test_kv_sized_by_bytes_lands_within_2_percent_of_the_plan() -> None:
    plan = json.loads((UNIFIED / "plan.json").read_text())["memory"]["capacity"]["kv_cache_tokens"]
    log = (UNIFIED / "vllm.log").read_text()
    got = int(re.search(r"GPU KV cache size: ([\d,]+) tokens", log).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert abs(got / plan - 1) <= 0.02 and got == 74_896
    assert "skipped memory profiling" in log and "'kv_cache_memory_bytes': 8589934592" in log


def test_each_sleep_level_freed_memory_and_every_wake_passed_the_probe() -> None:
    cycles = json.loads((UNIFIED / "sleep.json").read_text())
    assert cycles[0]["probe_before_any_sleep"]["ok"]
    freed = {c["level"]: c["freed_gib"] for c in cycles[1:]}
    assert freed == {1: 10.29, 2: 9.24}
    for c in cycles[1:]:
        assert c["sleep_status"] == 200 and c["is_sleeping"]["is_sleeping"] is True
        assert c["wake_status"] == 200 and c["is_sleeping_after_wake"]["is_sleeping"] is False
        assert c["post_wake_probe"]["ok"] is True
        assert round((c["awake_mib"] - c["asleep_mib"]) / 1024, 2) == c["freed_gib"]
