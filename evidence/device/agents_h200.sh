#!/bin/bash
# Issue 34 on one H200 (kind nvidia-h200), in one device call after gpu-lab's stage/carry/install
# (../shared/gpu-lab/README.md): Claude Code's and Codex's API surfaces — Anthropic Messages and OpenAI
# Responses — on vLLM 0.22.0 serving the seeds' coding model shape (Qwen3-Coder-30B-A3B, random weights,
# compiled, the qwen3_coder tool parser seed 004 names), direct and through `llmdeck gateway` with an alias
# and an API key:
#
#   1. the surfaces answer direct (streamed Messages, count_tokens, streamed Responses);
#   2. `llmdeck check --client claude-code` and `--client codex`, direct and through the gateway: the
#      recorded clients' requests replayed (their real base prompts and tools) and the per-surface probes —
#      a tool_use/tool_result round trip, function_call/function_call_output over turns with store:false;
#   3. the gateway's added TTFT on /v1/messages and /v1/responses: benchmarks/gateway_overhead.py --api,
#      direct and gateway in interleaved rounds, 16 streams.
#
# The real `claude` (235 MB) and `codex` (424 MB) binaries do not fit a device call's 64 MiB and that
# machine reaches no registry: they run for real in CI on the CPU engine
# (tests/e2e/test_agents_e2e_integration.py); here their recorded traffic stands in for them.
#
#   bash evidence/device/agents_h200.sh            # ~8 min; writes $OUT/agents.tgz
# Unpack it under evidence/device/agents/.
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
W=/root/agents-run; D=$W/agents; mkdir -p "$D"
OUT=${OUT:-/tmp/agents-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/agents.tgz" -C "$W" agents 2>/dev/null' EXIT
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state
MODEL=qwen3-coder-30b-a3b; PORT=8000; URL=http://127.0.0.1:$PORT; GW_PORT=4000; GW=http://127.0.0.1:$GW_PORT
PY=$(command -v python3)
LD() { "$PY" -m llmdeck "$@"; }

"$PY" -c 'import vllm; print(vllm.__version__)' > "$D/vllm-version.txt" 2>&1
stamp "start $MODEL (compiled)"
# EAGER=1: --enforce-eager (a functional re-run: ~half the start); REASONING=1: the qwen3 reasoning parser
# (the served tokenizer is Qwen3's, whose template thinks by default); SKIP_OVERHEAD=1: checks only.
EXTRA=(); [ "${EAGER:-0}" = 1 ] && EXTRA+=(--enforce-eager)
[ "${REASONING:-0}" = 1 ] && EXTRA+=(--reasoning-parser qwen3)
OUT= bash .gpu/bin/device-serve.sh $MODEL $PORT -- --max-model-len 65536 \
  --enable-auto-tool-choice --tool-call-parser qwen3_coder "${EXTRA[@]}" > "$D/serve.txt" 2>&1 \
  || { stamp "server failed"; tail -30 "$D/serve.txt"; cp /root/vllm-$MODEL-$PORT.log "$D/"; exit 1; }
stamp ready; tail -2 "$D/serve.txt"

stamp "1. the surfaces, direct"
for spec in "messages|{\"model\":\"$MODEL\",\"max_tokens\":16,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" \
            "messages/count_tokens|{\"model\":\"$MODEL\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" \
            "responses|{\"model\":\"$MODEL\",\"max_output_tokens\":16,\"stream\":true,\"store\":false,\"input\":\"hi\"}"; do
  path=${spec%%|*}; body=${spec#*|}
  code=$(curl -s -m 60 -o "$D/direct-${path//\//-}.txt" -w '%{http_code}' "$URL/v1/$path" \
    -H 'content-type: application/json' -d "$body")
  echo "POST /v1/$path -> $code" | tee -a "$D/surfaces.txt"
done

stamp "2. gateway with an alias and a key"
cat > $W/gateway.yaml <<EOF
routes:
  - model: coder
    backends: [$URL]
    messages: {fold_system: true}   # Claude Code's second system message: vLLM 0.22 refuses it
keys_file: $W/keys.json
EOF
KEY=$(LD keys create agents --keys-file $W/keys.json)
LD gateway up --config $W/gateway.yaml --port $GW_PORT > "$D/gateway-up.txt" 2>&1; tail -2 "$D/gateway-up.txt"
for client in claude-code codex; do
  timeout 240 "$PY" -m llmdeck check $URL --client $client --model $MODEL --json > "$D/check-$client-direct.json" \
    2> "$D/check-$client-direct.err"; echo "check $client direct: exit $?" | tee -a "$D/checks.txt"
  timeout 240 "$PY" -m llmdeck check $GW --client $client --model coder --api-key "$KEY" --json \
    > "$D/check-$client-gateway.json" 2> "$D/check-$client-gateway.err"
  echo "check $client gateway: exit $?" | tee -a "$D/checks.txt"
done
LD gateway down > /dev/null 2>&1
cp "$LLMDECK_STATE_DIR/logs/gateway.log" "$D/" 2>/dev/null

stamp "3. the gateway's added TTFT on each surface"
[ "${SKIP_OVERHEAD:-0}" = 1 ] && APIS="" || APIS="messages responses"
for api in $APIS; do
  timeout 200 "$PY" benchmarks/gateway_overhead.py --backend url --base-url $URL --model $MODEL --api $api \
    --concurrency 16 --requests 256 --rounds 3 --client lean --max-tokens 64 --no-litellm \
    --out "$D/gateway_overhead_h200-$api-c16.json" > "$D/overhead-$api.txt" 2>&1
  echo "overhead $api exit $?" >> "$D/overhead-$api.txt"; tail -12 "$D/overhead-$api.txt"
done
cp /root/vllm-$MODEL-$PORT.log "$D/vllm.log"
bash .gpu/bin/device-stop.sh $MODEL $PORT > /dev/null 2>&1
stamp done
