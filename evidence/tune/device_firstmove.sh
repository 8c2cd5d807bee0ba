#!/bin/bash
# Issue 24, session 14: the lease was cut after trial 1 of the tune (vLLM's defaults, 4.20 req/s) — the
# machine went cold while the tune ran (a gap between device calls). With the ~9 minutes left, this
# measures the tune's first move alone on a fresh H200 (same kind, same vLLM 0.22.0, same shape): vLLM's
# defaults + --enable-prefix-caching + --max-num-batched-tokens 8448 (spec-firstmove.json = trial 1's
# spec + those two flags), started with `llmdeck up --spec`, then the tune's own bench (agent-sessions,
# 4096-token shared prefix, 4 turns, 512 in / 256 out, 64 prompts, 16 concurrent, warmup 8, 3 runs,
# temperature 0, ignore_eos) with the same SLOs. Run from the repo root after gpu-lab's staging. Session 14 ran
# it with --repeat 2 (`sed -i s/--repeat 3/--repeat 2/` in the call: the lease had 7 minutes left).
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
OUT=${OUT:-/tmp/llmdeck-evidence}; mkdir -p "$OUT"
DIR=/root/models/qwen3.6-35b-a3b-fp8
export PYTHONPATH=src:/tmp/site PATH=/tmp/site/bin:$PATH COLUMNS=120 HF_HUB_OFFLINE=1 \
       VLLM_USE_FLASHINFER_SAMPLER=0 LLMDECK_STATE_DIR=/root/llmdeck-state
bash evidence/tune/make_fp8_shape.sh  # the FP8 release's shape
sed "s#/opt/torch/.venv/bin/python3#$(command -v python3)#" evidence/tune/spec-firstmove.json > /tmp/spec.json
t0=$(date +%s)
python3 -m llmdeck up --spec /tmp/spec.json --name firstmove --port 8010 --warmup --timeout 420 > "$OUT/up.txt" 2>&1 \
  || { echo "start failed"; tail -30 "$OUT/up.txt"; cp /root/llmdeck-state/*/firstmove*/*.log "$OUT/" 2>/dev/null; exit 1; }
echo "started in $(( $(date +%s) - t0 )) s"
python3 -m llmdeck bench http://127.0.0.1:8010 --tokenizer "$DIR" --workload agent-sessions \
  --prefix-len 4096 --num-turns 4 --input-len 512 --output-len 256 --num-prompts 64 --max-concurrency 16 \
  --warmup 8 --repeat 3 --temperature 0 --goodput ttft:2000 --goodput tpot:100 \
  --out "$OUT/firstmove.json" > "$OUT/firstmove.txt" 2>&1; echo "bench exit $?"
cp /root/llmdeck-state/logs/firstmove.log "$OUT/engine.log" 2>/dev/null || python3 -m llmdeck logs firstmove -n 100000 > "$OUT/engine.log" 2>&1
python3 -m llmdeck down firstmove > /dev/null 2>&1
gzip -9 "$OUT/firstmove.json" "$OUT/engine.log"; tail -25 "$OUT/firstmove.txt"
