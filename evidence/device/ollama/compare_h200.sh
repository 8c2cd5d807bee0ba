#!/bin/bash
# Issue 36 on one H200 (kind nvidia-h200): seed 000's side-by-side, reproduced with `llmdeck bench
# --compare`: vLLM 0.22.0 (prefix caching on) against llama.cpp's server (llama-cpp-python 0.3.36, the
# engine Ollama is built on; Ollama itself installs from no registry we reach) on the seeds' agent
# workload: one long system prompt (4096 tokens) shared by multi-turn sessions, ABBA rounds, one result
# with each metric's ratio. Seed 000 measured Ollama 2-4 s TTFT against vLLM 0.12 s (prefix cache hit).
#
# (Superseded for the engine-for-engine figure by compare_gpu_h200.sh: llama.cpp's CUDA server, built here by
# build_llamacpp_cuda.sh; results in gpu/.) The llama.cpp build is the CPU one: gpu-lab's wheels (../shared/gpu-lab/requirements-device.txt) hold
# no llama.cpp, PyPI ships llama-cpp-python as an sdist only (no CUDA wheel), and the device reaches no
# registry to build one. So side B runs on the host's CPU cores while side A runs on the GPU: the ratio
# measures "vLLM with prefix caching on the GPU" against "llama.cpp without a GPU", not the engines alone.
# If `nvcc` and `cmake` are on the device and LLAMACPP_CUDA_SDIST points at the carried sdist, the script
# builds the CUDA one instead (-DGGML_CUDA=on, all layers offloaded) and says so in the summary.
#
# Both sides serve the Qwen3-0.6B shape on random weights (vLLM --load-format dummy via gpu-lab's
# device-serve.sh; llama.cpp a float16 GGUF of the same config written by tests/gguf_tiny.py --random),
# with the same tokenizer (gpu-lab's rebuilt Qwen tokenizer), so both prefill the same token counts.
#
# Stage here (once; ~9 min on 2 cores: it compiles llama.cpp with AVX2 for the H200 host's CPUs):
#   bash evidence/device/ollama/compare_h200.sh stage      # -> .gpu/llamacpp/*.whl (~24 MB)
# After gpu-lab's stage/carry/install, carry it and run, in one call:
#   run command: bash evidence/device/ollama/compare_h200.sh   carry: [".gpu/bin", ".gpu/llamacpp"]
#   (~8 min); results: $OUT/ollama-compare/ (compare-h200.json, summary.json, both servers' logs).
set -uo pipefail
if [ "${1:-}" = stage ]; then
  mkdir -p .gpu/llamacpp
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    python3.11 -m pip wheel --no-deps --no-cache-dir -w .gpu/llamacpp llama-cpp-python==0.3.36 starlette-context==0.3.6
  ls -la .gpu/llamacpp; exit $?
fi
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
OUT=${OUT:-/tmp/ollama-compare-out}; D=$OUT/ollama-compare; mkdir -p "$D"
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state
PY=$(command -v python3)
MODEL=qwen3-0.6b; M=/root/models/$MODEL; PORT_A=8000; PORT_B=8081; CTX=16384
SITE_B=/tmp/llamacpp-site; BUILD=cpu; NGL=0

stamp "llama.cpp's server: install"
if command -v nvcc >/dev/null && command -v cmake >/dev/null && [ -n "${LLAMACPP_CUDA_SDIST:-}" ]; then
  CMAKE_ARGS="-DGGML_CUDA=on" "$PY" -m pip install --no-index --no-deps --target $SITE_B "$LLAMACPP_CUDA_SDIST" \
    > "$D/llamacpp-cuda-build.txt" 2>&1 && BUILD=cuda && NGL=-1
fi
[ $BUILD = cpu ] && "$PY" -m pip install --no-index --no-deps --target $SITE_B .gpu/llamacpp/*.whl \
  > "$D/llamacpp-install.txt" 2>&1
PYTHONPATH=$SITE_B:/tmp/site "$PY" -c 'import llama_cpp; print(llama_cpp.__version__)' > "$D/llamacpp-version.txt" 2>&1 \
  || { stamp "llama.cpp did not install"; cat "$D/llamacpp-version.txt"; exit 1; }
stamp "build: $BUILD, llama-cpp-python $(cat "$D/llamacpp-version.txt")"

stamp "the GGUF: $MODEL's shape, random float16 weights, gpu-lab's tokenizer"
"$PY" tests/gguf_tiny.py $M /root/$MODEL.f16.gguf --random > "$D/gguf.txt" 2>&1 || { cat "$D/gguf.txt"; exit 1; }

stamp "A: vLLM (compiled, prefix caching on)"
OUT= bash .gpu/bin/device-serve.sh $MODEL $PORT_A -- --max-model-len $CTX --enable-prefix-caching \
  > "$D/serve-vllm.txt" 2>&1 || { stamp "vLLM failed"; tail -30 "$D/serve-vllm.txt"; exit 1; }
stamp "B: llama.cpp's server ($BUILD)"
PYTHONPATH=$SITE_B:/tmp/site setsid "$PY" -m llama_cpp.server --model /root/$MODEL.f16.gguf --host 127.0.0.1 \
  --port $PORT_B --n_ctx $CTX --n_threads $(nproc) --n_gpu_layers $NGL --model_alias $MODEL --interrupt_requests False \
  > "$D/llamacpp-server.log" 2>&1 &
LPID=$!
for _ in $(seq 120); do curl -sf -m 2 http://127.0.0.1:$PORT_B/v1/models >/dev/null && break; sleep 1; done
curl -sf -m 2 http://127.0.0.1:$PORT_B/v1/models > "$D/llamacpp-models.json" || { tail -30 "$D/llamacpp-server.log"; exit 1; }

stamp "warm up both (Triton JIT, llama.cpp's first graph)"
for p in $PORT_A $PORT_B; do
  curl -s -m 120 http://127.0.0.1:$p/v1/chat/completions -H 'content-type: application/json' \
    -d "{\"model\":\"$MODEL\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" > /dev/null
done

stamp "bench --compare: agent sessions behind a 4096-token system prompt, ABBA rounds"
timeout 420 "$PY" -m llmdeck bench --compare http://127.0.0.1:$PORT_A http://127.0.0.1:$PORT_B \
  --tokenizer $M --prefix-len 4096 --input-len 128 --output-len 64 --num-prompts 12 --num-turns 4 \
  --max-concurrency 1 --repeat 2 --temperature 0 --timeout-total 300 --out "$D/compare-h200.json" \
  > "$D/compare.txt" 2>&1
echo "bench --compare exit $?" >> "$D/compare.txt"; tail -22 "$D/compare.txt"

"$PY" - "$D" "$BUILD" <<'PYEOF'
import json, sys
d, build = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(f"{d}/compare-h200.json"))
except (OSError, ValueError) as exc:
    print("no result:", exc); sys.exit(1)
rows = {x["metric"]: x for x in r["rows"]}
ttft = rows["mean TTFT"]
summary = {
    "issue": 36, "llamacpp_build": build, "order": r["order"], "status": r["status"],
    "a": {"url": r["a"]["url"], "engine": r["a"]["engine"], "server": r["a"]["result"]["target"]["server_version"]},
    "b": {"url": r["b"]["url"], "engine": r["b"]["engine"] or "llama-cpp-python (no /metrics)"},
    "mean_ttft_ms": {"vllm": ttft["a"], "llamacpp": ttft["b"], "ratio_llamacpp_over_vllm": ttft["ratio"]},
    "median_ttft_ms": {"vllm": rows["median TTFT"]["a"], "llamacpp": rows["median TTFT"]["b"]},
    "mean_tpot_ms": {"vllm": rows["mean TPOT"]["a"], "llamacpp": rows["mean TPOT"]["b"]},
    "vllm_prefix_cache_hit_rate_pct": rows["prefix-cache hit rate"]["a"],
    "seed_000": {"ollama_ttft_s": "2-4", "vllm_ttft_s": 0.12, "ratio": "17-33x"},
}
json.dump(summary, open(f"{d}/summary.json", "w"), indent=2)
print(json.dumps(summary, indent=2))
PYEOF
cp /root/vllm-$MODEL-$PORT_A.log "$D/vllm.log" 2>/dev/null
bash .gpu/bin/device-stop.sh $MODEL $PORT_A > /dev/null 2>&1
kill "$LPID" 2>/dev/null
stamp done
