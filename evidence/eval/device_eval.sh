#!/bin/bash
# Issue 25 on ONE H200 (kind nvidia-h200): `llmdeck eval` with the real opencode on the seeds' coding
# model shape (random weights: scores are meaningless and the result says why), under two serving
# configurations — KV cache fp8 and bf16 — on the same suite, transcripts and server metrics kept.
#
# Ran once inside evidence/device/gateway_eval_h200.sh (session 12, evidence/eval/README.md), with that
# lease's server flags (131,072 tokens, sleep mode); this is the same suite on its own, at 64K. Run from
# the repo root on the device, after gpu-lab's stage/carry/install (../shared/gpu-lab/README.md), with the
# agent carried too: the opencode binary (npm opencode-ai@1.18.33's platform package, opencode-linux-x64)
# xz-compressed to ~42 MB as .agent/opencode.xz (`xz -9 -T2 -c BIN > .agent/opencode.xz`; carry
# [".agent"]), unpacked to $OPENCODE_BIN. Offline it needs no provider cache: its
# @ai-sdk/openai-compatible is built in (seen with `unshare -n` here: the plugin install it tries first
# fails quietly). LLMDECK_EVAL_CACHE_HOME stays available for agents that do need one.
#   bash evidence/eval/device_eval.sh            # ~2 x (3 min start + the suite under the limits)
# Writes $OUT/eval/{fp8,bf16}.json, {fp8,bf16}-keep/ (final workspaces and the agent's raw output),
# compare.html, the servers' logs; then compare here: llmdeck report fp8.json bf16.json --html cmp.html
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
OUT=${OUT:-/tmp/llmdeck-evidence}; B=$OUT/eval; mkdir -p "$B"
OPENCODE_BIN=${OPENCODE_BIN:-/root/stash/agent/opencode}
[ -x "$OPENCODE_BIN" ] || [ ! -f .agent/opencode.xz ] || { mkdir -p "$(dirname "$OPENCODE_BIN")" &&
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    .agent/opencode.xz "$OPENCODE_BIN" && chmod +x "$OPENCODE_BIN"; }
[ -x "$OPENCODE_BIN" ] || { echo "no opencode at $OPENCODE_BIN: carry it first (see the header)"; exit 3; }
MODEL=${MODEL:-qwen3-coder-30b-a3b}; PORT=${PORT:-8020}; URL=http://127.0.0.1:$PORT
SUITE=${SUITE:-core}
# what the seeds serve the coding model with (seed 004: tools with qwen3_coder), a 64K context (seed
# 004 §7.7 ran at 64K), and a server-side reply cap: random weights never stop on their own
COMMON=(--max-model-len 65536 --enable-auto-tool-choice --tool-call-parser qwen3_coder
        --enable-prefix-caching --override-generation-config '{"max_new_tokens": 512}')
export PYTHONPATH=src:/tmp/site COLUMNS=150
trap 'bash .gpu/bin/device-stop.sh $MODEL $PORT >/dev/null 2>&1' EXIT
for cfg in fp8 bf16; do
  kv=(); [ $cfg = fp8 ] && kv=(--kv-cache-dtype fp8)
  bash .gpu/bin/device-serve.sh $MODEL $PORT -- "${COMMON[@]}" "${kv[@]}" > "$B/serve-$cfg.txt" 2>&1 \
    || { echo "server ($cfg) failed"; tail -30 "$B/serve-$cfg.txt"; exit 1; }
  python3 -m llmdeck eval --client opencode --suite $SUITE --server $URL --agent-bin "$OPENCODE_BIN" \
    --max-turns 12 --timeout 300 --out "$B/$cfg.json" --keep "$B/$cfg-keep" > "$B/$cfg.txt" 2>&1
  echo "eval $cfg exit $?" | tee -a "$B/$cfg.txt"
  cp /root/vllm-$MODEL-$PORT.log "$B/vllm-$cfg.log" 2>/dev/null
  bash .gpu/bin/device-stop.sh $MODEL $PORT >/dev/null 2>&1
done
python3 -m llmdeck report "$B/fp8.json" "$B/bf16.json" --html "$B/compare.html" >/dev/null 2>>"$B/bf16.txt" || true
tail -15 "$B/fp8.txt" "$B/bf16.txt"
