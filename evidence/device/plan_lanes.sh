#!/bin/bash
# Run the plan evidence (evidence/plan/device_plan_vs_vllm.sh) on a 2-GPU device machine: two lanes in
# parallel, one GPU and one port each. State lives in /root/ev (it survives between calls while the
# machine stays warm); the merged comparison and the logs are copied to $OUT.
#   bash evidence/device/plan_lanes.sh BUDGET_S CALL [RUN_ONLY_LANE0] [RUN_ONLY_LANE1]
set -uo pipefail
BUDGET=${1:-540}; CALL=${2:-1}
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
mkdir -p /root/ev
EV=/root/ev
(LANE=0 NLANES=2 CALL=$CALL RUN_ONLY=${3:-} CUDA_VISIBLE_DEVICES=0 PORT=8000 OUT=$EV \
  bash evidence/plan/device_plan_vs_vllm.sh "$BUDGET" > $EV/lane0-$CALL.txt 2>&1) &
(LANE=1 NLANES=2 CALL=$CALL RUN_ONLY=${4:-} CUDA_VISIBLE_DEVICES=1 PORT=8001 OUT=$EV \
  bash evidence/plan/device_plan_vs_vllm.sh "$BUDGET" > $EV/lane1-$CALL.txt 2>&1) &
wait
cat $EV/lane0-$CALL.txt $EV/lane1-$CALL.txt
# merge: for each run index keep the last entry that was not skipped
python3 - "$EV" <<'PY'
import json, pathlib, sys
ev = pathlib.Path(sys.argv[1]); best = {}
for f in sorted(ev.glob("runs-*-*.jsonl"), key=lambda p: p.name.split("-")[2]):
    for line in f.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r["status"] != "skipped" or r["run"] not in best:
            best[r["run"]] = r
(ev / "runs.jsonl").write_text("".join(json.dumps(best[k]) + "\n" for k in sorted(best)))
print("runs done:", sorted(k for k, r in best.items() if r["status"] != "skipped"),
      "skipped:", sorted(k for k, r in best.items() if r["status"] == "skipped"))
PY
tar czf $OUT/plan-logs.tar.gz -C /root plan-logs $(cd /root && ls ev/*.txt ev/*.jsonl 2>/dev/null) 2>/dev/null
PYTHONPATH=src:/tmp/site python3 evidence/plan/compare.py $EV/runs.jsonl --models-root /root/models \
  --device $EV/device.json --out "$OUT"
cat "$OUT/compare.md" 2>/dev/null
