"""``python benchmarks/_profiled_gateway.py STATS_FILE -- GATEWAY ARGS``: llmdeck's gateway under cProfile.

uvicorn re-raises the SIGTERM it caught once it has shut down; with the default handler that kills the
process before cProfile writes, so SIGTERM here raises SystemExit instead and the stats are dumped on
the way out (gateway_overhead.py --profile-gateway).
"""

from __future__ import annotations

import cProfile
import signal
import sys
import time

from llmdeck.gateway.serve import main


def run() -> None:
    out, _, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    prof = cProfile.Profile(time.process_time)  # CPU time: an idle await costs nothing
    prof.enable()
    try:
        main(args)
    finally:
        prof.disable()
        prof.dump_stats(out)


if __name__ == "__main__":
    run()
