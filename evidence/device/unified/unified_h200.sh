#!/bin/bash
# Issue 35 on one H200 (kind nvidia-h200), in one device call after gpu-lab's stage/carry/install
# (../shared/gpu-lab/README.md), vLLM 0.22.0, random weights of a real shape (default qwen3-0.6b; SHAPES
# may add qwen3-30b-a3b):
#
#   1. vLLM 0.22's own help for the flags used (--kv-cache-memory-bytes, --enable-sleep-mode);
#   2. `llmdeck plan SHAPE --machine h200 -- --kv-cache-memory-bytes KV` (KV: 8 GiB): the plan's KV tokens;
#   3. `llmdeck up` with those bytes (venv engine, sleep mode, VLLM_SERVER_DEV_MODE=1, eager): vLLM's log
#      line "GPU KV cache size: N tokens" against the plan — within 2 % passes;
#   4. sleep level 1, then level 2, each followed by a wake (/sleep?level=N, /is_sleeping, /wake_up; level 2
#      then /collective_rpc reload_weights — vLLM 0.22 cannot reload `dummy` weights, recorded as such — and
#      /reset_prefix_cache): GPU memory used by nvidia-smi awake / asleep / woken, the memory each level
#      freed, and after every wake the gateway's post-wake probe (llmdeck.gateway.lifecycle.probe: a real
#      4-token greedy generation that must return tokens);
#   5. `llmdeck down`.
#
#   bash evidence/device/unified/unified_h200.sh        # ~3-4 min for qwen3-0.6b; writes $OUT/unified.tgz
# Unpack it under evidence/device/unified/ (results.json is the summary; per shape SHAPE/*.json, logs).
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
W=/root/unified-run; D=$W/unified; mkdir -p "$D"
OUT=${OUT:-/tmp/unified-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/unified.tgz" -C "$W" unified 2>/dev/null' EXIT
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       VLLM_SERVER_DEV_MODE=1 LLMDECK_STATE_DIR=/root/llmdeck-state LLMDECK_CACHE_DIR=/root/llmdeck-cache
PY=$(command -v python3)
PORT=8000; URL=http://127.0.0.1:$PORT
KV=${KV:-8589934592}   # 8 GiB of KV cache, in bytes (vLLM reads "8g" as 8e9 and "8G" as 8 GiB)
MAXLEN=${MAXLEN:-8192}

stamp "1. vLLM's own flags"
"$PY" -c 'import vllm; print(vllm.__version__)' > "$D/vllm-version.txt" 2>&1
timeout 120 "$PY" -m vllm.entrypoints.cli.main serve --help=kv-cache-memory-bytes \
  > "$D/help-kv-cache-memory-bytes.txt" 2>&1  # one help call (~30 s of imports); sleep mode is used below
grep -c -- "--kv-cache-memory-bytes" "$D/help-kv-cache-memory-bytes.txt"
nvidia-smi > "$D/nvidia-smi-start.txt" 2>&1

for SHAPE in ${SHAPES:-qwen3-0.6b}; do
  S=$D/$SHAPE; mkdir -p "$S"
  FLAGS=(--load-format dummy --max-model-len $MAXLEN --enforce-eager --enable-sleep-mode --kv-cache-memory-bytes $KV)
  [ "$SHAPE" = qwen3-0.6b ] || FLAGS+=(--tokenizer /root/models/qwen3-0.6b)
  stamp "2. plan $SHAPE with --kv-cache-memory-bytes $KV"
  "$PY" -m llmdeck plan /root/models/$SHAPE --machine h200 --engine venv --json -- "${FLAGS[@]}" \
    > "$S/plan.json" 2> "$S/plan.stderr" || { stamp "plan failed"; cat "$S/plan.stderr"; continue; }

  stamp "3. up $SHAPE"
  START=$(date +%s.%N)
  timeout 420 "$PY" -m llmdeck up --model /root/models/$SHAPE --engine venv --python "$PY" --name unified \
    --port $PORT --served-model-name $SHAPE -- "${FLAGS[@]}" > "$S/up.txt" 2>&1
  echo "exit=$? ready_s=$("$PY" -c "import time; print(round(time.time() - $START, 1))")" >> "$S/up.txt"
  cp /root/llmdeck-state/logs/unified.log "$S/vllm.log" 2>/dev/null
  tail -3 "$S/up.txt"
  PID=$("$PY" -c 'import json; print(json.load(open("/root/llmdeck-state/servers/unified.json"))["pid"])' 2>/dev/null)
  [ -n "$PID" ] || { stamp "no server"; continue; }

  stamp "4. sleep levels 1 and 2, each woken and probed"
  timeout 240 "$PY" - "$URL" "$SHAPE" "$S" <<'PY'
import json, re, subprocess, sys, time
from pathlib import Path

import httpx

from llmdeck.gateway.lifecycle import probe

url, model, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
GIB = 1 << 30


def smi_used_mib() -> int:  # nvidia-smi, GPU 0: what the device says is in use
    text = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                          capture_output=True, text=True, timeout=30).stdout
    return int(text.strip().splitlines()[0])


def post(path: str, body: dict | None = None) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    resp = httpx.post(url + path, json=body, timeout=300)
    return time.perf_counter() - t0, resp.status_code, resp.text[:300]


def checked_probe() -> dict:
    try:
        return {"ok": True, "seconds": round(probe(url, model), 3)}
    except Exception as exc:  # the gateway would stop and cold-start here
        return {"ok": False, "error": str(exc)[:400]}


plan = json.loads((out / "plan.json").read_text())
log = (out / "vllm.log").read_text(errors="replace")
m = re.search(r"GPU KV cache size: ([\d,]+) tokens", log)
vllm_tokens = int(m.group(1).replace(",", "")) if m else None
plan_tokens = plan["memory"]["capacity"]["kv_cache_tokens"]
kv = {"plan_kv_bytes": plan["memory"]["capacity"]["available_kv_bytes"], "plan_kv_tokens": plan_tokens,
      "vllm_kv_tokens": vllm_tokens,
      "available_kv_line": (re.search(r"Available KV cache memory: [\d.]+ GiB", log) or [None])[0]}
kv["ratio"] = round(vllm_tokens / plan_tokens, 4) if vllm_tokens and plan_tokens else None
kv["within_2pct"] = kv["ratio"] is not None and abs(kv["ratio"] - 1) <= 0.02
(out / "kv.json").write_text(json.dumps(kv, indent=1))
print("kv", json.dumps(kv))

cycles = [{"level": 0, "probe_before_any_sleep": checked_probe()}]
for level in (1, 2):
    c: dict = {"level": level, "awake_mib": smi_used_mib()}
    c["sleep_s"], c["sleep_status"], _ = post(f"/sleep?level={level}")
    c["is_sleeping"] = httpx.get(url + "/is_sleeping", timeout=30).json()
    time.sleep(1)
    c["asleep_mib"] = smi_used_mib()
    c["wake_s"], c["wake_status"], _ = post("/wake_up")
    if level == 2:
        _, c["reload_status"], c["reload_text"] = post("/collective_rpc", {"method": "reload_weights"})
        post("/reset_prefix_cache")
    c["is_sleeping_after_wake"] = httpx.get(url + "/is_sleeping", timeout=30).json()
    c["post_wake_probe"] = checked_probe()
    c["woken_mib"] = smi_used_mib()
    c["freed_gib"] = round((c["awake_mib"] - c["asleep_mib"]) / 1024, 2)
    cycles.append(c)
    print("cycle", json.dumps(c))
(out / "sleep.json").write_text(json.dumps(cycles, indent=1))
PY
  echo "sleep/probe exit $?"
  grep -h -E "Sleep mode freed|It took .* seconds to (fall asleep|wake up)" /root/llmdeck-state/logs/unified.log | tail -6
  cp /root/llmdeck-state/logs/unified.log "$S/vllm.log" 2>/dev/null
  stamp "5. down"
  "$PY" -m llmdeck down unified
done

"$PY" - "$D" > "$D/results.json" <<'PY'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
out = {"vllm": (d / "vllm-version.txt").read_text().strip(), "shapes": {}}
for s in sorted(p for p in d.iterdir() if p.is_dir()):
    entry = {}
    for name in ("kv", "sleep"):
        f = s / f"{name}.json"
        entry[name] = json.loads(f.read_text()) if f.exists() else None
    out["shapes"][s.name] = entry
print(json.dumps(out, indent=1))
PY
cat "$D/results.json" | head -60
stamp done
