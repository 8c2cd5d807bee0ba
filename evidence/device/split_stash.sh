#!/bin/bash
# gpu-lab's chunks (.gpu/c1..c6, ~51 MB each) no longer fit one device call beside this repository's
# tracked files (~23 MB; a call carries 64 MiB in all). This splits them into ~26 MB pieces under .gpu/p/:
# p/1..p/10 (the vLLM wheel's five parts, two pieces each) and p/c6a, p/c6b (the other wheels and models).
# Carry them one by one, back to back:
#   run: bash .gpu/bin/device-stash.sh .gpu/p/N                     carry: [".gpu/p/N", ".gpu/bin"]
# and in the last call put the parts back together before gpu-lab's install:
#   bash .gpu/bin/device-stash.sh .gpu/p/c6b && cd /root/stash && for i in 0 1 2 3 4; do
#     cat vllm.part$i.? > vllm.part$i && rm vllm.part$i.?; done && cd - && bash .gpu/bin/device-install.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)/.gpu"
rm -rf p && mkdir p
n=0
for i in 0 1 2 3 4; do
  src=$(ls c*/vllm.part$i)
  split -b 26500000 -d -a 1 "$src" "p/piece.$i."
  for piece in p/piece.$i.*; do
    n=$((n + 1)); mkdir -p "p/$n"; mv "$piece" "p/$n/vllm.part$i.${piece##*.}"
  done
done
mkdir -p p/c6a p/c6b
cp -r c6/models c6/vllm.sha256 p/c6a/
total=0
for w in c6/*.whl; do
  if [ "$total" -lt 24000000 ]; then cp "$w" p/c6a/; total=$((total + $(stat -c %s "$w"))); else cp "$w" p/c6b/; fi
done
du -sh p/*
