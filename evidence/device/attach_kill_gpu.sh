#!/bin/bash
# The leash on a GPU (util/leash.py): `llmdeck up --attach` serving Qwen3-0.6B's shape on vLLM 0.22 (one
# call after gpu-lab's stash, see evidence/device/README.md), then llmdeck itself killed outright
# (`kill -9`, as the OOM killer would) once the server holds the GPU. Measured: how soon the GPU's memory
# is back (nvidia-smi every 0.25 s), that no process of the server is left (--query-compute-apps), and
# what `llmdeck status` says of its record. Before the leash the server, detached in a session of its
# own, served on with no one to stop it.
#   run  command: OUT=$OUT bash evidence/device/attach_kill_gpu.sh     (~2-3 min; writes $OUT/attach-kill.tgz)
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s.%N)
el() { python3 -c "import time; print(f'{time.time() - $T0:.2f}')"; }
stamp() { echo "[$(el) s] $*" | tee -a "$D/actions.txt"; }
W=/root/attach-kill; D=$W/attach-kill; rm -rf "$W"; mkdir -p "$D"
OUT=${OUT:-/tmp/attach-kill-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/attach-kill.tgz" -C "$W" attach-kill 2>/dev/null' EXIT
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state-attach
rm -rf "$LLMDECK_STATE_DIR"
PY=$(command -v python3)
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; }
"$PY" - "$PY" "$W" <<'PYEOF'
import sys
from llmdeck.engines.spec import LaunchSpec
py, w = sys.argv[1:3]
args = ["--load-format", "dummy", "--tokenizer", "/root/models/qwen3-0.6b", "--max-model-len", "8192",
        "--gpu-memory-utilization", "0.50", "--enforce-eager"]
spec = LaunchSpec(name="attached", engine="venv", python=py, model="/root/models/qwen3-0.6b", port=8301,
                  env={"HF_HUB_OFFLINE": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0"}, vllm_args=args)
open(f"{w}/attached.json", "w").write(spec.model_dump_json(indent=1))
PYEOF
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader | tee "$D/gpu.txt"
( while :; do echo "$(el),$(used)"; sleep 0.25; done ) > "$D/gpu-memory.csv" 2>/dev/null &
SAMPLER=$!
"$PY" -m llmdeck up --spec "$W/attached.json" --attach > "$D/attach.log" 2>&1 &
LLMDECK_PID=$!
stamp "llmdeck up --attach started (pid $LLMDECK_PID)"
ok() { [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' http://127.0.0.1:8301/health)" = 200 ]; }
for _ in $(seq 1200); do ok && break; sleep 0.25; done   # --attach prints the log, not a ready line
ok || { stamp "never ready"; tail -20 "$D/attach.log"; exit 1; }
stamp "ready; GPU used $(used) MiB"
curl -s -o /dev/null -w "a request to it: HTTP %{http_code}\n" http://127.0.0.1:8301/v1/models | tee -a "$D/actions.txt"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$D/apps-before-kill.txt"
ps -eo pid,pgid,sid,args | grep -E "llmdeck|vllm|EngineCore" | grep -v grep > "$D/ps-before-kill.txt"
stamp "kill -9 $LLMDECK_PID (llmdeck itself)"
kill -9 "$LLMDECK_PID"
KILLED=$(el)
for _ in $(seq 400); do [ "$(used)" -lt 1000 ] && break; sleep 0.1; done
stamp "GPU used $(used) MiB ($(python3 -c "print(f'{$(el) - $KILLED:.2f}')") s after the kill)"
sleep 1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$D/apps-after-kill.txt"
ps -eo pid,pgid,sid,args | grep -E "llmdeck|vllm|EngineCore" | grep -v grep > "$D/ps-after-kill.txt"
curl -s -m 3 -o /dev/null -w "a request to it after the kill: HTTP %{http_code}\n" http://127.0.0.1:8301/v1/models \
  | tee -a "$D/actions.txt"
"$PY" -m llmdeck status > "$D/status-after-kill.txt" 2>&1
kill $SAMPLER 2>/dev/null
cp "$LLMDECK_STATE_DIR"/logs/attached.log "$D/vllm-attached.log" 2>/dev/null
cat "$D/actions.txt"; echo "--- apps after"; cat "$D/apps-after-kill.txt"; echo "--- ps after"; cat "$D/ps-after-kill.txt"
echo "--- status"; tail -5 "$D/status-after-kill.txt"
stamp done
