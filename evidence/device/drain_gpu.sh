#!/bin/bash
# `llmdeck restart` of a GPU server (vLLM 0.22 via gpu-lab, one call after its stash, see
# evidence/device/README.md) while two agent-like clients stream through `llmdeck gateway`: the answers
# the stop cuts with the drain off (--drain 0: vLLM's own SIGTERM) and on (the default, 60 s). The CPU
# run of the same script (evidence/lifecycle/drain/) was on vLLM 0.32; this is the release GPU users run.
# Qwen3-0.6B's shape (dummy weights), --enforce-eager (a functional test: start-up halved), 3,000-token
# answers (~30 s each, eager, on the H100 of 2026-12-07: a restart always lands inside some).
#   run  command: OUT=$OUT bash evidence/device/drain_gpu.sh     (~6-8 min; writes $OUT/drain/)
#   (SKIP_RESTART=1: only vLLM's own drain, below; OWN=0: only the restarts)
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
OUT=${OUT:-/tmp/drain-out}; D=$OUT/drain; mkdir -p "$D"
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state-drain
rm -rf "$LLMDECK_STATE_DIR"
PY=$(command -v python3)
export LLMDECK="$PY -m llmdeck" MAX_TOKENS=${MAX_TOKENS:-3000}
[ "${SKIP_RESTART:-0}" = 1 ] || {
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  "$PY" -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null | tail -1
  $LLMDECK up --name coder-gpu --engine venv --python "$PY" --model /root/models/qwen3-0.6b --port 8402 \
    -- --load-format dummy --tokenizer /root/models/qwen3-0.6b --max-model-len 8192 \
       --gpu-memory-utilization 0.50 --enforce-eager 2>&1 | tail -1
  printf 'routes:\n  - model: coder\n    backends: [coder-gpu]\n' > /root/drain-gateway.yaml
  $LLMDECK gateway up --config /root/drain-gateway.yaml --port 8403 2>&1 | tail -1
  run() { "$PY" evidence/lifecycle/drain/restart_under_load.py http://127.0.0.1:8403 coder-gpu "$@"; }
  echo "== two agents (a tool runs 1 s between requests), $MAX_TOKENS-token answers"
  run 2 1 0
  run 2 1 60
  $LLMDECK gateway down 2>&1 | tail -1
  $LLMDECK down coder-gpu 2>&1 | tail -1
} 2>&1 | tee "$D/output.txt"
# vLLM's own drain (`-- --shutdown-timeout 60`) on 0.22: `down --drain 0` of a server streaming one answer
# (~30 s long here, enforce-eager): whole, and the stop takes what vLLM's drain takes (OWN=0 skips it)
[ "${OWN:-1}" = 0 ] || {
  echo "== vLLM's own drain: down --drain 0 of a server started with -- --shutdown-timeout 60"
  ENGINE="--engine venv --python $PY" VLLM_EXTRA="--load-format dummy --tokenizer /root/models/qwen3-0.6b \
    --gpu-memory-utilization 0.50 --enforce-eager" "$PY" evidence/lifecycle/drain/own_drain.py \
    /root/models/qwen3-0.6b 8404
  grep -h "drain\|Shutdown\|shutdown" "$LLMDECK_STATE_DIR"/logs/own-drain.log* | tail -6
} 2>&1 | tee "$D/own-drain.txt"
grep -h "kept running\|stopped by\|# llmdeck" "$LLMDECK_STATE_DIR"/logs/coder-gpu.log* > "$D/log-notes.txt" 2>/dev/null
exit 0
