#!/bin/bash
# A server whose API process died (`kill -9`), on a GPU: vLLM's EngineCore outlives it, holding the GPU's
# memory, and the next `llmdeck up` of the same name — with the llmdeck before the start gate cleared a dead
# record's leftovers (73f2ddd, carried as .gpu/old-src: `git archive 73f2ddd src | tar -x -C .gpu/old-src`)
# and with this checkout's. Qwen3-0.6B's shape on vLLM 0.22 (one call after gpu-lab's stash, see
# evidence/device/README.md), --gpu-memory-utilization 0.60: an orphan holding 60% leaves no room for a
# second 60%. Measured: GPU memory (nvidia-smi), the compute apps, `llmdeck status`, the second up's outcome.
#   run  command: OUT=$OUT bash evidence/device/dead_leader_gpu.sh   carry: [".gpu/old-src"]  (~5 min)
#   (run 2026-12-06 on an H200: evidence/device/dead-leader/README.md; the CPU run: evidence/lifecycle/results/dead_leader_cpu*.txt)
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s.%N)
el() { python3 -c "import time; print(f'{time.time() - $T0:.1f}')"; }
W=/root/dead-leader; D=$W/dead-leader; rm -rf "$W"; mkdir -p "$D"
OUT=${OUT:-/tmp/dead-leader-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/dead-leader.tgz" -C "$W" dead-leader 2>/dev/null' EXIT
export PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120
PY=$(command -v python3)
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$D/gpu.txt"
PYTHONPATH=$PWD/src:/tmp/site "$PY" - "$PY" "$W" <<'PYEOF'
import sys
from llmdeck.engines.spec import LaunchSpec
py, w = sys.argv[1:3]
args = ["--load-format", "dummy", "--tokenizer", "/root/models/qwen3-0.6b", "--max-model-len", "8192",
        "--gpu-memory-utilization", "0.60", "--enforce-eager"]
spec = LaunchSpec(name="dl", engine="venv", python=py, model="/root/models/qwen3-0.6b", port=8302,
                  env={"HF_HUB_OFFLINE": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0"}, vllm_args=args)
open(f"{w}/dl.json", "w").write(spec.model_dump_json(indent=1))
PYEOF
phase() {  # phase NAME SRC
  local name=$1 src=$2 P="$D/$1"; mkdir -p "$P"
  export PYTHONPATH=$src:/tmp/site LLMDECK_STATE_DIR=/root/llmdeck-state-$name
  rm -rf "$LLMDECK_STATE_DIR"
  say() { echo "[$(el) s] $name: $*" | tee -a "$D/actions.txt"; }
  "$PY" -m llmdeck up --spec "$W/dl.json" > "$P/up1.txt" 2>&1; say "first up: exit $?; GPU used $(used) MiB"
  local pid; pid=$("$PY" -m llmdeck status --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)[0]['pid'])")
  ps -o pid,pgid,rss,args -g "$pid" | cut -c1-110 > "$P/group-before-kill.txt"
  kill -9 "$pid"; sleep 5
  say "kill -9 $pid (the API server) 5 s ago; GPU used $(used) MiB"
  ps -o pid,pgid,rss,args -g "$pid" | cut -c1-110 > "$P/group-after-kill.txt"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$P/apps-after-kill.txt"
  "$PY" -m llmdeck status > "$P/status-after-kill.txt" 2>&1
  "$PY" -m llmdeck up --spec "$W/dl.json" --ready-timeout 300 > "$P/up2.txt" 2>&1
  say "second up of the same name: exit $?; GPU used $(used) MiB; last line: $(tail -1 "$P/up2.txt" | cut -c1-160)"
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv > "$P/apps-after-up2.txt"
  ps -o pid,pgid,rss,args -g "$pid" | cut -c1-110 > "$P/old-group-after-up2.txt"
  say "the dead server's group after the second up: $(($(wc -l < "$P/old-group-after-up2.txt") - 1)) process(es)"
  "$PY" -m llmdeck down dl > "$P/down.txt" 2>&1
  kill -9 -- -"$pid" 2>/dev/null && say "(the script killed what was left of group $pid)"
  for _ in $(seq 100); do [ "$(used)" -lt 1000 ] && break; sleep 0.2; done
  say "after down: GPU used $(used) MiB"
}
phase before "$PWD/.gpu/old-src/src"
phase after "$PWD/src"
echo "--- actions"; cat "$D/actions.txt"
for p in before after; do echo "--- $p: apps after kill"; cat "$D/$p/apps-after-kill.txt"; echo "--- $p: up2 tail"; tail -6 "$D/$p/up2.txt"; done
