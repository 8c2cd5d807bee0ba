#!/bin/bash
# Evidence for issue 18: `llmdeck plan` for the model families beyond Qwen (MLA, sliding window +
# sinks, MXFP4/NVFP4/AWQ, RoPE scaling) against the start-up lines real vLLM 0.22.0 prints on the H200.
#
# On the device machine, after ../shared/gpu-lab is installed there (device-install.sh), from the
# repository root, with the family configs carried in $CONFIGS (one folder per shape, config.json and,
# where the checkpoint has one, hf_quant_config.json):
#   CONFIGS=.gpu/families bash evidence/plan/families/device_families.sh BUDGET_S [RUN_ONLY "i j …" (run in that order)]
# Each row starts vLLM on random weights of that shape (`--load-format dummy`, the qwen3 tokenizer,
# `--enforce-eager --max-num-seqs 8`), keeps the start-up log and stops vLLM once it has printed its
# KV-cache lines. A run is skipped, not started, when the remaining budget is below its usual start
# time; state lives in /root/fam so a later call continues (RUN_ONLY). Writes $OUT/runs.jsonl (the
# format of evidence/plan/results/runs.jsonl), $OUT/logs/run-N-NAME.log and $OUT/device.json.
set -uo pipefail
BUDGET=${1:-540}
RUN_ONLY=${2:-}
T0=$(date +%s)
OUT=${OUT:-/tmp/fam-out}
CONFIGS=${CONFIGS:-.gpu/families}
ST=${ST:-/root/fam}  # a later round uses its own state (ST=/root/fam2)
mkdir -p "$OUT/logs" $ST/logs
ls /tmp/site/.done >/dev/null 2>&1 || { echo "COLD: gpu-lab not installed (run device-install.sh first)"; exit 3; }
PORT=${PORT:-8000}
# COMPILED=1: vLLM's default mode (torch.compile + CUDA graphs; no --enforce-eager, no --max-num-seqs 8:
# a row states what it wants) and each start runs on until the graphs are captured, for what they took
COMPILED=${COMPILED:-0}
DONE_LINE="Maximum concurrency for"; [ "$COMPILED" = 1 ] && DONE_LINE="Graph capturing finished"
# at DEBUG vLLM also prints each cudagraph mode's estimate: first capture + (n-1) x per-graph
LOG_LEVEL=INFO; [ "$COMPILED" = 1 ] && LOG_LEVEL=DEBUG
PYTHONPATH=/tmp/site python3 -c 'import torch,json;f,t=torch.cuda.mem_get_info();print(json.dumps({"gpu_total_bytes":t,"gpu_free_bytes":f,"gpu":torch.cuda.get_device_name(0)}))' > "$OUT/device.json" 2>/dev/null || echo '{}' > "$OUT/device.json"
for d in "$CONFIGS"/*/; do
  n=$(basename "$d"); mkdir -p "/root/models/$n"; cp "$d"/*.json "/root/models/$n/"
done

serve_until_kv() {  # NAME TIMEOUT_S FLAGS...
  local name=$1 limit=$2; shift 2
  local log=/root/vllm-$name-$PORT.log pid t
  PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_LOGGING_LEVEL=$LOG_LEVEL PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
    setsid python3 -m vllm.entrypoints.cli.main serve "/root/models/$name" --served-model-name "$name" \
    --tokenizer /root/models/qwen3-0.6b --port "$PORT" --load-format dummy "$@" > "$log" 2>&1 < /dev/null &
  pid=$!
  local rc=1
  for t in $(seq 1 "$limit"); do
    if grep -q "$DONE_LINE" "$log"; then rc=0; sleep 1; break; fi
    kill -0 $pid 2>/dev/null || { echo "vllm exited after ${t}s"; grep -E "Error|error" "$log" | tail -8; break; }
    sleep 1
  done
  kill -- -$pid 2>/dev/null
  for t in $(seq 1 20); do pgrep -g $pid >/dev/null 2>&1 || break; sleep 1; done
  pkill -9 -g $pid 2>/dev/null
  for t in $(seq 1 10); do pgrep -g $pid >/dev/null 2>&1 || break; sleep 1; done
  return $rc
}

# name | context | utilization | usual start seconds | extra flags     (order = run order)
PLAN_FILE=${PLAN_FILE:-evidence/plan/families/plan.txt}
mapfile -t PLAN < <(grep -v '^#' "$PLAN_FILE" | grep -v '^\s*$')
# RUN_ONLY runs its rows in the order given (the most wanted first when the budget may not last)
ORDER=${RUN_ONLY:-$(seq -s ' ' 1 ${#PLAN[@]})}
for i in $ORDER; do
  row=${PLAN[$((i - 1))]:-}
  [ -n "$row" ] || { echo "skip run $i: no such row in $PLAN_FILE"; continue; }
  IFS='|' read -r NAME CTX UTIL EST EXTRA <<< "$row"
  [ -d "/root/models/$NAME" ] || { echo "skip run $i: no config for $NAME"; continue; }
  LEFT=$(( BUDGET - ($(date +%s) - T0) ))
  FLAGS="--max-model-len $CTX --gpu-memory-utilization $UTIL --enforce-eager --max-num-seqs 8 $EXTRA"
  [ "$COMPILED" = 1 ] && FLAGS="--max-model-len $CTX --gpu-memory-utilization $UTIL $EXTRA"
  if [ "$LEFT" -lt $(( EST + 15 )) ]; then
    echo "skip run $i ($NAME): ${LEFT}s left, needs ~${EST}s"; continue
  fi
  echo "=== run $i: $NAME ctx=$CTX util=$UTIL (${LEFT}s left)"
  S0=$(date +%s)
  # shellcheck disable=SC2086
  serve_until_kv "$NAME" $(( LEFT - 10 )) $FLAGS > $ST/serve-$i.txt 2>&1
  RC=$?
  cat $ST/serve-$i.txt
  SECS=$(( $(date +%s) - S0 ))
  LOG=$ST/logs/run-$i-$NAME.log
  cp "/root/vllm-$NAME-$PORT.log" "$LOG" 2>/dev/null
  grep -E "Resolved architecture|Using max model len|Setting attention block size|Model loading took|Available KV cache|KV cache size|Maximum concurrency|CUDA graph memory|first-capture|Graph capturing finished|CUDA graph pool memory|torch.compile took" "$LOG" | sed 's/^.*\] //'
  STATUS=ok; [ $RC -eq 0 ] || STATUS=failed
  echo "    $STATUS in ${SECS}s"
  printf '{"run":%d,"model":"%s","context":%s,"utilization":%s,"flags":"%s","status":"%s","seconds":%d,"log":"%s"}\n' \
    $i "$NAME" "$CTX" "$UTIL" "$FLAGS" "$STATUS" "$SECS" "logs/run-$i-$NAME.log" >> $ST/runs.jsonl
  sleep 3  # let the driver hand the memory back before the next start
done
cp $ST/runs.jsonl "$OUT/" 2>/dev/null; cp $ST/logs/* "$OUT/logs/" 2>/dev/null
echo "total $(( $(date +%s) - T0 )) s"
