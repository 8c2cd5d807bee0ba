#!/usr/bin/env bash
# Issue 23's field case on the CPU engine: the tiny Qwen3 served at --max-model-len 4096 and 16384
# (tool + reasoning parsers), then `llmdeck check --client opencode` and `llmdeck connect opencode`
# against each. Outputs go to evidence/clients/results/ (check tables and JSON, connect's answer).
#
#   evidence/clients/field_case.sh          # needs the CPU engine (make test's venv) and .cache/test-tiny
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LLMDECK=${LLMDECK:-$ROOT/.venv/bin/llmdeck}
OUT=$ROOT/evidence/clients/results
STATE=$(mktemp -d /tmp/llmdeck-field.XXXXXX)
export LLMDECK_STATE_DIR=$STATE COLUMNS=140
MODEL=$ROOT/.cache/test-tiny
mkdir -p "$OUT"
trap '"$LLMDECK" down --all >/dev/null 2>&1; rm -rf "$STATE"' EXIT

for len in 4096 16384; do
  port=$((18600 + len / 4096))
  "$LLMDECK" up --model "$MODEL" --engine cpu --name "f$len" --port "$port" \
    --served-model-name tiny-qwen3 --force -- --max-model-len "$len" --max-num-seqs 4 \
    --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 >/dev/null || exit 1
  url=http://127.0.0.1:$port
  "$LLMDECK" check "$url" --client opencode --long-context-tokens 256 > "$OUT/check-opencode-$len.txt" 2>&1
  echo "exit $?" >> "$OUT/check-opencode-$len.txt"
  "$LLMDECK" check "$url" --client opencode --long-context-tokens 256 --json > "$OUT/check-opencode-$len.json" 2>/dev/null
  "$LLMDECK" connect opencode --server "$url" --print > "$OUT/connect-opencode-$len.txt" 2>&1
  echo "exit $?" >> "$OUT/connect-opencode-$len.txt"
  "$LLMDECK" down "f$len" >/dev/null
done
ls -l "$OUT"
