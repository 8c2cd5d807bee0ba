#!/bin/bash
# Evidence for `llmdeck plan` with --quantization on full-precision checkpoints (online quantization):
# the weights and KV cache real vLLM 0.22.0 prints on the H200, against the plan.
#
# On the device machine, after ../shared/gpu-lab is staged and installed (its README, steps 1-2), from the
# repository root:   OUT=$OUT bash evidence/plan/online-quant/device_online_quant.sh BUDGET_S [RUN_ONLY "i j …"]
# First it dumps vLLM 0.22.0's command line (evidence/plan/vllm-cli/dump_cli.py: the boolean flags, short
# aliases and choices llmdeck's flag parser must know) to $OUT/vllm-0.22.0.json; then the rows of
# plan.txt, by the families' method (device_families.sh: random weights, `--load-format dummy`, the qwen3
# tokenizer, `--enforce-eager --max-num-seqs 8`, stopped once the KV-cache lines are printed), state in
# /root/oq. Copy $OUT/runs.jsonl, $OUT/logs/ and $OUT/device.json to evidence/plan/online-quant/results/
# (tests/unit/test_plan_online_quant_evidence.py reads them there) and the dump to evidence/plan/vllm-cli/.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 2
OUT=${OUT:-/tmp/oq-out}
mkdir -p "$OUT"
ls /tmp/site/.done >/dev/null 2>&1 || { echo "COLD: gpu-lab not installed (run device-install.sh first)"; exit 3; }
if [ ! -s "$OUT/vllm-0.22.0.json" ] && [ -z "${2:-}" ]; then
  PYTHONPATH=/tmp/site timeout 120 python3 evidence/plan/vllm-cli/dump_cli.py > "$OUT/vllm-0.22.0.json" 2> "$OUT/dump.err" \
    || { echo "dump failed:"; tail -5 "$OUT/dump.err"; }
fi
ST=/root/oq CONFIGS=evidence/plan/families/configs PLAN_FILE=evidence/plan/online-quant/plan.txt \
  OUT="$OUT" exec bash evidence/plan/families/device_families.sh "${1:-500}" "${2:-}"
