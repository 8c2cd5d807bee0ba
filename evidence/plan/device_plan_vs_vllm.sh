#!/bin/bash
# Evidence for issue 4: `llmdeck plan` against the lines real vLLM 0.22.0 prints at start-up, on the H200.
#
# Runs on the device machine after ../shared/gpu-lab is installed there (device-install.sh), from the
# repository root:   bash evidence/plan/device_plan_vs_vllm.sh [BUDGET_SECONDS [FIRST_RUN]]  (540, 1)
# FIRST_RUN lets a second device call continue where the first ran out of budget.
#
# For qwen3-0.6b, qwen3-30b-a3b and qwen3.6-35b-a3b, each at two contexts and two
# --gpu-memory-utilization values, it starts vLLM (random weights, --enforce-eager, --max-num-seqs 8),
# keeps the start-up log, stops it once the KV-cache lines are printed, and then evidence/plan/compare.py runs `llmdeck plan` for the same
# settings and writes $OUT/compare.json and $OUT/compare.md (relative errors, pass/fail at 2%).
# Runs are ordered so every model gets one run early (smallest first), then the rest; a run is
# skipped, not started, when the remaining budget is below its usual start time. Logs: $OUT/logs.tar.gz.
set -uo pipefail
BUDGET=${1:-540}
FIRST=${2:-1}
T0=$(date +%s)
OUT=${OUT:-/tmp/plan-evidence}
mkdir -p "$OUT" /root/plan-logs
ls /tmp/site/.done >/dev/null 2>&1 || { echo "COLD: gpu-lab not installed (run device-install.sh first)"; exit 3; }
# Lanes: on a machine with several GPUs, run lanes in parallel, one GPU each
# (LANE=0 NLANES=2 CUDA_VISIBLE_DEVICES=0 PORT=8000 … & LANE=1 … CUDA_VISIBLE_DEVICES=1 PORT=8001 …),
# then merge the runs-*.jsonl files and run compare.py once (evidence/device/plan_lanes.sh does this).
LANE=${LANE:-0}
NLANES=${NLANES:-1}
RUNS="$OUT/runs-$LANE-${CALL:-1}.jsonl"   # CALL: a later device call continues with RUN_ONLY="i j …"
: > "$RUNS"
PORT=${PORT:-8000}
# the device total as vLLM sees it (cudaMemGetInfo), for the record
PYTHONPATH=/tmp/site python3 -c 'import torch,json;f,t=torch.cuda.mem_get_info();print(json.dumps({"gpu_total_bytes":t,"gpu_free_bytes":f,"gpu":torch.cuda.get_device_name(0)}))' > "$OUT/device.json" 2>/dev/null || echo '{}' > "$OUT/device.json"

# Start vLLM like gpu-lab's device-serve.sh, but stop it as soon as it has printed its KV-cache lines
# (the numbers compared here): the API server's own start-up is not needed and costs device time.
serve_until_kv() {  # NAME TIMEOUT_S FLAGS...
  local name=$1 limit=$2; shift 2
  local log=/root/vllm-$name-$PORT.log pid t
  PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
    setsid python3 -m vllm.entrypoints.cli.main serve "/root/models/$name" --served-model-name "$name" \
    --port "$PORT" --load-format dummy "$@" > "$log" 2>&1 < /dev/null &
  pid=$!
  local rc=1
  for t in $(seq 1 "$limit"); do
    if grep -q "Maximum concurrency for" "$log"; then rc=0; sleep 1; break; fi
    kill -0 $pid 2>/dev/null || { echo "vllm exited after ${t}s"; tail -30 "$log"; break; }
    sleep 1
  done
  [ $rc -eq 0 ] || tail -5 "$log"
  kill -- -$pid 2>/dev/null
  for t in $(seq 1 20); do pgrep -g $pid >/dev/null 2>&1 || break; sleep 1; done
  pkill -9 -g $pid 2>/dev/null
  for t in $(seq 1 10); do pgrep -g $pid >/dev/null 2>&1 || break; sleep 1; done
  return $rc
}

HYB="--language-model-only --gdn-prefill-backend triton --kv-cache-dtype fp8"
# name | context | utilization | usual start seconds | extra flags     (order = run order)
PLAN=(
  "qwen3-0.6b|8192|0.90|55|"
  "qwen3-30b-a3b|8192|0.90|75|"
  "qwen3.6-35b-a3b|32768|0.90|95|$HYB --enable-prefix-caching --max-num-batched-tokens 4192"
  "qwen3-0.6b|32768|0.60|55|"
  "qwen3-0.6b|8192|0.60|55|"
  "qwen3-0.6b|32768|0.90|55|"
  "qwen3-30b-a3b|32768|0.70|75|"
  "qwen3.6-35b-a3b|131072|0.75|95|$HYB"
  "qwen3-30b-a3b|8192|0.70|75|"
  "qwen3-30b-a3b|32768|0.90|75|"
  "qwen3.6-35b-a3b|131072|0.90|95|$HYB --enable-prefix-caching --max-num-batched-tokens 4192"
  "qwen3.6-35b-a3b|32768|0.75|95|$HYB"
)
i=0
for row in "${PLAN[@]}"; do
  i=$((i + 1))
  IFS='|' read -r NAME CTX UTIL EST EXTRA <<< "$row"
  [ "$i" -lt "$FIRST" ] && continue
  [ $(( (i - 1) % NLANES )) -ne "$LANE" ] && continue
  if [ -n "${RUN_ONLY:-}" ] && ! [[ " $RUN_ONLY " == *" $i "* ]]; then continue; fi
  LEFT=$(( BUDGET - ($(date +%s) - T0) ))
  FLAGS="--max-model-len $CTX --gpu-memory-utilization $UTIL --enforce-eager --max-num-seqs 8 $EXTRA"
  if [ "$LEFT" -lt $(( EST + 15 )) ]; then
    echo "skip run $i ($NAME ctx=$CTX util=$UTIL): ${LEFT}s left, needs ~${EST}s"
    printf '{"run":%d,"model":"%s","context":%s,"utilization":%s,"flags":"%s","status":"skipped","log":null}\n' \
      $i "$NAME" "$CTX" "$UTIL" "$FLAGS" >> "$RUNS"
    continue
  fi
  echo "=== run $i: $NAME ctx=$CTX util=$UTIL (${LEFT}s left)"
  S0=$(date +%s)
  # shellcheck disable=SC2086
  serve_until_kv "$NAME" $(( LEFT - 10 )) $FLAGS > /root/plan-logs/serve-$i.txt 2>&1
  RC=$?
  SECS=$(( $(date +%s) - S0 ))
  LOG=/root/plan-logs/run-$i-$NAME.log
  cp "/root/vllm-$NAME-$PORT.log" "$LOG" 2>/dev/null
  grep -E "Setting attention block size|Model loading took|Available KV cache|KV cache size|Maximum concurrency" "$LOG" | sed 's/^.*\] //'
  STATUS=ok; [ $RC -eq 0 ] || STATUS=failed
  echo "    $STATUS in ${SECS}s"
  printf '{"run":%d,"model":"%s","context":%s,"utilization":%s,"flags":"%s","status":"%s","seconds":%d,"log":"%s"}\n' \
    $i "$NAME" "$CTX" "$UTIL" "$FLAGS" "$STATUS" "$SECS" "$LOG" >> "$RUNS"
  sleep 3  # let the driver hand the memory back before the next start
done
[ "$NLANES" -gt 1 ] && { echo "lane $LANE done in $(( $(date +%s) - T0 )) s"; exit 0; }
tar czf "$OUT/logs.tar.gz" -C /root plan-logs 2>/dev/null
PYTHONPATH=src:/tmp/site python3 evidence/plan/compare.py "$RUNS" --models-root /root/models \
  --device "$OUT/device.json" --out "$OUT"
echo "total $(( $(date +%s) - T0 )) s"
