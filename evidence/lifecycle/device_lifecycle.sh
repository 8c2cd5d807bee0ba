#!/bin/bash
# Evidence for issue 5 (lifecycle on a GPU box), on the H200 through ../shared/gpu-lab, venv mode.
#
# Runs on the device machine after gpu-lab is installed there (device-install.sh), from the repository root:
#     bash evidence/lifecycle/device_lifecycle.sh
# Writes everything under $OUT (default /tmp/lifecycle-evidence):
#   01-up-qwen3-0.6b.txt         `llmdeck up` in the background with its phases shown
#   02-status.json               `llmdeck status --json` with live queue/KV from /metrics (after warm-up)
#   03-warmup.json / .txt        warm-up report: first vs steady-state TTFT
#   04-phases-qwen3-0.6b.json    llmdeck.runtime.phases.parse_startup_facts on the server's log
#   05-down.txt                  `llmdeck down`
#   06a-up-hybrid-mnbt2048-preflight.txt  the same without --force: refused by preflight's lint (exit 2)
#   06-up-hybrid-mnbt2048.txt    seed 000's flags + --max-num-batched-tokens 2048 on qwen3.6-35b-a3b: must fail
#                                with the mamba-align diagnosis and its fix
#   07-diagnosis-hybrid.json     llmdeck.runtime.diagnosis.diagnose on that log (+ log_tail)
#   logs/                        the raw vLLM logs
# Budget: ~85 s for the 0.6B start (--enforce-eager), ~20 s warm-up, ~75 s until the hybrid dies.
set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/lifecycle-evidence}
mkdir -p "$OUT/logs"
ls /tmp/site/.done >/dev/null 2>&1 || { echo "COLD: gpu-lab not installed (run device-install.sh first)"; exit 3; }

export PYTHONPATH=src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 \
       VLLM_USE_FLASHINFER_SAMPLER=0   # flashinfer is not staged by gpu-lab
export LLMDECK_STATE_DIR=/root/llmdeck-state LLMDECK_CACHE_DIR=/root/llmdeck-cache
PY=$(command -v python3)
LLMDECK="python3 -m llmdeck"
SMALL=/root/models/qwen3-0.6b
HYBRID=/root/models/qwen3.6-35b-a3b
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }

python3 -c 'import torch,json;f,t=torch.cuda.mem_get_info();print(json.dumps({"gpu":torch.cuda.get_device_name(0),"gpu_total_bytes":t,"gpu_free_bytes":f}))' \
  > "$OUT/device.json" 2>/dev/null || echo '{}' > "$OUT/device.json"
python3 -c 'import vllm; print(vllm.__version__)' > "$OUT/vllm-version.txt" 2>&1

# 1. up in the background, phases shown, warm-up after ready
stamp "up qwen3-0.6b"
$LLMDECK up --model $SMALL --engine venv --python "$PY" --name small --port 8000 --warmup \
  -- --load-format dummy --max-model-len 8192 --enforce-eager 2>&1 | tee "$OUT/01-up-qwen3-0.6b.txt"
echo "exit=${PIPESTATUS[0]}" >> "$OUT/01-up-qwen3-0.6b.txt"

# 2. status with live metrics (the warm-up left counters behind; one more request in flight helps)
curl -s localhost:8000/v1/completions -H 'content-type: application/json' \
  -d '{"model":"qwen3-0.6b","prompt":"hello","max_tokens":256}' > /dev/null &
sleep 0.5
stamp "status"
$LLMDECK status --json > "$OUT/02-status.json" 2> "$OUT/02-status.stderr"
wait

# 3. a warm-up report of its own (the library call `up --warmup` uses), as JSON
stamp "warmup"
python3 - "$OUT" <<'EOF'
import asyncio, json, sys
from llmdeck.runtime.warmup import warmup
out = sys.argv[1]
report = asyncio.run(warmup("http://127.0.0.1:8000", "qwen3-0.6b", max_model_len=8192, repeats=3))
open(f"{out}/03-warmup.json", "w").write(report.model_dump_json(indent=2))
open(f"{out}/03-warmup.txt", "w").write(report.summary() + "\n")
print(report.summary())
EOF

# 4. phases from the server's own log
LOG=$(ls -t $LLMDECK_STATE_DIR/logs/small*.log 2>/dev/null | head -1)
[ -n "$LOG" ] && cp "$LOG" "$OUT/logs/qwen3-0.6b.log"
python3 - "$OUT" "$LOG" <<'EOF'
import sys
from llmdeck.runtime.phases import parse_startup_facts
out, log = sys.argv[1], sys.argv[2]
facts = parse_startup_facts(open(log).read()) if log else None
open(f"{out}/04-phases-qwen3-0.6b.json", "w").write(facts.model_dump_json(indent=2) if facts else "{}")
for e in (facts.phases if facts else []):
    print(f"{e.elapsed_s!s:>7} s  {e.label:<22} {e.detail}")
EOF

# 5. down
stamp "down"
$LLMDECK down small 2>&1 | tee "$OUT/05-down.txt"

# 6. seed 000's flags with --max-num-batched-tokens 2048 on the hybrid. First without --force: preflight
#    runs plan's lint and refuses (exit 2) with vLLM's assertion and the fix, in a second. Then with
#    --force: vLLM dies in engine start-up (~70-230 s in) and the log is diagnosed.
HFLAGS="--load-format dummy --max-model-len 131072 --gpu-memory-utilization 0.85 --kv-cache-dtype fp8 \
  --enable-prefix-caching --language-model-only --gdn-prefill-backend triton --max-num-seqs 8 \
  --enable-auto-tool-choice --tool-call-parser qwen3_coder --reasoning-parser qwen3 --max-num-batched-tokens 2048"
stamp "up hybrid with --max-num-batched-tokens 2048, no --force (expected: refused by preflight)"
# shellcheck disable=SC2086
$LLMDECK up --model $HYBRID --engine venv --python "$PY" --name hybrid --port 8001 --no-warmup -- $HFLAGS \
  2>&1 | tee "$OUT/06a-up-hybrid-mnbt2048-preflight.txt"
echo "exit=${PIPESTATUS[0]}" >> "$OUT/06a-up-hybrid-mnbt2048-preflight.txt"
stamp "up hybrid with --max-num-batched-tokens 2048 --force (expected to fail)"
$LLMDECK up --model $HYBRID --engine venv --python "$PY" --name hybrid --port 8001 --no-warmup --force \
  -- --load-format dummy --max-model-len 131072 --gpu-memory-utilization 0.85 --kv-cache-dtype fp8 \
     --enable-prefix-caching --language-model-only --gdn-prefill-backend triton --max-num-seqs 8 \
     --enable-auto-tool-choice --tool-call-parser qwen3_coder --reasoning-parser qwen3 \
     --max-num-batched-tokens 2048 2>&1 | tee "$OUT/06-up-hybrid-mnbt2048.txt"
echo "exit=${PIPESTATUS[0]}" >> "$OUT/06-up-hybrid-mnbt2048.txt"

# 7. the diagnosis on that log, straight from the library
HLOG=$(ls -t $LLMDECK_STATE_DIR/logs/hybrid*.log 2>/dev/null | head -1)
[ -n "$HLOG" ] && cp "$HLOG" "$OUT/logs/qwen3.6-35b-a3b-mnbt2048.log"
python3 - "$OUT" "$HLOG" <<'EOF'
import json, sys
from llmdeck.runtime.diagnosis import diagnose, log_tail
out, log = sys.argv[1], sys.argv[2]
text = open(log).read() if log else ""
found = diagnose(text)
json.dump({"diagnoses": [d.model_dump() for d in found], "log_tail": log_tail(text)},
          open(f"{out}/07-diagnosis-hybrid.json", "w"), indent=2)
for d in found:
    print(f"[{d.severity}] {d.rule_id}: {d.cause}\n  fix: {d.fix}")
ok = bool(found) and found[0].rule_id == "mamba-align-block-size"
print("DIAGNOSIS", "OK" if ok else "MISSING")
EOF
$LLMDECK down hybrid > /dev/null 2>&1 || true
stamp "done"
ls -la "$OUT"
