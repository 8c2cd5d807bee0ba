#!/bin/bash
# Issue 3, session 5: agreement with `vllm bench serve` on ONE H200 (kind nvidia-h200), the two loads
# one after the other on one server, over several back-to-back device calls.
#
# Why: in v6-v8 (two lanes on two GPUs at once, a fresh client process per run, 20-40 requests a
# run) the server's own mean TTFT moved 5-15% between two runs of the same prompts and send times;
# TPOT did not. A 2048-token prefill runs outside CUDA graphs, so its time depends on the host CPU,
# which the other lane shared. Here: one server, nothing beside it, server and client on separate
# cores; each tool in one long-lived worker process (no ~15 s `vllm bench serve` start per run, no
# initial test request); each run = 3 blocks interleaved block by block with the other tool's
# (same prompts and send times per block); 96 requests a run at 1 req/s, 180 at 16 concurrent;
# per-request TTFTs and the server's TTFT histogram kept for every block.
#
#   call 1:  bash evidence/device/bench_long.sh start BUDGET_S     (server start, warm-up, pairs)
#   call 2+: bash evidence/device/bench_long.sh cont BUDGET_S      (same server: more pairs)
# Every call resumes the saved block pairs and stops before a pair that would pass BUDGET_S; the
# server outlives the call while the machine stays warm (the next call must follow within ~30 s).
# Environment: SUF (label suffix, default v9), MODEL (default qwen3-coder-30b-a3b), LOADS ("1rps c16",
# the default, or one of them), WARM_S (extra warm-up seconds in the start call, default 0: in v9 the
# server's own TTFT at 1 req/s fell from ~105 to ~72 ms over its first ~20 minutes of traffic).
# BURST (gamma shape of the 1 req/s arrivals, default 1 = Poisson, as `vllm bench serve`); LOADS may
# also name "1rps-aa": an A/A control after the 1 req/s comparison (both slots run `vllm bench serve`,
# `agreement_cpu.py --control vllm`) in whatever time the call has left: how far two runs of the SAME
# client on the same prompts and send times differ on this server.
# v9 (2026-11-30): SUF=v9 ... start 575, then cont 578 and two shorter calls; 16 concurrent met.
# v10 (session 6): LOADS=1rps WARM_S=260 SUF=v10 ... start 575, cont 580, cont 560: 1 req/s 3 runs, TTFT
#   1.040 (the server slower during llmdeck's blocks in 7 of 9 pairs; in v9 during vLLM's in 7 of 7).
# TEMP: a temperature both tools send (unset: none, the server's default = random sampling; 0 = greedy,
# the same tokens in both servings of a prompt, so the decode steps' MoE routing repeats too).
# v11 (session 7): LOADS="1rps 1rps-aa" BURST=16 TEMP=0 WARM_S=60 SUF=v11 ... start 575, cont 580, cont 580,
#   cont 232: A/B TTFT 0.969 (TPOT 0.999, tok/s 1.000); A/A (vllm vs vllm) runs 1.043 and 0.936.
# BLOCKS: block pairs per run (default 3: 96 requests a run at 1 req/s, 32 a block). The A/A showed one
# 96-request run's mean TTFT moving up to 6.4%; 5 blocks (160 requests a run) shrink that by ~1.3x and
# still fit one session: start (3 pairs) + cont 580 (6) + cont 580 (6) ~ 25 minutes with staging.
# v12 (session 8): LOADS=1rps BLOCKS=5 BURST=16 TEMP=0 WARM_S=60 SUF=v12 ... start 575; then cont 580
#   twice: all 15 pairs; TTFT 0.984, TPOT 0.990, ITL 0.990, tok/s 1.000 (every run within 3%).
set -uo pipefail
ls /tmp/site/.done >/dev/null 2>&1 || { echo COLD; exit 3; }
PHASE=${1:-start}; BUDGET=${2:-580}; SUF=${SUF:-v9}
T0=$(date +%s)
export PYTHONUNBUFFERED=1
B=/root/ev/long; mkdir -p $B
MODEL=${MODEL:-qwen3-coder-30b-a3b}; TOK=/root/models/$MODEL
NC=$(nproc); SCPU=0-$((NC - 5)); CCPU=$((NC - 4))-$((NC - 1))
pin() { if command -v taskset >/dev/null; then taskset -c "$@"; else shift; "$@"; fi; }  # CPUS CMD...
left() { echo $((BUDGET - ($(date +%s) - T0) - 20)); }
WARM=""
if [ "$PHASE" = start ]; then
  { nproc; lscpu; nvidia-smi topo -m; nvidia-smi -q -d CLOCK | head -30; } > $B/host.txt 2>&1
  CUDA_VISIBLE_DEVICES=0 pin $SCPU bash .gpu/bin/device-serve.sh $MODEL 8010 -- \
    --max-model-len 8192 --no-enable-prefix-caching > $B/serve.txt 2>&1 || { echo "server failed"; tail -30 $B/serve.txt; exit 1; }
  echo "server up at $(($(date +%s) - T0)) s (cores $SCPU; clients on $CCPU)"
  WARM=--warmup
fi
python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8010/health', timeout=5)" 2>/dev/null || { echo "no server on 8010"; exit 4; }
W=(--base-url http://127.0.0.1:8010 --model $MODEL --tokenizer $TOK --input-len 2048 --output-len 512
   --workers --no-ready-check --resume --runs 3 --blocks ${BLOCKS:-3})
agree() {  # LABEL LIMIT_S ARGS...
  local label=$1 lim=$2; shift 2
  [ "$lim" -gt 60 ] || { echo "$label: no time left"; return; }
  echo "== $label: up to $lim s"
  PYTHONPATH=src:/tmp/site pin $CCPU timeout $lim python3 benchmarks/agreement_cpu.py "${W[@]}" "$@" \
    --stop-after $((lim - 10)) --label $label --out $B/agreement_$label.json 2>&1 | tee -a $B/lane-$label.txt
  cp $B/agreement_$label.json "$OUT/" 2>/dev/null
}
LOADS=${LOADS:-1rps c16}; WARM_S=${WARM_S:-0}; BURST=${BURST:-1}
[ -n "${TEMP:-}" ] && W+=(--temperature "$TEMP")
R1=(--request-rate 1 --burstiness $BURST --num-prompts $((32 * ${BLOCKS:-3})) --pair-estimate 100)
[ -n "$WARM" ] && WARM="--warmup --warmup-seconds $WARM_S"
L=$(left); SHARE=$L; [ "$LOADS" = "1rps c16" ] && SHARE=$((L * 52 / 100))
case " $LOADS " in *" 1rps "*)
  agree h200-1rps-$SUF $SHARE "${R1[@]}" $WARM --warmup-prompts 32
  WARM="" ;; esac
case " $LOADS " in *" 1rps-aa "*)
  # only once the comparison above has all its runs (agreement_cpu.py exits 0 only then, or 1 if it
  # finished outside 3%: both mean "done" here; the saved file says which)
  if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d['runs_done'] < d['runs_planned'])" \
      $B/agreement_h200-1rps-$SUF.json 2>/dev/null || [[ " $LOADS " != *" 1rps "* ]]; then
    agree h200-1rps-aa-$SUF $(left) "${R1[@]}" --control vllm $WARM
  fi ;; esac
case " $LOADS " in *" c16 "*)
  agree h200-c16-$SUF $(left) --max-concurrency 16 --range-ratio 0.5 --num-prompts 180 --pair-estimate 100 \
    $WARM --warmup-prompts 32 ;; esac
cp /root/vllm-$MODEL-8010.log $B/ 2>/dev/null
tar czf "$OUT/long-logs.tar.gz" -C /root/ev long
for f in $B/lane-*.txt; do echo "-- $f"; tail -n 3 "$f"; done
echo "total $(($(date +%s) - T0)) s"
