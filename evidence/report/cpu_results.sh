#!/usr/bin/env bash
# Real llmdeck bench results on the CPU engine (tiny random-weight Qwen3, real tokenizer) for the
# HTML report: a concurrency sweep, and the same repeated scenario on two server configurations
# (--max-num-seqs 16 vs 2) for a comparison page. Run under the engine lock:
#   flock /tmp/llmdeck-engine.lock evidence/report/cpu_results.sh
# Writes evidence/report/results/{sweep,cmp-seqs16,cmp-seqs2}.json (a few minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
LLMDECK=${LLMDECK:-llmdeck}
OUT=evidence/report/results
STATE=$(mktemp -d)
export LLMDECK_STATE_DIR="$STATE/state" LLMDECK_CACHE_DIR="$PWD/.cache/engine-cache"
TINY="$PWD/.cache/report-tiny"
[ -f "$TINY/config.json" ] || "$LLMDECK" model make-tiny "$TINY"
PORT=${PORT:-8931}
mkdir -p "$OUT"
trap '"$LLMDECK" down --all >/dev/null 2>&1 || true; rm -rf "$STATE"' EXIT

serve() {  # NAME SEQS
  "$LLMDECK" up --model "$TINY" --engine cpu --name "$1" --port "$PORT" -- \
    --max-model-len 4096 --max-num-seqs "$2"
}
common=(--input-len 256 --output-len 64 --seed 7 --metrics-interval 0.5)

# a concurrency sweep (latency against load, the Pareto curve and its knee), goodput under SLOs
serve rep-seqs16 16
"$LLMDECK" bench rep-seqs16 "${common[@]}" --num-prompts 24 --max-concurrency 1,2,4,8,16 \
  --goodput ttft:100 --goodput tpot:15 --out "$OUT/sweep.json"
"$LLMDECK" bench rep-seqs16 "${common[@]}" --num-prompts 24 --max-concurrency 8 --repeat 3 \
  --out "$OUT/cmp-seqs16.json"
"$LLMDECK" down rep-seqs16

# the same repeated scenario on a server that runs only 2 sequences at once (comparison page), and
# an overload: arrivals faster than it serves, so its waiting queue never drains (seed 004's picture)
serve rep-seqs2 2
"$LLMDECK" bench rep-seqs2 "${common[@]}" --num-prompts 24 --max-concurrency 8 --repeat 3 \
  --out "$OUT/cmp-seqs2.json"
"$LLMDECK" bench rep-seqs2 "${common[@]}" --output-len 128 --num-prompts 100 --request-rate 6 \
  --out "$OUT/overload.json"
"$LLMDECK" down rep-seqs2
