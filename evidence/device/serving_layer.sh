#!/bin/bash
# Issues 19, 20 and 21 on ONE H200 (kind nvidia-h200), in three back-to-back device calls on one warm
# machine, after gpu-lab's stage/carry/install (../shared/gpu-lab/README.md). One vLLM server of the
# seeds' coding model shape (Qwen3-Coder-30B-A3B, random weights, compiled, sleep mode on) serves:
#
#   main     (~9 min) its start; the first request after the cold start; the gateway overhead at 64
#            streams, direct vs `llmdeck gateway` vs LiteLLM's proxy in interleaved rounds (#19); the
#            seeds' suite with `llmdeck bench --html` (#20); then starts two 10-minute soaks in the
#            background (they outlive the call while the machine stays warm): 256 streams through the
#            gateway to this server (#19), and a scripted sequence of model switches through a gateway
#            whose budget holds one of two launch specs (qwen3-0.6b, qwen3-8b) under load (#21).
#   collect  (~9.5 min) waits for both soaks, samples nvidia-smi meanwhile, brings their results back.
#   sleep-fresh  the same on a fresh machine (the coding model started eager first)
#   sleep    (~4 min) sleep levels 1 and 2 on the coding model's server (#21), stops it, then
#            evidence/gateway-models/device_sleep.sh on the qwen3-0.6b shape (a cold start of its own).
#
#   bash evidence/device/serving_layer.sh main|collect|sleep
# Ran on 2026-12-01 (evidence/device/serving-layer/README.md). The overhead run has since become longer
# (1,024 requests x 5 rounds, the lean client, paired round figures: ~6 min), so the next run — issue 19
# alone — is: SKIP_SEEDS=1 SKIP_SWITCH=1 bash evidence/device/serving_layer.sh main, then collect.
# Each call writes one file, $OUT/MODE.tgz (a device call brings back at most 8 files); unpack it
# under evidence/device/serving-layer/. LiteLLM travels as wheels: LITELLM_WHEELS (default /root/stash/litellm: gpu-lab's stash, carried beside it;
# see benchmarks/README.md) is installed into /tmp/litellm-site; without it the overhead run skips LiteLLM.
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
MODE=${1:-main}
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
stamp() { echo "[$(el) s] $*"; }
W=/root/serving-layer; D=$W/$MODE; mkdir -p "$D" "$W/soak"
OUT=${OUT:-/tmp/serving-layer-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/$MODE.tgz" -C "$W" "$MODE" $( [ "$MODE" = collect ] && echo soak ) 2>/dev/null' EXIT
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state
MODEL=qwen3-coder-30b-a3b; PORT=8000; URL=http://127.0.0.1:$PORT
PY=$(command -v python3)
# 0.58 of the H200: 57 GiB of weights, ~20 GiB of KV (>= one 131,072-token request), and room beside
# it for the switch soak's larger model (0.30) during `collect`.
SERVER_FLAGS=(--max-model-len 131072 --gpu-memory-utilization 0.58 --enable-sleep-mode)

ttft_probe() {  # URL MODEL: the first request's time to first token, then a warm one
  "$PY" - "$@" <<'PY'
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("probe", "evidence/gateway-models/sleep_probe.py")
probe = importlib.util.module_from_spec(spec); spec.loader.exec_module(probe)
print(json.dumps({"ttft_first_after_cold_start_s": probe.ttft(sys.argv[1], sys.argv[2]),
                  "ttft_warm_s": probe.ttft(sys.argv[1], sys.argv[2])}))
PY
}

source evidence/device/litellm_setup.sh

make_specs() {  # two launch specs for the switch soak: a small and a mid-size shape, one GPU
  mkdir -p /root/models/qwen3-8b && cp evidence/plan/families/configs/qwen3-8b-yarn4/config.json /root/models/qwen3-8b/
  "$PY" - "$PY" <<'PY'
import sys
from llmdeck.engines.spec import LaunchSpec
env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
for name, shape, util, port in (("sw-0.6b", "qwen3-0.6b", "0.12", 8101), ("sw-8b", "qwen3-8b", "0.30", 8102)):
    spec = LaunchSpec(name=name, engine="venv", python=sys.argv[1], model=f"/root/models/{shape}",
                      served_model_name=name, port=port, env=env,
                      vllm_args=["--load-format", "dummy", "--tokenizer", "/root/models/qwen3-0.6b",
                                 "--max-model-len", "8192", "--enforce-eager", "--gpu-memory-utilization", util])
    open(f"/root/serving-layer/{name}.json", "w").write(spec.model_dump_json(indent=1))
PY
}

main() {
  nvidia-smi > "$D/nvidia-smi-start.txt" 2>&1
  "$PY" -c 'import vllm; print(vllm.__version__)' > "$D/vllm-version.txt" 2>&1
  stamp "start $MODEL (compiled, sleep mode)"
  VLLM_SERVER_DEV_MODE=1 OUT= bash .gpu/bin/device-serve.sh $MODEL $PORT -- "${SERVER_FLAGS[@]}" \
    > "$D/serve.txt" 2>&1 || { stamp "server failed"; tail -30 "$D/serve.txt"; cp /root/vllm-$MODEL-$PORT.log "$D/"; exit 1; }
  head -3 "$D/serve.txt"; stamp ready
  ttft_probe $URL $MODEL > "$D/cold.json" 2>&1; cat "$D/cold.json"
  LL=$(litellm_setup "$D"); stamp "litellm: ${LL:-not carried}"
  stamp "gateway overhead, 64 streams"
  timeout 420 "$PY" benchmarks/gateway_overhead.py --backend url --base-url $URL --model $MODEL \
    --concurrency 64 --requests 1024 --rounds 5 --litellm-requests 256 --client lean --max-tokens 128 ${LL:+--litellm $LL} \
    --out "$D/gateway_overhead_h200-c64.json" > "$D/overhead.txt" 2>&1; echo "overhead exit $?" >> "$D/overhead.txt"
  tail -8 "$D/overhead.txt"
  [ -n "${SKIP_SEEDS:-}" ] || seeds_suite
  start_soaks
  cp /root/vllm-$MODEL-$PORT.log "$D/vllm-main.log"
}

seeds_suite() {
  local left=$(( 540 - $(el) ))
  [ $left -lt 30 ] && left=30  # (timeout 0 would mean no limit)
  stamp "seeds suite (${left} s left for it)"
  timeout -s INT $left "$PY" -m llmdeck bench $URL --tokenizer /root/models/$MODEL --suite seeds --warmup 2 \
    --out "$D/seeds.json" --html "$D/seeds.html" > "$D/seeds.txt" 2>&1; echo "seeds exit $?" >> "$D/seeds.txt"
  tail -16 "$D/seeds.txt"
  [ -s "$D/seeds.html" ] || "$PY" -m llmdeck report "$D/seeds.json" --html "$D/seeds.html" >/dev/null 2>&1
}

start_soaks() {
  make_specs
  stamp "soaks start (600 s each, in the background)"
  setsid nohup "$PY" benchmarks/gateway_soak.py --base-url $URL --model $MODEL --concurrency 256 \
    --seconds 600 --max-tokens 64 --out $W/soak/gateway_soak_h200-c256.json \
    > $W/soak/soak.txt 2>&1 < /dev/null &
  [ -n "${SKIP_SWITCH:-}" ] || setsid nohup "$PY" benchmarks/gateway_switch_soak.py --spec $W/sw-0.6b.json --spec $W/sw-8b.json \
    --memory-gib 50 --seconds 600 --phase-s 150 --skew-s 1 --concurrency 8 \
    --out $W/soak/gateway_switch_h200.json > $W/soak/switch.txt 2>&1 < /dev/null &
  date +%s > $W/soak/started
}

collect() {
  local started; started=$(cat $W/soak/started 2>/dev/null || echo 0)
  stamp "soaks started $(( $(date +%s) - started )) s ago"
  while [ $(el) -lt 575 ]; do
    [ -s $W/soak/gateway_soak_h200-c256.json ] && { [ -n "${SKIP_SWITCH:-}" ] || [ -s $W/soak/gateway_switch_h200.json ]; } && break
    { date +%T; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader;
      nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; } >> $W/soak/nvidia-smi.txt 2>&1
    sleep 20
  done
  stamp "soak results: $(ls $W/soak)"
  cp /tmp/switch-soak-*/state/logs/* $W/soak/ 2>/dev/null
  grep -h -iE "out of memory|CUDA error" /tmp/switch-soak-*/state/logs/* /root/vllm-$MODEL-$PORT.log | head -5
  tail -25 $W/soak/soak.txt; tail -40 $W/soak/switch.txt
}

sleep_runs() {
  local pid; pid=$(cat /root/vllm-$MODEL-$PORT.pid)
  stamp "sleep levels 1, 2 on $MODEL"
  timeout 150 "$PY" evidence/gateway-models/sleep_probe.py $URL $MODEL "$pid" > "$D/$MODEL-sleep.json" \
    2> "$D/$MODEL-sleep.stderr"; echo "probe exit $?"; head -c 1500 "$D/$MODEL-sleep.json"
  cp /root/vllm-$MODEL-$PORT.log "$D/vllm-main.log"; bash .gpu/bin/device-stop.sh $MODEL $PORT
  grep -E "Sleep mode freed|wake up|It took" "$D/vllm-main.log" | tail -6
  stamp "device_sleep.sh qwen3-0.6b"
  OUT=$D/small timeout $(( 570 - $(el) )) bash evidence/gateway-models/device_sleep.sh qwen3-0.6b
}

case $MODE in
  main) main ;;
  collect) collect ;;
  sleep) sleep_runs ;;
  sleep-fresh)  # a fresh machine: the coding model's server again (eager: only sleep is measured here)
    VLLM_SERVER_DEV_MODE=1 OUT= bash .gpu/bin/device-serve.sh $MODEL $PORT -- --max-model-len 8192 \
      --enforce-eager --enable-sleep-mode > "$D/serve.txt" 2>&1 || { tail -20 "$D/serve.txt"; exit 1; }
    head -2 "$D/serve.txt"; ttft_probe $URL $MODEL > "$D/cold.json" 2>&1; cat "$D/cold.json"
    sleep_runs ;;
  *) echo "usage: $0 main|collect|sleep"; exit 2 ;;
esac
stamp "done $MODE"
