#!/usr/bin/env bash
# Re-record what real agents send: each client runs headless against evidence/clients/recorder.py
# (a capture endpoint on 127.0.0.1 that answers a minimal valid streamed reply), with its home
# directory in a throwaway folder; make_recording.py turns each capture into
# src/llmdeck/checks/recordings/<client>-<version>.json (token counts with the served tokenizer).
#
#   evidence/clients/record.sh                 # all clients, versions below
#   CLIENTS="opencode continue" evidence/clients/record.sh
#
# Needs: node 20 + npm (opencode-ai, @continuedev/cli, cline, @anthropic-ai/claude-code, @openai/codex), Python 3.11 (aider-chat in its own
# venv, $AIDER_VENV), the repo's venv with uvicorn/starlette/transformers ($PY), and the tiny
# model's tokenizer (.cache/test-tiny: `llmdeck model make-tiny .cache/test-tiny`).
set -euo pipefail

OPENCODE_VERSION=${OPENCODE_VERSION:-1.18.33}
CONTINUE_VERSION=${CONTINUE_VERSION:-1.5.47}
CLINE_VERSION=${CLINE_VERSION:-3.0.65}
AIDER_VERSION=${AIDER_VERSION:-0.86.2}
CLAUDE_VERSION=${CLAUDE_VERSION:-2.1.332}
CODEX_VERSION=${CODEX_VERSION:-0.171.0}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
CLIENTS_DIR=${CLIENTS_DIR:-$ROOT/.cache/clients}
AIDER_VENV=${AIDER_VENV:-$CLIENTS_DIR/venv-aider}
WORK=$(mktemp -d /tmp/llmdeck-record.XXXXXX)
PORT=${PORT:-18555}
BASE=http://127.0.0.1:$PORT/v1
PROMPT="List the files in this directory."
CLIENTS=${CLIENTS:-opencode continue cline aider claude_code codex}
REC_PID=

cleanup() { [[ -n $REC_PID ]] && kill "$REC_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

npm_install() {  # dir package@version binary: installs unless that very version is there
  local have
  have=$(node -p "require('$1/node_modules/${2%@*}/package.json').version" 2>/dev/null || true)
  [[ -x $1/node_modules/.bin/$3 && $have == "${2##*@}" ]] || npm install --prefix "$1" "$2" >/dev/null
}

start_recorder() {  # capture file
  [[ -n $REC_PID ]] && kill "$REC_PID" 2>/dev/null && wait "$REC_PID" 2>/dev/null || true
  "$PY" "$ROOT/evidence/clients/recorder.py" --port "$PORT" --out "$1" &
  REC_PID=$!
  for _ in $(seq 50); do curl -sf "$BASE/models" >/dev/null && return; sleep 0.2; done
  echo "recorder did not start" >&2; exit 1
}

project() {  # name -> a fresh git project dir with one file, and its home
  mkdir -p "$WORK/$1/project" "$WORK/$1/home"
  (cd "$WORK/$1/project" && git init -q . && echo 'print("hi")' > hello.py && git add hello.py &&
    git -c user.email=rec@llmdeck -c user.name=rec commit -qm init)
}

finish() {  # client version package command
  "$PY" "$ROOT/evidence/clients/make_recording.py" --client "$1" --version "$2" --package "$3" \
    --command "$4" --capture "$WORK/$1.jsonl" --workdir "$WORK/$1/project" --home "$WORK/$1/home"
}

record_opencode() {
  npm_install "$CLIENTS_DIR/opencode" "opencode-ai@$OPENCODE_VERSION" opencode
  project opencode; start_recorder "$WORK/opencode.jsonl"
  cat > "$WORK/opencode/project/opencode.json" <<EOF
{"\$schema": "https://opencode.ai/config.json", "model": "vllm/tiny-qwen3",
 "provider": {"vllm": {"npm": "@ai-sdk/openai-compatible", "name": "vLLM (tiny-qwen3)",
  "options": {"baseURL": "$BASE", "apiKey": "sk-recorder"},
  "models": {"tiny-qwen3": {"name": "tiny-qwen3", "limit": {"context": 16384, "output": 4096},
   "tool_call": true, "reasoning": true}}}}}
EOF
  (cd "$WORK/opencode/project" && HOME=$WORK/opencode/home XDG_CONFIG_HOME=$WORK/opencode/home/.config \
    XDG_DATA_HOME=$WORK/opencode/home/.local/share XDG_CACHE_HOME=$WORK/opencode/home/.cache \
    timeout 180 "$CLIENTS_DIR/opencode/node_modules/.bin/opencode" run -m vllm/tiny-qwen3 "$PROMPT")
  finish opencode "$OPENCODE_VERSION" "npm opencode-ai@$OPENCODE_VERSION" \
    "opencode run -m vllm/tiny-qwen3 '$PROMPT' (opencode.json: limit.context 16384, output 4096)"
}

record_continue() {
  npm_install "$CLIENTS_DIR/continue" "@continuedev/cli@$CONTINUE_VERSION" cn
  project continue; start_recorder "$WORK/continue.jsonl"
  cat > "$WORK/continue/config.yaml" <<EOF
name: llmdeck
version: 0.0.1
schema: v1
models:
  - name: tiny-qwen3 (vllm)
    provider: openai
    model: tiny-qwen3
    apiBase: $BASE
    apiKey: sk-recorder
    roles: [chat, edit, apply]
    capabilities: [tool_use]
    defaultCompletionOptions: {contextLength: 16384, maxTokens: 4096}
EOF
  (cd "$WORK/continue/project" && HOME=$WORK/continue/home \
    timeout 180 "$CLIENTS_DIR/continue/node_modules/.bin/cn" -p --config "$WORK/continue/config.yaml" "$PROMPT")
  finish continue "$CONTINUE_VERSION" "npm @continuedev/cli@$CONTINUE_VERSION" \
    "cn -p --config config.yaml '$PROMPT' (contextLength 16384, maxTokens 4096)"
}

record_cline() {
  npm_install "$CLIENTS_DIR/cline" "cline@$CLINE_VERSION" cline
  project cline; start_recorder "$WORK/cline.jsonl"
  local cl=$CLIENTS_DIR/cline/node_modules/.bin/cline cfg=$WORK/cline/home/.cline
  (cd "$WORK/cline/project" && export HOME=$WORK/cline/home &&
    timeout 60 "$cl" auth -p openai -k sk-recorder -m tiny-qwen3 -b "$BASE" --config "$cfg" &&
    timeout 180 "$cl" --config "$cfg" -P openai -m tiny-qwen3 -t 120 "$PROMPT")
  # cline leaves its hub daemon running for this project: stop that one (matched by our temp path)
  pkill -f -- "--cline-hub-daemon --cwd $WORK/cline/project" || true
  finish cline "$CLINE_VERSION" "npm cline@$CLINE_VERSION" \
    "cline auth -p openai -b BASE -m tiny-qwen3; cline -P openai -m tiny-qwen3 '$PROMPT'"
}

record_aider() {
  [[ -x $AIDER_VENV/bin/aider ]] || { python3.11 -m venv "$AIDER_VENV" &&
    "$AIDER_VENV/bin/pip" install -q "aider-chat==$AIDER_VERSION"; }
  project aider; start_recorder "$WORK/aider.jsonl"
  (cd "$WORK/aider/project" && HOME=$WORK/aider/home OPENAI_API_BASE=$BASE OPENAI_API_KEY=sk-recorder \
    timeout 180 "$AIDER_VENV/bin/aider" --model openai/tiny-qwen3 --no-check-update \
    --no-show-model-warnings --yes-always --no-auto-commits --no-analytics --no-gitignore \
    --message "Say hello" hello.py)
  finish aider "$AIDER_VERSION" "PyPI aider-chat==$AIDER_VERSION" \
    "aider --model openai/tiny-qwen3 --message 'Say hello' hello.py (OPENAI_API_BASE=BASE)"
}

record_claude_code() {
  npm_install "$CLIENTS_DIR/claude" "@anthropic-ai/claude-code@$CLAUDE_VERSION" claude
  project claude-code; start_recorder "$WORK/claude-code.jsonl"
  # IS_SANDBOX=1: as root, --dangerously-skip-permissions is refused without it
  (cd "$WORK/claude-code/project" && HOME=$WORK/claude-code/home IS_SANDBOX=1 \
    ANTHROPIC_BASE_URL=${BASE%/v1} ANTHROPIC_AUTH_TOKEN=sk-recorder ANTHROPIC_MODEL=tiny-qwen3 \
    ANTHROPIC_SMALL_FAST_MODEL=tiny-qwen3 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    timeout 180 "$CLIENTS_DIR/claude/node_modules/.bin/claude" -p --dangerously-skip-permissions "$PROMPT")
  finish claude-code "$CLAUDE_VERSION" "npm @anthropic-ai/claude-code@$CLAUDE_VERSION" \
    "claude -p --dangerously-skip-permissions '$PROMPT' (ANTHROPIC_BASE_URL=BASE without /v1, ANTHROPIC_MODEL=tiny-qwen3)"
}

record_codex() {
  npm_install "$CLIENTS_DIR/codex" "@openai/codex@$CODEX_VERSION" codex
  project codex; start_recorder "$WORK/codex.jsonl"
  mkdir -p "$WORK/codex/home/.codex"
  cat > "$WORK/codex/home/.codex/config.toml" <<EOF
model = "tiny-qwen3"
model_provider = "local"

[model_providers.local]
name = "local"
base_url = "$BASE"
wire_api = "responses"
env_key = "LOCAL_KEY"
EOF
  (cd "$WORK/codex/project" && HOME=$WORK/codex/home CODEX_HOME=$WORK/codex/home/.codex LOCAL_KEY=sk-recorder \
    timeout 180 "$CLIENTS_DIR/codex/node_modules/.bin/codex" exec --skip-git-repo-check "$PROMPT" </dev/null)
  finish codex "$CODEX_VERSION" "npm @openai/codex@$CODEX_VERSION" \
    "codex exec --skip-git-repo-check '$PROMPT' (config.toml: model_providers.local, wire_api responses)"
}

for c in $CLIENTS; do "record_$c"; done
