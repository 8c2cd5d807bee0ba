#!/bin/bash
# `llmdeck restart` of a real CPU vLLM 0.32 server while agent-like clients stream through `llmdeck gateway`:
# the answers cut by the stop, with the drain off (--drain 0: vLLM's own stop) and on (the default, 60 s).
#
#   bash evidence/lifecycle/drain/run.sh > evidence/lifecycle/drain/output.txt 2>&1
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd); cd "$ROOT"
W=$(mktemp -d /tmp/llmdeck-drain.XXXXXX); export LLMDECK_STATE_DIR=$W/state
LD=(.venv/bin/llmdeck)
cleanup() { "${LD[@]}" gateway down >/dev/null 2>&1 || true; "${LD[@]}" down ev-drain >/dev/null 2>&1 || true
            rm -rf "$W"; }
trap cleanup EXIT
.venv/bin/python -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null | tail -1
"${LD[@]}" up --model .cache/test-tiny --name ev-drain --port 18881 --engine cpu -- --max-model-len 2048 2>&1 | tail -1
printf 'routes:\n  - model: coder\n    backends: [ev-drain]\n' > "$W/gateway.yaml"
"${LD[@]}" gateway up --config "$W/gateway.yaml" --port 18882 2>&1 | tail -1
run() { .venv/bin/python evidence/lifecycle/drain/restart_under_load.py http://127.0.0.1:18882 ev-drain "$@"; }
echo "== one agent (a tool runs 1 s between its requests)"
run 1 1 0
run 1 1 60
echo "== two agents"
run 2 1 0
run 2 1 60
echo "== three clients with no pause (steady load): the gateway holds new requests while the server drains"
run 3 0 60
