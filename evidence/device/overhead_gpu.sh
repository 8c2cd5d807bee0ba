#!/bin/bash
# The gateway's overhead at 64 streams on one GPU, again with this tree (session 40: the lean
# transport's idle pool got a cap and an expiry, count_first, the refused-connection retry, the stalled
# client's limit and the restart wait joined the request path since session 12's 1.002x). Two device
# calls on one warm machine, after gpu-lab's stage/carry/install (../shared/gpu-lab/README.md):
#
#   start  the seeds' coding model shape (Qwen3-Coder-30B-A3B, random weights, compiled) on port 8000
#   run    benchmarks/gateway_overhead.py: direct vs `llmdeck gateway`, 1,024 requests x ROUNDS (3) rounds,
#          interleaved, the lean client, 128 tokens out, on API (completions; messages, responses)
#
#   bash evidence/device/overhead_gpu.sh start|run
# Writes $OUT/overhead.tgz (unpack under evidence/device/overhead/).
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
MODE=${1:-run}
W=/root/overhead; mkdir -p "$W/$MODE"; D=$W/$MODE
OUT=${OUT:-/tmp/overhead-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/overhead-$MODE.tgz" -C "$W" "$MODE" 2>/dev/null' EXIT
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state
MODEL=qwen3-coder-30b-a3b; PORT=8000; URL=http://127.0.0.1:$PORT
case $MODE in
  start)
    nvidia-smi > "$D/nvidia-smi.txt" 2>&1
    python3 -c 'import vllm; print(vllm.__version__)' > "$D/vllm-version.txt" 2>&1
    OUT= bash .gpu/bin/device-serve.sh $MODEL $PORT -- --max-model-len 32768 --gpu-memory-utilization 0.85 \
      > "$D/serve.txt" 2>&1; rc=$?; cat "$D/serve.txt" | head -12; exit $rc ;;
  run)
    curl -sf $URL/health >/dev/null || { echo "no server: run start first"; exit 1; }
    timeout 560 python3 benchmarks/gateway_overhead.py --backend url --base-url $URL --model $MODEL \
      --concurrency 64 --requests 1024 --rounds ${ROUNDS:-3} --client lean --max-tokens 128 --no-litellm \
      --api ${API:-completions} --out "$D/gateway_overhead_gpu-${API:-completions}-c64-r${ROUNDS:-3}.json" \
      > "$D/overhead-${API:-completions}-r${ROUNDS:-3}.txt" 2>&1; echo "overhead exit $?" >> "$D/overhead-${API:-completions}-r${ROUNDS:-3}.txt"
    tail -4 "$D/overhead-${API:-completions}-r${ROUNDS:-3}.txt"
    cp /root/vllm-$MODEL-$PORT.log "$D/vllm.log" ;;
  *) echo "usage: $0 start|run"; exit 2 ;;
esac
