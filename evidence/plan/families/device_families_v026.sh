#!/bin/bash
# Evidence: vLLM 0.26.0's KV-cache lines on the H200 against `llmdeck plan` for the same flags — the
# method of rounds 1-2 (device_families.sh: random weights of each public config.json shape,
# `--load-format dummy`, the qwen3 tokenizer, `--enforce-eager --max-num-seqs 8` unless a row overrides
# it, stopped once vLLM printed its KV-cache lines), rows from plan-v0.26.txt.
#
# On the device machine, after stage_vllm.sh 0.26.0's parts are carried and device_install_vllm.sh 0.26.0
# has run, from the repository root:
#   OUT=$OUT bash evidence/plan/families/device_families_v026.sh 540 [RUN_ONLY "i j …", run in that order]
# Writes $OUT/runs.jsonl, $OUT/logs/run-N-NAME.log and $OUT/device.json; copy them to
# evidence/plan/families/results-v0.26/ (tests/unit/test_plan_family_evidence.py reads them there).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 2
PYTHONPATH=/tmp/site python3 -c 'import vllm; assert vllm.__version__.startswith("0.26"), vllm.__version__' \
  || { echo "COLD or wrong vLLM in /tmp/site: run device_install_vllm.sh 0.26.0 first"; exit 3; }
ST=/root/fam-v026 CONFIGS=evidence/plan/families/configs PLAN_FILE=evidence/plan/families/plan-v0.26.txt \
  exec bash evidence/plan/families/device_families.sh "${1:-540}" "${2:-}"
