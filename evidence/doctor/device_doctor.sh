#!/bin/bash
# Evidence for issue 16: `llmdeck doctor` on the H200 (device machine, after ../shared/gpu-lab is
# installed: device-install.sh), from the repository root. Writes $OUT/doctor-h200.{txt,json}.
set -uo pipefail
OUT=${OUT:-/tmp/doctor-out}; mkdir -p "$OUT"
export PYTHONPATH=src:/tmp/site
python3 -m llmdeck doctor > "$OUT/doctor-h200.txt" 2>&1; echo "exit $?" >> "$OUT/doctor-h200.txt"
python3 -m llmdeck doctor --json > "$OUT/doctor-h200.json" 2> "$OUT/doctor-h200.stderr"
cat "$OUT/doctor-h200.txt"
