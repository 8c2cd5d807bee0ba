#!/usr/bin/env bash
# The seeds' suite (`llmdeck bench --suite seeds`) on the CPU engine (tiny random-weight Qwen3, real
# tokenizer, max_model_len 4096: the four long-context scenarios are skipped, with the reason), written
# as a result and as the HTML page. Run under the engine lock:
#   flock /tmp/llmdeck-engine.lock evidence/report/cpu_seeds.sh
# Writes evidence/report/results/seeds.json and evidence/report/seeds.html (a few minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
LLMDECK=${LLMDECK:-llmdeck}
STATE=$(mktemp -d)
export LLMDECK_STATE_DIR="$STATE/state" LLMDECK_CACHE_DIR="$PWD/.cache/engine-cache"
TINY="$PWD/.cache/report-tiny"
[ -f "$TINY/config.json" ] || "$LLMDECK" model make-tiny "$TINY"
PORT=${PORT:-8933}
trap '"$LLMDECK" down --all >/dev/null 2>&1 || true; rm -rf "$STATE"' EXIT
"$LLMDECK" up --model "$TINY" --engine cpu --name rep-seeds --port "$PORT" -- \
  --max-model-len 4096 --max-num-seqs 16
"$LLMDECK" bench rep-seeds --suite seeds --metrics-interval 1 \
  --out evidence/report/results/seeds.json --html evidence/report/seeds.html
"$LLMDECK" down rep-seeds
