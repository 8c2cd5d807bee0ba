#!/bin/bash
# Seed 000's side by side, engine for engine on ONE H200: vLLM 0.22.0 against llama.cpp's own server
# (`llama-server`, the engine Ollama wraps), both on the GPU. Issue 36's run (compare_h200.sh) could
# only put llama.cpp on the host's CPU; build_llamacpp_cuda.sh now builds its CUDA server here.
#
# Two model shapes on random weights, the same tokenizer on both sides (gpu-lab's rebuilt Qwen one):
# Qwen3-0.6B (issue 36's shape) and Qwen3-8B (Qwen's public config without the yarn edit), each a
# float16 GGUF for llama.cpp (tests/gguf_tiny.py --random) and bf16 dummy weights for vLLM. Each side
# keeps its own defaults except what the comparison needs: vLLM compiled with prefix caching, a share of
# the GPU, 16,384 tokens; llama-server with every layer on the GPU (-ngl 999), 32,768 tokens of context
# for its slots, /metrics on; its slot count (logged), prompt cache and FlashAttention are its defaults.
#
# Workload: `llmdeck bench --compare`, ABBA rounds, seed 000's agent sessions: a 4,096-token system prompt
# shared by sessions of 4 turns (128 tokens in, 64 out a turn), temperature 0, ignore_eos.
#   phase 1 (one call, ~8 min): install, GGUFs, four servers, concurrency 1 on both shapes.
#   phase 2 (the next call, while warm): concurrency 8 on both shapes (agents with sub-agents), stop.
#   phase 3 (its own staging, ~7 min): Qwen3-8B alone, long sessions (8 turns of 1,024 tokens in, 128
#   out), one at a time: how each engine's time to first token grows with a session's history.
# Stage (here): gpu-lab's vLLM 0.22.0 in 38 MB parts (evidence/plan/families/stage_vllm.sh 0.22.0) and
# bash evidence/device/ollama/build_llamacpp_cuda.sh; carry .gpu/vllm-0.22.0/p1..p7, .gpu/p/c6a,
# .gpu/llamacpp-cuda/a, .gpu/llamacpp-cuda/b (each alone: c6a with a part went over 64 MiB once the tree had
# grown by these results, and a refused carry leaves the rest of the install without its wheels), then
# .gpu/p/c6b + device_install_vllm.sh 0.22.0, then:
#   run  bash evidence/device/ollama/compare_gpu_h200.sh 1      (then 2)
# Each phase returns $OUT/ollama-gpu-N.tar.gz (logs, results, metrics) and prints its summary.
set -uo pipefail
PHASE=${1:?usage: compare_gpu_h200.sh 1|2|3}
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT=${OUT:-/tmp/ollama-gpu-out}; D=/root/ollama-gpu; mkdir -p "$D" "$OUT"
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state
L=/root/llamacpp
cuda_libs() {  # the folders of the device's own CUDA 13 runtime and cuBLAS
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
    dirname "$(find /usr/local/cuda* /opt /usr/lib -name "$lib" 2>/dev/null | head -1)"
  done | sort -u | tr '\n' ':'
}
export LD_LIBRARY_PATH=$L/lib:$(cuda_libs)${LD_LIBRARY_PATH:-}
SHAPES="qwen3-0.6b:8000:8081:0.25 qwen3-8b:8001:8082:0.35"

llama_up() {  # NAME PORT: llama-server on the GPU, in its own session, until /health answers
  setsid "$L/bin/llama-server" -m "/root/$1.f16.gguf" --host 127.0.0.1 --port "$2" -c 32768 -ngl 999 \
    --alias "$1" --metrics > "$D/llamacpp-$1.log" 2>&1 < /dev/null &
  echo $! > "$D/llamacpp-$1.pid"
  for _ in $(seq 240); do curl -sf -m 2 "http://127.0.0.1:$2/health" >/dev/null && return 0; sleep 0.5; done
  tail -30 "$D/llamacpp-$1.log"; return 1
}

compare() {  # NAME PORT_A PORT_B CONCURRENCY PROMPTS (INPUT_LEN, OUTPUT_LEN, TURNS, TAG: phase 3's)
  local tag=$1-c$4${TAG:+-$TAG}
  curl -s -m 5 "http://127.0.0.1:$3/metrics" > "$D/llamacpp-metrics-$tag-before.txt"
  timeout 330 python3 -m llmdeck bench --compare "http://127.0.0.1:$2" "http://127.0.0.1:$3" \
    --tokenizer "/root/models/$1" --prefix-len 4096 --input-len "${INPUT_LEN:-128}" --output-len "${OUTPUT_LEN:-64}" \
    --num-prompts "$5" --num-turns "${TURNS:-4}" --max-concurrency "$4" --repeat 2 --temperature 0 --timeout-total 300 \
    --out "$D/compare-$tag.json" > "$D/compare-$tag.txt" 2>&1
  echo "bench --compare exit $?" >> "$D/compare-$tag.txt"
  curl -s -m 5 "http://127.0.0.1:$3/metrics" > "$D/llamacpp-metrics-$tag-after.txt"
  stamp "$tag done"; tail -24 "$D/compare-$tag.txt"
}

setup() {  # SHAPES: llama.cpp unpacked, model folders, GGUFs, vLLM and llama-server up, warmed
  stamp "llama.cpp's CUDA build"
  cat /root/stash/llamacpp-cuda.part0 /root/stash/llamacpp-cuda.part1 > /root/stash/llamacpp-cuda.tar.gz
  (cd /root/stash && sha256sum -c llamacpp-cuda.sha256) || exit 1
  rm -rf $L && mkdir -p $L && tar -C $L -xzf /root/stash/llamacpp-cuda.tar.gz
  "$L/bin/llama-server" --version > "$D/llamacpp-version.txt" 2>&1
  "$L/bin/llama-server" --list-devices >> "$D/llamacpp-version.txt" 2>&1
  cat "$D/llamacpp-version.txt"; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$D/llamacpp-version.txt"
  grep -q "CUDA0" "$D/llamacpp-version.txt" || { stamp "llama.cpp sees no GPU"; exit 1; }
  stamp "Qwen3-8B's model folder: Qwen's public config without the yarn edit, gpu-lab's tokenizer"
  mkdir -p /root/models/qwen3-8b && cp /root/models/qwen3-0.6b/tokenizer* /root/models/qwen3-8b/
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c.pop('rope_scaling'); json.dump(c, open(sys.argv[2],'w'), indent=1)" \
    evidence/plan/families/configs/qwen3-8b-yarn4/config.json /root/models/qwen3-8b/config.json
  for s in $1; do  # the GGUFs while vLLM starts
    IFS=: read -r name _ _ _ <<< "$s"
    (python3 tests/gguf_tiny.py "/root/models/$name" "/root/$name.f16.gguf" --random > "$D/gguf-$name.txt" 2>&1; \
     echo "exit $? at $(( $(date +%s) - T0 )) s" >> "$D/gguf-$name.txt") &
  done
  stamp "vLLM: both shapes at once (compiled, prefix caching, 16,384 tokens)"
  for s in $1; do
    IFS=: read -r name pa _ util <<< "$s"
    OUT= bash .gpu/bin/device-serve.sh "$name" "$pa" -- --max-model-len 16384 --enable-prefix-caching \
      --gpu-memory-utilization "$util" > "$D/serve-vllm-$name.txt" 2>&1 &
  done
  wait
  for s in $1; do
    IFS=: read -r name pa pb _ <<< "$s"
    cat "$D/serve-vllm-$name.txt" "$D/gguf-$name.txt"
    grep -q "^ready after" "$D/serve-vllm-$name.txt" || { stamp "vLLM $name failed"; exit 1; }
    llama_up "$name" "$pb" || { stamp "llama-server $name failed"; exit 1; }
    grep -E "n_parallel|n_slots|n_ctx|flash_attn|offloaded|CUDA0 model buffer|cache_ram|kv_unified|build" \
      "$D/llamacpp-$name.log" | head -20
    for p in $pa $pb; do  # warm-up: Triton's JIT, llama.cpp's first graphs
      curl -s -m 120 "http://127.0.0.1:$p/v1/chat/completions" -H 'content-type: application/json' \
        -d "{\"model\":\"$name\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" >/dev/null
    done
  done
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$D/nvidia-smi.txt"
  cat "$D/nvidia-smi.txt"
}

if [ "$PHASE" = 1 ]; then
  setup "$SHAPES" || exit 1
  compare qwen3-0.6b 8000 8081 1 12
  compare qwen3-8b 8001 8082 1 12
  for s in $SHAPES; do IFS=: read -r name pa _ _ <<< "$s"; cp "/root/vllm-$name-$pa.log" "$D/vllm-$name.log"; done
elif [ "$PHASE" = 3 ]; then  # long sessions: 8 turns of 1,024 tokens in and 128 out, one at a time
  rm -rf "$D" && mkdir -p "$D" && setup "qwen3-8b:8001:8082:0.35" || exit 1
  INPUT_LEN=1024 OUTPUT_LEN=128 TURNS=8 TAG=long compare qwen3-8b 8001 8082 1 24
  cp /root/vllm-qwen3-8b-8001.log "$D/vllm-qwen3-8b.log"
  bash .gpu/bin/device-stop.sh qwen3-8b 8001 > /dev/null 2>&1
  kill -- -"$(cat "$D/llamacpp-qwen3-8b.pid")" 2>/dev/null
else
  compare qwen3-8b 8001 8082 8 64
  compare qwen3-0.6b 8000 8081 8 64
  for s in $SHAPES; do
    IFS=: read -r name pa _ _ <<< "$s"
    cp "/root/vllm-$name-$pa.log" "$D/vllm-$name.log" 2>/dev/null
    bash .gpu/bin/device-stop.sh "$name" "$pa" > /dev/null 2>&1
    kill -- -"$(cat "$D/llamacpp-$name.pid")" 2>/dev/null
  done
fi
tar -C "$D" -czf "$OUT/ollama-gpu-$PHASE.tar.gz" .
stamp "phase $PHASE done"
