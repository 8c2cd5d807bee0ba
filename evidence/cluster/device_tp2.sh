#!/bin/bash
# Evidence for issue 22 on `nvidia-h200-x2` (NOT RUN YET: no multi-GPU machine was lent when this was
# written). vLLM TP=2 over Ray, started by llmdeck, on the two GPUs of one host; the interconnect
# test's figures; `plan`'s per-GPU KV tokens against vLLM's; TP=2 vs two replicas behind the gateway.
#
# Before: ../shared/gpu-lab staged and installed (README there: stage.sh, six carry calls,
# device-install.sh) AND Ray in /tmp/site: ray[default]==2.60.0 is not in requirements-device.txt;
# stage its cp312 manylinux wheels (ray + aiohttp-cors, colorful, opencensus, py-spy, smart_open,
# virtualenv, msgpack, ...: `pip download 'ray[default]==2.60.0' --python-version 3.12
# --only-binary=:all: -d .gpu/ray`, split into <64 MiB chunks as stage.sh does) and
# `pip install --no-index --find-links DIR --target /tmp/site 'ray[default]==2.60.0'` on the device.
#
# On the device, from the repository root (the source tree travels with the call):
#   bash evidence/cluster/device_tp2.sh PHASE...      PHASE: netcheck | tp2 | replicas | all
# Each phase fits one `run` call (< 10 min); state between calls lives in /root/c22 (the machine must
# stay warm). Writes under $OUT: device.json, allreduce-nccl.jsonl, netcheck.json, plan-tp2.json,
# vllm-tp2.log, kv-compare.json, bench-tp2.json, bench-replicas.json, logs of every server.
set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/c22-out}
ST=/root/c22
MODEL=${MODEL:-qwen3-30b-a3b}          # a shape device-install.sh builds (random weights, real config)
CTX=${CTX:-8192}
BENCH="--input-len 1024 --output-len 256 --num-prompts 64 --request-rate 4 --seed 22 --tokenizer /root/models/qwen3-0.6b"
mkdir -p "$OUT" "$ST"
ls /tmp/site/.done >/dev/null 2>&1 || { echo "COLD: gpu-lab not installed (device-install.sh first)"; exit 3; }
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_USE_FLASHINFER_SAMPLER=0 LLMDECK_STATE_DIR=$ST/state
python3 -c 'import ray' 2>/dev/null || { echo "NO RAY in /tmp/site: stage ray[default]==2.60.0 (see header)"; exit 3; }
L="python3 -m llmdeck"
python3 -c 'import torch,json;print(json.dumps({"gpus":[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],"mem":[torch.cuda.mem_get_info(i)[1] for i in range(torch.cuda.device_count())]}))' > "$OUT/device.json"
[ "$(python3 -c 'import torch;print(torch.cuda.device_count())')" -ge 2 ] || { echo "needs 2 GPUs"; exit 3; }
VLLM_FLAGS="--load-format dummy --tokenizer /root/models/qwen3-0.6b --max-model-len $CTX --enforce-eager --max-num-seqs 64"

phase_netcheck() {  # NCCL all-reduce across the two GPUs (NVLink on one host): figures + verdict
  $L cluster netcheck --local 2 --backend nccl --expect-gbps 100 --out "$OUT/allreduce-nccl.jsonl" \
    --json > "$OUT/netcheck.json"; echo "netcheck exit $?"
  python3 -c 'import json;v=json.load(open("'"$OUT"'/netcheck.json"));print(v["verdict"],round(v["busbw_gbps"],1),"GB/s",round(v["latency_us"],1),"us")'
}

phase_tp2() {  # Ray head + worker (one GPU each, as two boxes would), vLLM TP=2 on it, plan vs vLLM
  local t=$(date +%s)
  $L cluster up --head 127.0.0.1 --worker 127.0.0.1 --num-gpus 1 --num-cpus 4 --port 26379 --json \
    > "$OUT/cluster-up.json" || { echo "cluster up failed"; return 1; }
  echo "ray up in $(( $(date +%s) - t )) s"; $L cluster status
  $L plan /root/models/$MODEL --machine h200 --gpus-per-node 2 -- --tensor-parallel-size 2 \
    --max-model-len $CTX --enforce-eager --max-num-seqs 64 --distributed-executor-backend ray \
    --json > "$OUT/plan-tp2.json"
  t=$(date +%s)
  # shellcheck disable=SC2086
  $L up --engine venv --python python3 --model /root/models/$MODEL --name tp2 --port 8000 --timeout 540 \
    --ray-cluster --no-watchdog -- --tensor-parallel-size 2 $VLLM_FLAGS; echo "up exit $? after $(( $(date +%s) - t )) s"
  cp "$ST"/state/logs/tp2*.log "$OUT/vllm-tp2.log" 2>/dev/null
  python3 - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
log = open(f"{out}/vllm-tp2.log", errors="replace").read()
m = re.findall(r"GPU KV cache size: ([\d,]+) tokens", log)
plan = json.load(open(f"{out}/plan-tp2.json"))
planned = plan["memory"]["capacity"]["kv_cache_tokens"]
seen = int(m[-1].replace(",", "")) if m else None
res = {"planned_tokens": planned, "vllm_tokens": seen,
       "ratio": (planned / seen if seen else None), "within_2pct": bool(seen and abs(planned / seen - 1) <= 0.02)}
json.dump(res, open(f"{out}/kv-compare.json", "w"), indent=2); print(res)
PY
  # shellcheck disable=SC2086
  $L bench http://127.0.0.1:8000 $BENCH --out "$OUT/bench-tp2.json" > "$OUT/bench-tp2.txt" 2>&1
  echo "bench tp2 exit $?"; tail -5 "$OUT/bench-tp2.txt"
  $L down tp2; $L cluster down
}

phase_replicas() {  # the same shape twice, one GPU each, behind the gateway (least outstanding)
  local gpu
  for gpu in 0 1; do
    # shellcheck disable=SC2086
    CUDA_VISIBLE_DEVICES=$gpu $L up --engine venv --python python3 --model /root/models/$MODEL \
      --name rep$gpu --port $(( 8001 + gpu )) --timeout 540 --no-watchdog -- $VLLM_FLAGS &
  done
  wait
  cp "$ST"/state/logs/rep*.log "$OUT/" 2>/dev/null
  printf 'routes:\n  - model: %s\n    backends: [rep0, rep1]\n' "$MODEL" > "$ST/gateway.yaml"
  $L gateway up --config "$ST/gateway.yaml" --port 4000 || return 1
  # shellcheck disable=SC2086
  $L bench http://127.0.0.1:4000 $BENCH --out "$OUT/bench-replicas.json" > "$OUT/bench-replicas.txt" 2>&1
  echo "bench replicas exit $?"; tail -5 "$OUT/bench-replicas.txt"
  $L gateway status --json > "$OUT/gateway-status.json"
  $L gateway down; $L down --all
}

for p in "$@"; do
  case $p in
    netcheck) phase_netcheck ;;
    tp2) phase_tp2 ;;
    replicas) phase_replicas ;;
    all) phase_netcheck; phase_tp2; phase_replicas ;;
    *) echo "unknown phase $p"; exit 2 ;;
  esac
done
echo "total $(( $(date +%s) - T0 )) s"
