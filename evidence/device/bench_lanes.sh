#!/bin/bash
# Issue 3 on a 2-GPU device machine: agreement with `vllm bench serve` at two loads, one lane per GPU,
# each lane its own qwen3-0.6b server (torch.compile + CUDA graphs, as for any performance number;
# prefix caching off, since both tools of a pair send the same prompts).
# Servers and clients are pinned to separate CPU cores so the clients do not slow the servers down.
#   lane 0 (GPU0, port 8010): 512 in / 256 out, 1 req/s, 20 prompts (the seeds' scenario), 3 runs per tool
#   lane 1 (GPU1, port 8011): 512 in / 256 out, 16 concurrent, 320 prompts, 3 runs; then client cost
# Results come back in $OUT (agreement_*.json, client_cost_*.json, the lane logs).
#   bash evidence/device/bench_lanes.sh [LANE_BUDGET_S]
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
BUDGET=${1:-520}
T0=$(date +%s)
export PYTHONUNBUFFERED=1
B=/root/ev/bench; mkdir -p $B
TOK=/root/models/qwen3-0.6b
TS=""; command -v taskset >/dev/null && TS="taskset -c"
pin() { [ -n "$TS" ] && echo "$TS $1"; }
W=(--model qwen3-0.6b --tokenizer $TOK --input-len 512 --output-len 256)
lane() {  # GPU PORT SERVER_CPUS CLIENT_CPUS LABEL ARGS...
  local gpu=$1 port=$2 scpu=$3 ccpu=$4 label=$5; shift 5
  CUDA_VISIBLE_DEVICES=$gpu $(pin $scpu) bash .gpu/bin/device-serve.sh qwen3-0.6b $port -- \
    --max-model-len 8192 --no-enable-prefix-caching > $B/serve-$label.txt 2>&1 || { echo "server $label failed"; tail -30 $B/serve-$label.txt; return 1; }
  cp /root/vllm-qwen3-0.6b-$port.log $B/vllm-$label.log 2>/dev/null
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  PYTHONPATH=src:/tmp/site timeout $left $(pin $ccpu) python3 benchmarks/agreement_cpu.py \
    --base-url http://127.0.0.1:$port "${W[@]}" "$@" --label $label --out $B/agreement_$label.json
}
(lane 0 8010 0-11 12-15 h200-1rps-v3 --num-prompts 20 --request-rate 1 --runs 3 --warmup > $B/lane0.txt 2>&1) &
(lane 1 8011 16-27 28-31 h200-c16-v3 --num-prompts 320 --max-concurrency 16 --runs 3 --warmup > $B/lane1.txt 2>&1
 left=$(( BUDGET - ($(date +%s) - T0) ))
 if [ $left -gt 100 ]; then
   PYTHONPATH=src:/tmp/site timeout $left $(pin 28-31) python3 benchmarks/client_cost.py \
     --base-url http://127.0.0.1:8011 "${W[@]}" --num-prompts 96 --max-concurrency 16 --runs 3 \
     --label h200-c16-v3 --out $B/client_cost_h200-c16-v3.json >> $B/lane1.txt 2>&1
 else echo "client cost skipped: ${left}s left" >> $B/lane1.txt; fi) &
wait
bash .gpu/bin/device-stop.sh qwen3-0.6b 8010 >/dev/null 2>&1; bash .gpu/bin/device-stop.sh qwen3-0.6b 8011 >/dev/null 2>&1
cp $B/*.json "$OUT/" 2>/dev/null
tar czf "$OUT/bench-logs.tar.gz" -C /root/ev bench
cat $B/lane0.txt $B/lane1.txt
echo "total $(( $(date +%s) - T0 )) s"
