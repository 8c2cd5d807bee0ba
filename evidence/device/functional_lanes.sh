#!/bin/bash
# The functional GPU evidence of issues 5 and 6 on a 2-GPU device machine, one lane per GPU:
#   GPU0: evidence/lifecycle/device_lifecycle.sh (ports 8000, 8001): up with phases, status with live
#         metrics, warm-up report, down; seed 000's flags + --max-num-batched-tokens 2048 diagnosed.
#   GPU1: evidence/check/device_check.sh (port 8002): qwen3.6-35b-a3b with seed 000's flags, check and
#         connect for opencode.
# Each lane writes into its own folder; both are packed into $OUT as two tarballs (the device tool
# returns at most 8 files). Run after gpu-lab's stage/carry/install on the same warm machine:
#   bash evidence/device/functional_lanes.sh
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
mkdir -p /root/ev/lifecycle /root/ev/check
(CUDA_VISIBLE_DEVICES=0 OUT=/root/ev/lifecycle bash evidence/lifecycle/device_lifecycle.sh \
  > /root/ev/lifecycle/run.txt 2>&1) &
(CUDA_VISIBLE_DEVICES=1 PORT=8002 OUT=/root/ev/check bash evidence/check/device_check.sh \
  > /root/ev/check/run.txt 2>&1) &
wait
tar czf "$OUT/lifecycle.tar.gz" -C /root/ev lifecycle
tar czf "$OUT/check.tar.gz" -C /root/ev check
tail -40 /root/ev/lifecycle/run.txt
tail -40 /root/ev/check/run.txt
