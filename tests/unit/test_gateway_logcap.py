"""The gateway's log while it runs: rotated past its cap (gateway.log.1 … .3), never one file for weeks."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from llmdeck.gateway.logcap import CappedLog


def test_the_log_is_rotated_past_its_cap_and_the_files_stay_bounded(tmp_path: Path) -> None:
    """It had been rotated only when `gateway up` started it: ~140 bytes a request, for weeks."""
    path = tmp_path / "gateway.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    handler = CappedLog(path, max_bytes=10_000, fds=(fd,))
    logger = logging.getLogger("test.gateway.logcap")
    logger.addHandler(handler)
    logger.propagate, logger.level = False, logging.INFO
    try:
        for i in range(3000):  # ~40 bytes each: 120 KB written in all
            logger.info("GET /v1/x route=- key=- status=404 n=%d", i)
    finally:
        logger.removeHandler(handler)
        os.close(fd)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["gateway.log", "gateway.log.1", "gateway.log.2", "gateway.log.3"]
    assert all(p.stat().st_size <= 10_100 for p in tmp_path.iterdir())
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# llmdeck: ") and "gateway.log.1" in text.splitlines()[0]
    assert text.rstrip().endswith("n=2999") and "n=2998" in text  # nothing lost at the cut
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert "n=0\n" not in "".join(p.read_text(encoding="utf-8") for p in tmp_path.iterdir())


def test_the_gateway_log_says_its_times_in_utc_whatever_the_local_zone(tmp_path: Path) -> None:
    """Its header line is UTC (written by llmdeck); the lines after it had been local time with no zone:
    under TZ=Asia/Shanghai they read 8 hours after the start."""
    import subprocess
    import sys
    from datetime import UTC, datetime

    from repo_paths import ROOT

    probe = (
        "import logging; from llmdeck.gateway.serve import setup_logging; setup_logging(); "
        "logging.getLogger('llmdeck.gateway').info('hello')"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"), "TZ": "Asia/Shanghai"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    line = out.stdout.strip()
    stamp, rest = line.split(" ", 1)
    assert rest == "INFO llmdeck.gateway: hello", line
    assert stamp.endswith("Z"), line
    assert abs((datetime.fromisoformat(stamp) - datetime.now(UTC)).total_seconds()) < 120, line
