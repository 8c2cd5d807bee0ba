#!/bin/bash
# Evidence for issue 6 (llmdeck check on real vLLM 0.22.0, H200, random weights of real shapes).
# Starts qwen3.6-35b-a3b through gpu-lab with seed 000's flags plus --enforce-eager (a functional test:
# half the start-up time; bf16 shape; hybrid model needs
# --language-model-only --gdn-prefill-backend triton on this kit), runs `llmdeck check --client opencode`
# (JSON + human table) and `llmdeck connect opencode --print`, then stops the server.
# Run on the device from the repo root, after gpu-lab's stage/carry/install:
#   bash evidence/check/device_check.sh
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
OUT=${OUT:-/tmp/llmdeck-evidence}; mkdir -p "$OUT"
NAME=qwen3.6-35b-a3b; PORT=${PORT:-8000}; URL=http://127.0.0.1:$PORT
trap 'bash .gpu/bin/device-stop.sh $NAME $PORT >/dev/null 2>&1' EXIT
bash .gpu/bin/device-serve.sh $NAME $PORT -- \
  --language-model-only --gdn-prefill-backend triton \
  --max-model-len 131072 --gpu-memory-utilization 0.85 --enable-prefix-caching \
  --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser qwen3_coder \
  --kv-cache-dtype fp8 --max-num-seqs 8 --max-num-batched-tokens 4096 --enforce-eager \
  | tee "$OUT/serve-qwen36.txt" || exit 1
export PYTHONPATH=src:/tmp/site COLUMNS=120
python3 -m llmdeck check $URL --client opencode --json > "$OUT/check-qwen36.json" 2> "$OUT/check-qwen36.stderr"
echo "check --json exit code: $?" | tee -a "$OUT/check-qwen36.stderr"
python3 -m llmdeck check $URL --client opencode --long-context-tokens 8192 > "$OUT/check-qwen36.txt" 2>&1
echo "check (table) exit code: $?" >> "$OUT/check-qwen36.txt"
python3 -m llmdeck connect opencode --server $URL --print > "$OUT/connect-opencode-qwen36.json" 2>&1
cat "$OUT/check-qwen36.txt"
