#!/bin/bash
# Evidence for issue 38: vLLM 0.22.0's KV-cache lines on the H200 for the families round 1 did not
# measure (Mistral-Small 3.x 24B, an FP8 70B, Nemotron-H hybrid, gemma-3-4b) and for gpt-oss-120b at vLLM's
# default --max-num-seqs 1024 (the dummy sampler's share of the profile, which round 1's 8 seqs hid).
#
# The same method as round 1 (device_families.sh: random weights of each public config.json shape,
# `--load-format dummy`, the qwen3 tokenizer, `--enforce-eager --max-num-seqs 8` unless a row overrides
# it, stopped once vLLM printed its KV-cache lines), with plan-round2.txt and its own state folder.
#
# On the device machine, after ../shared/gpu-lab is staged and installed (its README, steps 1-2), from the
# repository root (the configs travel with the tracked files):
#   OUT=$OUT bash evidence/plan/families/device_families_round2.sh 500 [RUN_ONLY "i j …", run in that order]
# Writes $OUT/runs.jsonl, $OUT/logs/run-N-NAME.log and $OUT/device.json; copy them to
# evidence/plan/families/results-round2/ (tests/unit/test_plan_family_evidence.py reads them there).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 2
ST=/root/fam2 CONFIGS=evidence/plan/families/configs PLAN_FILE=evidence/plan/families/plan-round2.txt \
  exec bash evidence/plan/families/device_families.sh "${1:-500}" "${2:-}"
