#!/bin/bash
# Output caps a context cannot hold, on vLLM 0.22 (the GPU lab's; vLLM < 0.32 counts the cap against the
# context), one device call after gpu-lab's stage/carry/install (../shared/gpu-lab/README.md) on a warm
# machine: the seeds' coding model shape (Qwen3-Coder-30B-A3B, random weights, eager, qwen3_coder tools,
# --max-model-len 32768), Claude Code 2.1.332's recorded request (its prompt and 24 tools, ~11.7k tokens)
# with the cap it sends (32000), a cap over the context and a prompt over it, sent
#   - direct to vLLM,
#   - through this checkout's gateway (after), and
#   - through the gateway of .gpu/old-src (before: `git archive 7d5673e src | tar -x -C .gpu/old-src`, the
#     gateway before roomcap.count_first: every cap that cannot fit refused once, counted, sent again;
#     run2 was against 19725dc, before any output-cap work),
# each with `messages: {fold_system: true}` (vLLM 0.22 refuses Claude Code's second system message).
#   bash evidence/device/outcap_gpu.sh      # ~6 min; writes $OUT/outcap.tgz -> evidence/device/outcap/
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
W=/root/outcap-run; D=$W/outcap; mkdir -p "$D"
OUT=${OUT:-/tmp/outcap-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/outcap.tgz" -C "$W" outcap 2>/dev/null' EXIT
export PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120
MODEL=qwen3-coder-30b-a3b; PORT=8000; URL=http://127.0.0.1:$PORT
PY=$(command -v python3)
NEW="$PWD/src:/tmp/site"; OLD="$PWD/.gpu/old-src/src:/tmp/site"

PYTHONPATH=/tmp/site "$PY" -c 'import vllm; print(vllm.__version__)' > "$D/vllm-version.txt" 2>&1
stamp "start $MODEL (eager, 32768)"
OUT= bash .gpu/bin/device-serve.sh $MODEL $PORT -- --max-model-len 32768 --enforce-eager \
  --enable-auto-tool-choice --tool-call-parser qwen3_coder > "$D/serve.txt" 2>&1 \
  || { stamp "server failed"; tail -30 "$D/serve.txt"; cp /root/vllm-$MODEL-$PORT.log "$D/"; exit 1; }
stamp ready; tail -3 "$D/serve.txt"

for side in after before; do
  [ $side = after ] && { P=$NEW; GP=4000; } || { P=$OLD; GP=4001; }
  mkdir -p $W/$side
  cat > $W/$side/gateway.yaml <<EOF
routes:
  - model: coder
    backends: [$URL]
    messages: {fold_system: true}
EOF
  LLMDECK_STATE_DIR=$W/$side/state PYTHONPATH=$P "$PY" -m llmdeck gateway up --config $W/$side/gateway.yaml \
    --port $GP > "$D/gateway-up-$side.txt" 2>&1; stamp "gateway $side: exit $?"; tail -1 "$D/gateway-up-$side.txt"
done

stamp "probe: direct, after, before"
PYTHONPATH=$NEW timeout 400 "$PY" evidence/device/outcap_probe.py --url $URL --model $MODEL --alias coder \
  --gateway after=http://127.0.0.1:4000 --gateway before=http://127.0.0.1:4001 --repeat ${REPEAT:-9} \
  --vllm-log /root/vllm-$MODEL-$PORT.log --out "$D/outcap.json" 2>&1 | tee "$D/probe.txt"
stamp "interleaved A/B (before, after), ${ROUNDS:-30} rounds"
PYTHONPATH=$NEW timeout 300 "$PY" evidence/device/outcap_ab.py --url $URL --model $MODEL --alias coder \
  --a before=http://127.0.0.1:4001 --b after=http://127.0.0.1:4000 --rounds ${ROUNDS:-30} \
  --out "$D/ab.json" 2>&1 | tee "$D/ab.txt"
for side in after before; do
  [ $side = after ] && P=$NEW || P=$OLD
  LLMDECK_STATE_DIR=$W/$side/state PYTHONPATH=$P "$PY" -m llmdeck gateway down > /dev/null 2>&1
  cp $W/$side/state/logs/gateway.log "$D/gateway-$side.log" 2>/dev/null
done
grep -E "lowered|counts the output cap|count" "$D/gateway-after.log" | head -20
cp /root/vllm-$MODEL-$PORT.log "$D/vllm.log"
bash .gpu/bin/device-stop.sh $MODEL $PORT > /dev/null 2>&1
stamp done
