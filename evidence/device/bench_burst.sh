#!/bin/bash
# Issue 3, 1 req/s on a 2-GPU device machine: does the raw TTFT agree once near-collisions are gone?
# At 1 req/s with Poisson arrivals, two requests land within one ~90 ms prefill of each other in ~9% of
# gaps, and whether the second is batched with the first or waits a whole prefill turns on a millisecond:
# the server's own mean TTFT then moved by up to 15 ms between the two runs of one pair (v6, v7). Gamma
# arrivals of shape 4 (vLLM's --burstiness 4: same rate, gaps with half the spread) make such a gap
# rare (~0.1%). Two servers of the same shape, one per GPU, both at 1 req/s at the same time:
#   1. GPU0, port 8010: --burstiness 4     2. GPU1, port 8011: Poisson (--burstiness 1), a control
#   MODEL=qwen3-coder-30b-a3b bash evidence/device/bench_burst.sh BUDGET_S LABEL_SUFFIX PROMPTS
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
BUDGET=${1:-400}; SUF=${2:-v8}; N=${3:-20}
T0=$(date +%s)
export PYTHONUNBUFFERED=1
B=$OUT/bench; mkdir -p $B  # straight under $OUT: what was measured comes back even if the call is cut
MODEL=${MODEL:-qwen3-coder-30b-a3b}; ILEN=${ILEN:-2048}; OLEN=${OLEN:-512}
TS=""; command -v taskset >/dev/null && TS="taskset -c"
pin() { [ -n "$TS" ] && echo "$TS $1"; }
serve() {  # GPU PORT SERVER_CPUS LABEL
  CUDA_VISIBLE_DEVICES=$1 $(pin $3) bash .gpu/bin/device-serve.sh $MODEL $2 -- \
    --max-model-len 8192 --no-enable-prefix-caching > $B/serve-$4.txt 2>&1 || { echo "server $4 failed"; tail -30 $B/serve-$4.txt; return 1; }
}
measure() {  # PORT CLIENT_CPUS LABEL BURSTINESS
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  PYTHONPATH=src:/tmp/site timeout $left $(pin $2) python3 benchmarks/agreement_cpu.py \
    --base-url http://127.0.0.1:$1 --model $MODEL --tokenizer /root/models/$MODEL --input-len $ILEN \
    --output-len $OLEN --num-prompts $N --request-rate 1 --burstiness $4 --runs 3 --warmup \
    --warmup-prompts 16 --label $3 --out $B/agreement_$3.json
}
LA=h200-1rps-burst4-$SUF; LB=h200-1rps-poisson-$SUF
serve 0 8010 0-11 $LA & P0=$!
serve 1 8011 16-27 $LB & P1=$!
wait $P0; R0=$?; wait $P1; R1=$?
echo "servers up at $(( $(date +%s) - T0 )) s"
[ $R0 = 0 ] && measure 8010 12-15 $LA 4 > $B/lane0.txt 2>&1 &
[ $R1 = 0 ] && measure 8011 28-31 $LB 1 > $B/lane1.txt 2>&1
wait
for p in 8010 8011; do cp /root/vllm-$MODEL-$p.log $B/vllm-$MODEL-$p.log 2>/dev/null; done
cat $B/lane0.txt $B/lane1.txt
echo "total $(( $(date +%s) - T0 )) s"
