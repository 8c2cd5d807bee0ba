#!/bin/bash
# The dashboard's stop of a start under way, on a GPU's vLLM 0.22 (one call after gpu-lab's stash):
# `llmdeck gateway` with two models on demand, Qwen3-Coder-30B-A3B (random weights, compiled: a load of
# ~2 minutes) and Qwen3-0.6B. The dashboard starts the coder; 25 s into its load a request for the small
# model arrives (it waits: one start at a time); then the dashboard stops the coder's start. Measured:
# how soon the coder's state is `stopped`, how soon the GPU's memory is back (nvidia-smi every 0.5 s),
# that no engine process of it is left (`--query-compute-apps`), and when the small model's request is
# answered (its own start included). Before this the start held the manager's lock until it ended.
#   run  command: OUT=$OUT bash evidence/device/start_stop_gpu.sh     (~4 min; writes $OUT/start-stop.tgz)
#   on an H100 (80 GB): CODER_UTIL=0.88 (the coder's 57 GiB of weights need it; 0.88 + 0.06 < 0.95)
#   STOP_AT_MIB=N: the small model's request and the stop come once the coder's load holds N MiB of the
#   GPU (its weights in place, compiling), not 25 s after the launch (on a cold machine that was still
#   vLLM's imports: nothing on the GPU yet to give back)
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s.%N)
el() { python3 -c "import time; print(f'{time.time() - $T0:.1f}')"; }
stamp() { echo "[$(el) s] $*"; }
W=/root/start-stop; D=$W/start-stop; mkdir -p "$D"
OUT=${OUT:-/tmp/start-stop-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/start-stop.tgz" -C "$W" start-stop 2>/dev/null' EXIT
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state-stop
PY=$(command -v python3)
"$PY" - "$PY" "$W" <<'PYEOF'
import os, sys
from llmdeck.engines.spec import LaunchSpec
py, w = sys.argv[1:3]
env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
coder_util = os.environ.get("CODER_UTIL", "0.80")  # an H100 (80 GB) needs 0.88: 57 GiB of weights
for name, shape, util, port, eager in (("coder", "qwen3-coder-30b-a3b", coder_util, 8201, False),
                                      ("small", "qwen3-0.6b", "0.06", 8202, True)):
    args = ["--load-format", "dummy", "--tokenizer", "/root/models/qwen3-0.6b", "--max-model-len", "8192",
            "--gpu-memory-utilization", util] + (["--enforce-eager"] if eager else [])
    spec = LaunchSpec(name=name, engine="venv", python=py, model=f"/root/models/{shape}",
                      served_model_name=name, port=port, env=env, vllm_args=args)
    open(f"{w}/{name}.json", "w").write(spec.model_dump_json(indent=1))
PYEOF
BUDGET_GIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | awk '{print int($1 / 1024 * 0.95)}')
cat > $W/gateway.yaml <<EOF
routes:
  - {model: coder, backends: [{spec: $W/coder.json, start_timeout_s: 900}]}
  - {model: small, backends: [{spec: $W/small.json, start_timeout_s: 900}]}
budget: {memory_gib: $BUDGET_GIB, kind: gpu, queue: {wait_s: 600}}   # 0.95 of the card: both plans fit
timeouts: {response_s: 900}
EOF
GW=http://127.0.0.1:4200; UI=(-H 'X-Llmdeck-UI: 1' -H 'Content-Type: application/json' -d '{}')
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader > "$D/gpu.txt"; cat "$D/gpu.txt"
( while :; do echo "$(el),$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)"; sleep 0.5; done ) \
  > "$D/gpu-memory.csv" 2>/dev/null &
SAMPLER=$!
"$PY" -m llmdeck gateway up --config $W/gateway.yaml --port 4200 > "$D/gateway-up.txt" 2>&1; tail -1 "$D/gateway-up.txt"
state() { curl -s $GW/gateway/status | "$PY" -c "import json,sys; print({m['model']: m['state'] for m in json.load(sys.stdin)['models']}['$1'])"; }

stamp "dashboard: start coder"
curl -s -o /dev/null -w 'start coder: HTTP %{http_code}\n' "${UI[@]}" $GW/ui/api/models/coder/start | tee "$D/actions.txt"
for _ in $(seq 600); do [ -e $LLMDECK_STATE_DIR/servers/coder.json ] && break; sleep 0.2; done
[ -e $LLMDECK_STATE_DIR/servers/coder.json ] || { stamp "coder never launched"; curl -s $GW/gateway/status; exit 1; }
stamp "coder's engine launched (record saved): $(state coder)" | tee -a "$D/actions.txt"
if [ "${STOP_AT_MIB:-0}" -gt 0 ]; then  # wait until the coder's load holds this much of the GPU (max 300 s)
  for _ in $(seq 600); do
    [ "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)" -ge "$STOP_AT_MIB" ] && break; sleep 0.5
  done
  stamp "coder's load holds $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits) MiB" | tee -a "$D/actions.txt"
else
  sleep 25
fi
stamp "a request for small (waits behind coder's start)" | tee -a "$D/actions.txt"
( t=$(date +%s.%N); code=$(curl -s -o "$D/small-reply.json" -w '%{http_code}' $GW/v1/chat/completions \
    -H 'Content-Type: application/json' -d '{"model": "small", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8}')
  echo "[$(el) s] small answered HTTP $code after $(python3 -c "import time; print(f'{time.time() - $t:.1f}')") s" >> "$D/actions.txt" ) &
REQ=$!
sleep 5
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$D/apps-before-stop.txt"
used_before=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)
stamp "dashboard: stop coder (state $(state coder), GPU used $used_before MiB)" | tee -a "$D/actions.txt"
curl -s -o /dev/null -w 'stop coder: HTTP %{http_code}\n' "${UI[@]}" $GW/ui/api/models/coder/stop | tee -a "$D/actions.txt"
for _ in $(seq 600); do [ "$(state coder)" = stopped ] && break; sleep 0.1; done
stamp "coder stopped; coder.json record: $(ls $LLMDECK_STATE_DIR/servers/coder.json 2>&1 | tail -c 40)" | tee -a "$D/actions.txt"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$D/apps-after-stop.txt"
wait $REQ
stamp "done waiting for small" | tee -a "$D/actions.txt"
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$D/apps-small.txt"
curl -s $GW/ui/api/state > "$D/ui-state.json"; curl -s $GW/gateway/status > "$D/gateway-status.json"
"$PY" -m llmdeck gateway down > /dev/null 2>&1
kill $SAMPLER 2>/dev/null
cp $LLMDECK_STATE_DIR/logs/gateway.log "$D/" 2>/dev/null
cp $LLMDECK_STATE_DIR/logs/coder*.log "$D/vllm-coder.log" 2>/dev/null
cat "$D/actions.txt"; cat "$D"/apps-*.txt
stamp done
