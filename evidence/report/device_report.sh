#!/bin/bash
# Issue 20 on ONE H200 (kind nvidia-h200): real llmdeck bench results for the HTML report — the seeds'
# suite on the seeds' coding model, and a concurrency sweep — with /metrics and NVML sampled.
# Run on the device from the repo root, after gpu-lab's stage/carry/install (~8 min with the start):
#   bash evidence/report/device_report.sh
# Writes $OUT/report/{seeds,sweep}.json (and .html where the device has matplotlib; otherwise render
# them here: `llmdeck report $OUT/report/seeds.json --html seeds.html`).
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
OUT=${OUT:-/tmp/llmdeck-evidence}; B=$OUT/report; mkdir -p "$B"
MODEL=${MODEL:-qwen3-coder-30b-a3b}; PORT=${PORT:-8010}; URL=http://127.0.0.1:$PORT
trap 'bash .gpu/bin/device-stop.sh $MODEL $PORT >/dev/null 2>&1' EXIT
bash .gpu/bin/device-serve.sh $MODEL $PORT -- --max-model-len 131072 > "$B/serve.txt" 2>&1 \
  || { echo "server failed"; tail -30 "$B/serve.txt"; exit 1; }
export PYTHONPATH=src:/tmp/site COLUMNS=120
TOK=/root/models/$MODEL
python3 -m llmdeck bench $URL --tokenizer $TOK --suite seeds --warmup 2 \
  --out "$B/seeds.json" > "$B/seeds.txt" 2>&1; echo "seeds exit $?" | tee -a "$B/seeds.txt"
python3 -m llmdeck bench $URL --tokenizer $TOK --input-len 2048 --output-len 512 --num-prompts 64 \
  --max-concurrency 1,4,16,64 --goodput ttft:2000 --goodput tpot:50 \
  --out "$B/sweep.json" > "$B/sweep.txt" 2>&1; echo "sweep exit $?" | tee -a "$B/sweep.txt"
for r in seeds sweep; do
  python3 -m llmdeck report "$B/$r.json" --html "$B/$r.html" >/dev/null 2>>"$B/$r.txt" || true
done
tail -25 "$B/seeds.txt"
