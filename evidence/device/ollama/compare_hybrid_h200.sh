#!/bin/bash
# Seed 000's own model family, engine for engine on ONE H200: vLLM 0.22.0 against llama.cpp's server on
# the hybrid Qwen3.6-35B-A3B shape (30 Gated-DeltaNet layers + 10 attention layers, 256 experts, 8 used):
# the architecture of seed 000's Qwen3.5-35B-A3B, whose recurrent layers cannot be cut back to a shorter
# prefix the way an attention KV cache can. compare_gpu_h200.sh measured dense Qwen3 the same way.
#
# A: vLLM, bf16 random weights (gpu-lab's model folder: Qwen's public config, Qwen3.5's tokenizer),
#    compiled, --enable-prefix-caching (mamba cache mode 'align' on a hybrid), 32,768 tokens, gpu-lab's
#    two flags for this shape on an H200 (--language-model-only, --gdn-prefill-backend triton).
# B: llama-server (build_llamacpp_cuda.sh: llama.cpp 0c1e570 for Hopper), every layer on the GPU,
#    32,768 tokens, /metrics, log verbosity 4 (its per-request context-checkpoint lines); all else its
#    defaults (4 slots, unified KV, 8 GiB RAM prompt cache, context checkpoints at user turns). The GGUF is
#    what Ollama users run, Q4_K (output Q6_K), 18.4 GiB: hybrid_gguf.py's skeleton (llama.cpp's own
#    converter over the same config and tokenizer, made here) filled with random blocks on the device.
#
# Workload as compare_gpu_h200.sh: `llmdeck bench --compare`, ABBA, seed 000's agent sessions (4,096-token
# system prompt, 4 turns of 128 in / 64 out), temperature 0, ignore_eos.
#   phase 1 (~6 min): unpack, fill the GGUF while vLLM starts, both servers up, one session at a time.
#   phase 2 (the next call, while warm): 8 sessions at once; then long sessions (8 turns of 1,024 in /
#     128 out) one at a time; stop both.
# Stage (here): the vLLM 0.22.0 parts and llama.cpp parts as compare_gpu_h200.sh says, plus
#   python evidence/device/ollama/hybrid_gguf.py skeleton MODEL_DIR .gpu/hybrid/qwen3.6-35b-a3b-q4 LLAMA_CPP
#   (MODEL_DIR: the config + .gpu/tok-qwen3_5) and gzip -9 the .skel; carry .gpu/hybrid with c6a, then:
#   run  bash evidence/device/ollama/compare_hybrid_h200.sh 1      (then 2), carry .gpu/bin
#   phase 3 (its own staging; one call a vLLM configuration, ~5 min): vLLM alone, phase 1-2's flags plus
#     the given ones, `llmdeck bench` (2 runs) on the short and the long sessions, one at a time:
#   run  bash evidence/device/ollama/compare_hybrid_h200.sh 3 fp8kv --kv-cache-dtype fp8   (then 3 bf16kv)
set -uo pipefail
PHASE=${1:?usage: compare_hybrid_h200.sh 1|2|3 TAG [vllm flags]}
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s); stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT=${OUT:-/tmp/hybrid-out}; D=/root/hybrid; mkdir -p "$D" "$OUT"
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state
L=/root/llamacpp M=qwen3.6-35b-a3b PA=8001 PB=8082 G=/root/qwen3.6-35b-a3b.q4_k.gguf
cuda_libs() {  # the folders of the device's own CUDA 13 runtime and cuBLAS
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
    dirname "$(find /usr/local/cuda* /opt /usr/lib -name "$lib" 2>/dev/null | head -1)"
  done | sort -u | tr '\n' ':'
}
export LD_LIBRARY_PATH=$L/lib:$(cuda_libs)${LD_LIBRARY_PATH:-}

compare() {  # CONCURRENCY PROMPTS (INPUT_LEN, OUTPUT_LEN, TURNS, TAG)
  local tag=c$1${TAG:+-$TAG}
  curl -s -m 5 "http://127.0.0.1:$PB/metrics" > "$D/llamacpp-metrics-$tag-before.txt"
  timeout 400 python3 -m llmdeck bench --compare "http://127.0.0.1:$PA" "http://127.0.0.1:$PB" \
    --tokenizer "/root/models/$M" --prefix-len 4096 --input-len "${INPUT_LEN:-128}" --output-len "${OUTPUT_LEN:-64}" \
    --num-prompts "$2" --num-turns "${TURNS:-4}" --max-concurrency "$1" --repeat 2 --temperature 0 --timeout-total 380 \
    --out "$D/compare-$tag.json" > "$D/compare-$tag.txt" 2>&1
  echo "bench --compare exit $?" >> "$D/compare-$tag.txt"
  curl -s -m 5 "http://127.0.0.1:$PB/metrics" > "$D/llamacpp-metrics-$tag-after.txt"
  stamp "$tag done"; tail -26 "$D/compare-$tag.txt"
  echo "llama-server so far: $(grep -c 'restored context checkpoint' "$D/llamacpp.log") checkpoint restores," \
    "$(grep -c 'forcing full prompt re-processing' "$D/llamacpp.log") full re-processings"
}

setup() {
  stamp "llama.cpp's CUDA build"
  cat /root/stash/llamacpp-cuda.part0 /root/stash/llamacpp-cuda.part1 > /root/stash/llamacpp-cuda.tar.gz
  (cd /root/stash && sha256sum -c llamacpp-cuda.sha256) || exit 1
  rm -rf $L && mkdir -p $L && tar -C $L -xzf /root/stash/llamacpp-cuda.tar.gz
  "$L/bin/llama-server" --version > "$D/llamacpp-version.txt" 2>&1
  grep -q "CUDA0" <("$L/bin/llama-server" --list-devices 2>&1) || { stamp "llama.cpp sees no GPU"; exit 1; }
  stamp "the GGUF (filled while vLLM starts)"
  gunzip -kf /root/stash/$M-q4.skel.gz
  (python3 evidence/device/ollama/hybrid_gguf.py fill /root/stash/$M-q4 "$G" > "$D/gguf.txt" 2>&1; \
   echo "exit $? at $(( $(date +%s) - T0 )) s" >> "$D/gguf.txt") &
  OUT= bash .gpu/bin/device-serve.sh $M $PA -- --language-model-only --gdn-prefill-backend triton \
    --max-model-len 32768 --enable-prefix-caching --gpu-memory-utilization 0.78 > "$D/serve-vllm.txt" 2>&1
  wait
  cat "$D/serve-vllm.txt" "$D/gguf.txt"
  grep -q "^ready after" "$D/serve-vllm.txt" || { stamp "vLLM failed"; exit 1; }
  setsid "$L/bin/llama-server" -m "$G" --host 127.0.0.1 --port $PB -c 32768 -ngl 999 --alias $M --metrics -lv 4 \
    > "$D/llamacpp.log" 2>&1 < /dev/null &
  echo $! > "$D/llamacpp.pid"
  for _ in $(seq 360); do curl -sf -m 2 "http://127.0.0.1:$PB/health" >/dev/null && break; sleep 0.5; done
  curl -sf -m 2 "http://127.0.0.1:$PB/health" >/dev/null || { tail -30 "$D/llamacpp.log"; stamp "llama-server failed"; exit 1; }
  stamp "llama-server up"
  grep -E "n_parallel|n_slots|n_ctx|flash_attn|offloaded|CUDA0 model buffer|cache_ram|kv_unified|checkpoints|file type|recurrent" \
    "$D/llamacpp.log" | head -24
  for p in $PA $PB; do  # warm-up: Triton's JIT, llama.cpp's first graphs
    curl -s -m 120 "http://127.0.0.1:$p/v1/chat/completions" -H 'content-type: application/json' \
      -d "{\"model\":\"$M\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" >/dev/null
  done
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > "$D/nvidia-smi.txt"
  cat "$D/nvidia-smi.txt"
}

vllm_alone() {  # TAG [flags]: vLLM with phase 1's flags plus FLAGS, both session workloads, stopped
  local tag=$1; shift
  bash .gpu/bin/device-stop.sh $M $PA > /dev/null 2>&1
  OUT= bash .gpu/bin/device-serve.sh $M $PA -- --language-model-only --gdn-prefill-backend triton \
    --max-model-len 32768 --enable-prefix-caching --gpu-memory-utilization 0.78 "$@" > "$D/serve-vllm-$tag.txt" 2>&1
  cat "$D/serve-vllm-$tag.txt"; grep -q "^ready after" "$D/serve-vllm-$tag.txt" || { stamp "vLLM failed"; return 1; }
  curl -s -m 120 "http://127.0.0.1:$PA/v1/chat/completions" -H 'content-type: application/json' \
    -d "{\"model\":\"$M\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" >/dev/null
  for w in "short 128 64 4 12" "long 1024 128 8 24"; do
    read -r name il ol turns n <<< "$w"
    timeout 250 python3 -m llmdeck bench "http://127.0.0.1:$PA" --workload agent-sessions --tokenizer "/root/models/$M" --prefix-len 4096 \
      --input-len "$il" --output-len "$ol" --num-prompts "$n" --num-turns "$turns" --max-concurrency 1 --repeat 2 \
      --temperature 0 --timeout-total 240 --out "$D/bench-$tag-$name.json" > "$D/bench-$tag-$name.txt" 2>&1
    echo "bench exit $?" >> "$D/bench-$tag-$name.txt"; stamp "$tag $name done"; tail -12 "$D/bench-$tag-$name.txt"
  done
  cp /root/vllm-$M-$PA.log "$D/vllm-$tag.log"
  bash .gpu/bin/device-stop.sh $M $PA > /dev/null 2>&1
}

if [ "$PHASE" = 3 ]; then
  mkdir -p "$D" && vllm_alone "${@:2}"
elif [ "$PHASE" = 1 ]; then
  setup || exit 1
  compare 1 12
else
  compare 8 64
  INPUT_LEN=1024 OUTPUT_LEN=128 TURNS=8 TAG=long compare 1 24
  bash .gpu/bin/device-stop.sh $M $PA > /dev/null 2>&1
  kill -- -"$(cat "$D/llamacpp.pid")" 2>/dev/null
fi
cp /root/vllm-$M-$PA.log "$D/vllm.log" 2>/dev/null
tar -C "$D" --exclude='*.gguf' -czf "$OUT/hybrid-$PHASE.tar.gz" .
stamp "phase $PHASE done"
