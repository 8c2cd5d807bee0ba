#!/bin/bash
# `llmdeck eval` on the CPU engine with both real agents (what evidence/eval/cpu/ holds): the tiny
# random-weight model at --max-model-len 16384, replies capped at 48 tokens server-side. Run from the
# repo root under the engine lock (~3 min on 2 cores):
#   flock /tmp/llmdeck-engine.lock bash evidence/eval/cpu_capture.sh
# Needs opencode-ai@1.18.33 in .cache/clients/opencode (the integration tests install it) and aider
# 0.86.2 at $AIDER (default: aider on PATH).
set -u
PY=${PY:-.venv/bin/python}; AIDER=${AIDER:-$(command -v aider)}; OUT=${OUT:-evidence/eval/cpu}
export PYTHONPATH=$PWD/src LLMDECK_STATE_DIR=${LLMDECK_STATE_DIR:-/tmp/llmdeck-eval-state} COLUMNS=150
L="$PY -m llmdeck"; PORT=${PORT:-18431}; K=$(mktemp -d)
[ -d .cache/test-tiny ] || $L model make-tiny .cache/test-tiny
$L up --model .cache/test-tiny --engine cpu --name evalcap --port $PORT -- --max-model-len 16384 \
  --max-num-seqs 4 --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 \
  --override-generation-config '{"max_new_tokens": 48}' || exit 1
trap '$L down evalcap' EXIT
$L eval --client opencode --task fix-intervals --task fem-poisson-1d --server evalcap --max-turns 3 \
  --timeout 300 --agent-bin .cache/clients/opencode/node_modules/.bin/opencode --keep "$K/opencode" \
  --out "$OUT/opencode-tiny.json" --html "$OUT/opencode-tiny.html" > "$OUT/opencode-tiny.txt" 2>&1
echo "opencode rc=$?" >> "$OUT/opencode-tiny.txt"
[ -n "$AIDER" ] && $L eval --client aider --task fix-intervals --server evalcap --max-turns 3 --timeout 300 \
  --agent-bin "$AIDER" --keep "$K/aider" --out "$OUT/aider-tiny.json" > "$OUT/aider-tiny.txt" 2>&1
echo "aider rc=$?" >> "$OUT/aider-tiny.txt"
echo "workspaces and raw agent output: $K"
