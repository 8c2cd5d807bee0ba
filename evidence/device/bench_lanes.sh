#!/bin/bash
# Issue 3 on a 2-GPU device machine: agreement with `vllm bench serve` at two loads, one qwen3-0.6b
# server per GPU (torch.compile + CUDA graphs, as for any performance number; prefix caching off,
# since both tools of a pair send the same prompts). Servers and clients are pinned to separate
# CPU cores. The two servers start together, but the two loads are measured one after the other:
# in the run of 2026-11-30 (v3) the loads ran at the same time, and one 1 req/s run had 20% slower
# decode steps (2.43 ms vs 1.9-2.0) while the 16-concurrent lane was busy - at this size a decode
# step is bound by the host CPU, which the two lanes share.
#   1. GPU0, port 8010: 512 in / 256 out, 1 req/s, 20 prompts (the seeds' scenario), 3 runs per tool
#   2. GPU1, port 8011: 512 in / 256 out (range ratio R, default 0.5), 16 concurrent, N prompts
#      (default 480), 3 runs per tool. With equal lengths (v3) the 16 requests start and finish in
#      lockstep and each run's mean TTFT depends on how the waves happened to line up (55-78 ms for
#      one tool); unequal lengths spread the arrivals, as in real traffic.
# Results come back in $OUT (agreement_*.json, the lane logs).
#   bash evidence/device/bench_lanes.sh [BUDGET_S] [LABEL_SUFFIX] [C16_PROMPTS] [C16_RANGE_RATIO]
# Environment: MODEL (a /root/models folder, default qwen3-0.6b), ILEN / OLEN (default 512 / 256),
# N1 (1 req/s prompts, default 20), PARALLEL=1 (both loads at once). v6 (2026-11-30):
#   MODEL=qwen3-coder-30b-a3b ILEN=2048 OLEN=512 PARALLEL=1 bash evidence/device/bench_lanes.sh 560 v6 96 0.5
# the seeds' coding model shape and their second scenario (2048 in / 512 out): a TTFT of ~100 ms
# instead of ~35 ms, and a decode step bound by the GPU rather than the host CPU.
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
BUDGET=${1:-520}; SUF=${2:-v4}; N16=${3:-480}; RR=${4:-0.5}
T0=$(date +%s)
export PYTHONUNBUFFERED=1
B=/root/ev/bench; mkdir -p $B
MODEL=${MODEL:-qwen3-0.6b}; ILEN=${ILEN:-512}; OLEN=${OLEN:-256}; N1=${N1:-20}
TOK=/root/models/$MODEL
TS=""; command -v taskset >/dev/null && TS="taskset -c"
pin() { [ -n "$TS" ] && echo "$TS $1"; }
W=(--model $MODEL --tokenizer $TOK --input-len $ILEN --output-len $OLEN)
serve() {  # GPU PORT SERVER_CPUS LABEL
  CUDA_VISIBLE_DEVICES=$1 $(pin $3) bash .gpu/bin/device-serve.sh $MODEL $2 -- \
    --max-model-len 8192 --no-enable-prefix-caching > $B/serve-$4.txt 2>&1 || { echo "server $4 failed"; tail -30 $B/serve-$4.txt; return 1; }
}
measure() {  # PORT CLIENT_CPUS LABEL ARGS...
  local port=$1 ccpu=$2 label=$3; shift 3
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  PYTHONPATH=src:/tmp/site timeout $left $(pin $ccpu) python3 benchmarks/agreement_cpu.py \
    --base-url http://127.0.0.1:$port "${W[@]}" "$@" --label $label --out $B/agreement_$label.json
}
L1=h200-1rps-$SUF; L16=h200-c16-$SUF
serve 0 8010 0-11 $L1 & P0=$!
serve 1 8011 16-27 $L16 & P1=$!
wait $P0; R0=$?; wait $P1; R1=$?
echo "servers up at $(( $(date +%s) - T0 )) s"
# PARALLEL=1: both loads at once (v3's layout; fits a shorter device budget)
[ $R0 = 0 ] && measure 8010 12-15 $L1 --num-prompts $N1 --request-rate 1 --runs 3 --warmup > $B/lane0.txt 2>&1 &
[ "${PARALLEL:-0}" = 1 ] || wait
[ $R1 = 0 ] && measure 8011 28-31 $L16 --num-prompts $N16 --max-concurrency 16 --range-ratio $RR --runs 3 --warmup > $B/lane1.txt 2>&1
wait
for p in 8010 8011; do cp /root/vllm-$MODEL-$p.log $B/vllm-$MODEL-$p.log 2>/dev/null; done
bash .gpu/bin/device-stop.sh $MODEL 8010 >/dev/null 2>&1; bash .gpu/bin/device-stop.sh $MODEL 8011 >/dev/null 2>&1
cp $B/*.json "$OUT/" 2>/dev/null
tar czf "$OUT/bench-logs.tar.gz" -C /root/ev bench
cat $B/lane0.txt $B/lane1.txt
echo "total $(( $(date +%s) - T0 )) s"
