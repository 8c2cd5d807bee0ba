#!/bin/bash
# `llmdeck restart NAME -- FLAGS` and the log keeper on a GPU (vLLM 0.22 via gpu-lab, one call after its
# stash, see evidence/device/README.md): Qwen3-0.6B's shape (dummy weights) started detached with
# --max-model-len 8192 and --gpu-memory-utilization 0.50, then
#   1. a restart with a bad change (`-- --max-model-len`, no value): refused before the stop (exit 2), the
#      server still answering;
#   2. `restart -- --max-model-len 4096 --gpu-memory-utilization 0.30`: the new flags in place of the
#      recorded ones; /v1/models says 4096, the GPU holds less (nvidia-smi before/after);
#   3. the log keeper beside the server (ps), gone with it after `down`; the GPU back to ~0.
#   run  command: OUT=$OUT bash evidence/device/restart_flags_gpu.sh     (~3-4 min; writes $OUT/restart-flags/)
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s.%N)
OUT=${OUT:-/tmp/restart-flags-out}; D=$OUT/restart-flags; mkdir -p "$D"
el() { python3 -c "import time; print(f'{time.time() - $T0:.1f}')"; }
stamp() { echo "[$(el) s] $*" | tee -a "$D/actions.txt"; }
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state-restart
rm -rf "$LLMDECK_STATE_DIR"
PY=$(command -v python3)
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; }
mml() { curl -s -m 5 http://127.0.0.1:8302/v1/models | python3 -c "import json,sys; print(json.load(sys.stdin)['data'][0]['max_model_len'])"; }
keepers() { ps -eo pid,args | grep "llmdeck.engines.logkeeper" | grep -v grep; }
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader | tee "$D/gpu.txt"
stamp "up (detached)"
"$PY" -m llmdeck up --name r --engine venv --python "$PY" --model /root/models/qwen3-0.6b --port 8302 --json \
  -- --load-format dummy --tokenizer /root/models/qwen3-0.6b --max-model-len 8192 \
     --gpu-memory-utilization 0.50 --enforce-eager > "$D/up.json" 2> "$D/up.err"
echo "up exit $?" | tee -a "$D/actions.txt"
stamp "ready; GPU used $(used) MiB; max_model_len $(mml)"
keepers > "$D/keepers-while-serving.txt"; stamp "log keepers beside it: $(wc -l < "$D/keepers-while-serving.txt")"
"$PY" -m llmdeck restart r -- --max-model-len > "$D/restart-bad.out" 2> "$D/restart-bad.err"
echo "restart with a bad change: exit $?" | tee -a "$D/actions.txt"
stamp "still serving: /health $(curl -s -m 3 -o /dev/null -w '%{http_code}' http://127.0.0.1:8302/health)"
stamp "restart -- --max-model-len 4096 --gpu-memory-utilization 0.30"
"$PY" -m llmdeck restart r --json -- --max-model-len 4096 --gpu-memory-utilization 0.30 \
  > "$D/restart.json" 2> "$D/restart.err"
echo "restart exit $?" | tee -a "$D/actions.txt"
stamp "ready again; GPU used $(used) MiB; max_model_len $(mml)"
python3 -c "import json; print('recorded vllm_args:', json.load(open('$D/restart.json'))['spec']['vllm_args'])" \
  | tee -a "$D/actions.txt"
keepers > "$D/keepers-after-restart.txt"; stamp "log keepers after the restart: $(wc -l < "$D/keepers-after-restart.txt")"
"$PY" -m llmdeck down r > "$D/down.txt" 2>&1
stamp "down exit $?; GPU used $(used) MiB"
sleep 6
keepers > "$D/keepers-after-down.txt"; stamp "log keepers 6 s after down: $(wc -l < "$D/keepers-after-down.txt")"
cp "$LLMDECK_STATE_DIR"/logs/r.log* "$D/" 2>/dev/null
for f in "$D"/r.log*; do head -c 400 "$f" > "$f.head"; rm -f "$f"; done
cat "$D/actions.txt"; echo "--- bad restart stderr"; cat "$D/restart-bad.err"
stamp done
