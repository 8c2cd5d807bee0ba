#!/bin/bash
# Issues 19 and 25 on ONE H200 (kind nvidia-h200) in one lease, after gpu-lab's stage/carry/install
# (../shared/gpu-lab/README.md) and the agent's carry (below). One orchestrator runs in the background
# (setsid: it outlives each call while the machine stays warm); each `wait` call follows it for up to
# ~9.5 minutes and brings back everything written so far as $OUT/wait-K.tgz (unpack it under
# evidence/device/gateway-eval/). Stages, one vLLM at a time on the GPU:
#
#   B  (first) the server below with --kv-cache-dtype fp8: #25 `llmdeck eval --client opencode --suite core`.
#   A  the seeds' coding model shape (Qwen3-Coder-30B-A3B, random weights, compiled, 131,072 tokens,
#      0.58 of the H200, sleep mode as in serving_layer.sh) with what the seeds serve it with for agents
#      (tools with qwen3_coder, prefix caching) and a 512-token reply cap (random weights never stop):
#      #25 the same suite (KV cache bf16, the default);
#      #19 gateway overhead at 64 streams, direct vs `llmdeck gateway` vs LiteLLM, 1,024 requests x 5
#      rotating rounds (LiteLLM 64 per round: at ~0.13x of direct it would otherwise take the lease);
#      #19 the 10-minute 256-stream soak through the gateway.
#   Then `llmdeck report` compares the two eval runs.
#
#   bash evidence/device/gateway_eval_h200.sh start     # starts the orchestrator, then follows it
#   bash evidence/device/gateway_eval_h200.sh wait      # follows it (again), ~9.5 min at most
# Ran on 2026-12-01: evidence/device/gateway-eval/README.md (23 min of the orchestrator, 8 staging calls).
# Watching for a process from a device call: `pgrep -f PATTERN` also matches the call's own shell,
# whose command line holds PATTERN; test for the result file instead.
#
# The agent: opencode 1.18.33's binary (npm opencode-linux-x64), xz-compressed to ~42 MB, carried as
# .agent/opencode.xz (`xz -9 -T2 -c BIN > .agent/opencode.xz`); offline it needs no provider cache
# (its @ai-sdk/openai-compatible is built in; the plugin install it tries first fails quietly).
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
MODE=${1:-wait}
W=/root/gateway-eval; mkdir -p "$W"
OUT=${OUT:-/tmp/gateway-eval-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=150 \
       LLMDECK_STATE_DIR=/root/llmdeck-state
MODEL=qwen3-coder-30b-a3b; PORT=8000; URL=http://127.0.0.1:$PORT
PY=$(command -v python3)
OPENCODE_BIN=/root/agent/opencode
SERVER_FLAGS=(--max-model-len 131072 --gpu-memory-utilization 0.58 --enable-sleep-mode
              --enable-auto-tool-choice --tool-call-parser qwen3_coder --enable-prefix-caching
              --override-generation-config '{"max_new_tokens": 512}')
T0=$(date +%s)
stamp() { echo "[$(date +%T) +$(( $(date +%s) - T0 )) s] $*" | tee -a "$W/progress.txt"; }

gpu_idle() {  # a stopped server's memory must be back before the next one profiles the GPU
  for _ in $(seq 1 60); do
    [ "$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)" -lt 2048 ] && return 0; sleep 1
  done; stamp "GPU memory still in use after 60 s"
}

serve() {  # CFG [extra flags]
  local cfg=$1; shift
  gpu_idle
  stamp "start $MODEL ($cfg, compiled)"
  nvidia-smi > "$W/nvidia-smi-$cfg.txt" 2>&1
  VLLM_SERVER_DEV_MODE=1 OUT= bash .gpu/bin/device-serve.sh $MODEL $PORT -- "${SERVER_FLAGS[@]}" "$@" \
    > "$W/serve-$cfg.txt" 2>&1 || { stamp "server $cfg failed"; cp /root/vllm-$MODEL-$PORT.log "$W/vllm-$cfg.log"; return 1; }
  stamp "ready: $(head -1 "$W/serve-$cfg.txt")"
}

run_eval() {  # CFG
  local cfg=$1
  stamp "eval $cfg: opencode, suite core"
  timeout -s INT 360 "$PY" -m llmdeck eval --client opencode --suite core --server $URL \
    --agent-bin "$OPENCODE_BIN" --max-turns 12 --timeout 150 --out "$W/eval-$cfg.json" \
    --keep "$W/eval-$cfg-keep" > "$W/eval-$cfg.txt" 2>&1
  stamp "eval $cfg exit $?"
}

source evidence/device/litellm_setup.sh

overhead() {
  local ll; ll=$(litellm_setup "$W")
  stamp "gateway overhead, 64 streams (litellm: ${ll:-not carried})"
  timeout 400 "$PY" benchmarks/gateway_overhead.py --backend url --base-url $URL --model $MODEL \
    --concurrency 64 --requests 1024 --rounds 5 --litellm-requests 64 --client lean --max-tokens 128 \
    ${ll:+--litellm $ll} --out "$W/gateway_overhead_h200-c64.json" > "$W/overhead.txt" 2>&1
  stamp "overhead exit $?"
}

soak() {
  stamp "soak: 256 streams through the gateway, 600 s"
  ( while sleep 20; do { date +%T; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader; } \
      >> "$W/soak-nvidia-smi.txt" 2>&1; done ) & local sampler=$!
  timeout 700 "$PY" benchmarks/gateway_soak.py --base-url $URL --model $MODEL --concurrency 256 \
    --seconds 600 --max-tokens 64 --out "$W/gateway_soak_h200-c256.json" > "$W/soak.txt" 2>&1
  stamp "soak exit $?"; kill $sampler 2>/dev/null
}

orchestrate() {
  stamp "orchestrator up"
  mkdir -p /root/agent
  [ -x $OPENCODE_BIN ] || { "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    .agent/opencode.xz $OPENCODE_BIN && chmod +x $OPENCODE_BIN; }
  stamp "opencode $($OPENCODE_BIN --version 2>&1 | tail -1)"
  "$PY" -c 'import vllm; print(vllm.__version__)' > "$W/vllm-version.txt" 2>&1
  serve fp8 --kv-cache-dtype fp8 && run_eval fp8
  cp /root/vllm-$MODEL-$PORT.log "$W/vllm-fp8.log" 2>/dev/null
  bash .gpu/bin/device-stop.sh $MODEL $PORT >/dev/null 2>&1
  if serve bf16; then
    run_eval bf16; overhead; soak
  fi
  cp /root/vllm-$MODEL-$PORT.log "$W/vllm-bf16.log" 2>/dev/null
  bash .gpu/bin/device-stop.sh $MODEL $PORT >/dev/null 2>&1
  "$PY" -m llmdeck report "$W/eval-fp8.json" "$W/eval-bf16.json" --html "$W/eval-compare.html" \
    > "$W/report.txt" 2>&1; stamp "report exit $?"
  stamp "all done"; touch "$W/DONE"
}

follow() {  # up to ~560 s, then everything so far comes back
  while [ $(( $(date +%s) - T0 )) -lt 560 ] && [ ! -e "$W/DONE" ]; do sleep 10; done
  tail -25 "$W/progress.txt"
  n=$(cat "$W/n" 2>/dev/null || echo 0); n=$(( n + 1 )); echo $n > "$W/n"
  tar czf "$OUT/wait-$n.tgz" --exclude='*/node_modules' -C /root gateway-eval 2>/dev/null
  ls -la "$OUT"
}

case $MODE in
  start) setsid nohup bash "$0" orchestrate > "$W/orchestrator.txt" 2>&1 < /dev/null & sleep 2; follow ;;
  orchestrate) orchestrate ;;
  wait) follow ;;
  *) echo "usage: $0 start|wait"; exit 2 ;;
esac
