#!/usr/bin/env bash
# A 2,000-request llmdeck bench result on the CPU engine (tiny random-weight Qwen3, real tokenizer),
# for the HTML report's size and speed (benchmarks/report_html_speed.py). Run under the engine lock:
#   flock /tmp/llmdeck-engine.lock evidence/report/cpu_big.sh
# Writes evidence/report/results/big-2000.json.gz (a few minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
LLMDECK=${LLMDECK:-llmdeck}
OUT=evidence/report/results
STATE=$(mktemp -d)
export LLMDECK_STATE_DIR="$STATE/state" LLMDECK_CACHE_DIR="$PWD/.cache/engine-cache"
TINY="$PWD/.cache/report-tiny"
[ -f "$TINY/config.json" ] || "$LLMDECK" model make-tiny "$TINY"
PORT=${PORT:-8932}
mkdir -p "$OUT"
trap '"$LLMDECK" down --all >/dev/null 2>&1 || true; rm -rf "$STATE"' EXIT
"$LLMDECK" up --model "$TINY" --engine cpu --name rep-big --port "$PORT" -- \
  --max-model-len 4096 --max-num-seqs 16
"$LLMDECK" bench rep-big --input-len 128 --output-len 16 --num-prompts 2000 --max-concurrency 16 \
  --seed 11 --out "$STATE/big-2000.json"
"$LLMDECK" down rep-big
gzip -9 -c "$STATE/big-2000.json" > "$OUT/big-2000.json.gz"
