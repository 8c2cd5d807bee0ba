#!/bin/bash
# Evidence for issue 21 (sleep mode vs a cold start), on the H200 through ../shared/gpu-lab, venv mode.
#
# Runs on the device machine after gpu-lab is installed there (device-install.sh), from the repository root:
#     bash evidence/gateway-models/device_sleep.sh [SHAPES]      (default: "qwen3-0.6b qwen3-30b-a3b")
# Per shape, under $OUT (default /tmp/sleep-evidence):
#   SHAPE-up.txt      `llmdeck up` with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1: the cold start (s)
#   SHAPE-cold.json   time to first token of the first request after the cold start
#   SHAPE-sleep.json  sleep_probe.py: levels 1 and 2 — GPU memory freed, seconds to sleep / wake, time
#                     to first token of the first request after the wake
#   logs/             the vLLM logs
# Budget: ~85 s for the 0.6B start (--enforce-eager), ~150 s for the 30B, ~1 min of cycles each.
# What it measures becomes the gateway's sleep policy (src/llmdeck/gateway/lifecycle.py, README).
set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/sleep-evidence}
mkdir -p "$OUT/logs"
ls /tmp/site/.done >/dev/null 2>&1 || { echo "COLD: gpu-lab not installed (run device-install.sh first)"; exit 3; }
export PYTHONPATH=src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
       VLLM_SERVER_DEV_MODE=1
export LLMDECK_STATE_DIR=/root/llmdeck-state LLMDECK_CACHE_DIR=/root/llmdeck-cache
PY=$(command -v python3)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -c 'import vllm; print(vllm.__version__)' > "$OUT/vllm-version.txt" 2>&1

for SHAPE in ${1:-qwen3-0.6b qwen3-30b-a3b}; do
  stamp "cold start $SHAPE"
  S=$(date +%s.%N)
  python3 -m llmdeck up --model /root/models/$SHAPE --engine venv --python "$PY" --name sleepy --port 8000 \
    -- --load-format dummy --max-model-len 8192 --enforce-eager --enable-sleep-mode 2>&1 | tee "$OUT/$SHAPE-up.txt"
  echo "exit=${PIPESTATUS[0]} cold_start_s=$(python3 -c "import time; print(round(time.time() - $S, 1))")" >> "$OUT/$SHAPE-up.txt"
  PID=$(python3 -c 'import json,sys; print(json.load(open("/root/llmdeck-state/servers/sleepy.json"))["pid"])')
  python3 - "$SHAPE" > "$OUT/$SHAPE-cold.json" <<'PY'
import json, sys, importlib.util
spec = importlib.util.spec_from_file_location("probe", "evidence/gateway-models/sleep_probe.py")
probe = importlib.util.module_from_spec(spec); spec.loader.exec_module(probe)
print(json.dumps({"ttft_first_after_cold_start_s": probe.ttft("http://127.0.0.1:8000", sys.argv[1]),
                  "ttft_warm_s": probe.ttft("http://127.0.0.1:8000", sys.argv[1])}))
PY
  stamp "sleep cycles $SHAPE"
  python3 evidence/gateway-models/sleep_probe.py http://127.0.0.1:8000 "$SHAPE" "$PID" > "$OUT/$SHAPE-sleep.json" \
    2> "$OUT/$SHAPE-sleep.stderr"
  cp /root/llmdeck-state/logs/sleepy.log "$OUT/logs/$SHAPE.log" 2>/dev/null
  python3 -m llmdeck down sleepy
  grep -h "Sleep mode freed\|wake up the engine" "$OUT/logs/$SHAPE.log" | tail -4
done
stamp done
