#!/bin/bash
# Stage a later vLLM release for the device machine, beside ../shared/gpu-lab's 0.22.0 (whose staged
# dependency wheels it reuses). The device has PyTorch 2.11 (CUDA 13): vLLM 0.23.0-0.26.0 are built on
# it (their wheels pin torch==2.11.0); 0.27.0 and later pin torch 2.13 and cannot run there.
#
#   bash ../shared/gpu-lab/stage.sh                       # once: 0.22's wheels and the tokenizers
#   bash evidence/plan/families/stage_vllm.sh 0.26.0      # then this (~300 MB under .gpu/vllm-0.26.0)
#
# Parts of PART_MB (38 by default) leave room in a 64 MiB carry for the ~23 MB of tracked files. Then,
# one call right after the other (the machine stays warm ~30 s):
#   run  bash .gpu/bin/device-stash.sh .gpu/vllm-0.26.0/pN   carry [".gpu/vllm-0.26.0/pN", ".gpu/bin"]  (each N)
#   run  bash .gpu/bin/device-stash.sh .gpu/p/c6a             carry [".gpu/p/c6a", ".gpu/bin"]  (0.22's deps,
#   run  bash .gpu/bin/device-stash.sh .gpu/p/c6b ...          split in two: what gpu-lab's c6 holds)
#   run  bash evidence/plan/families/device_install_vllm.sh 0.26.0
set -euo pipefail
V=${1:?usage: stage_vllm.sh VERSION (0.22.0 .. 0.26.0)}
PART_MB=${PART_MB:-38}
ROOT=$(git rev-parse --show-toplevel)
G="$ROOT/.gpu/vllm-$V"
mkdir -p "$G/dl"
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp)
for n in 35 34 31 28 27 26 24 17; do PLAT+=(--platform "manylinux_2_${n}_x86_64"); done
PLAT+=(--platform manylinux2014_x86_64 --platform linux_x86_64)
# What 0.26.0's requirements changed from gpu-lab's set and a start needs: quantized configs load through
# compressed-tensors and humming-kernels; fastapi < 0.137; nvtx (a requirement of 0.26; v1/utils.py imports it
# for profiling ranges).
EXTRA=(compressed-tensors==0.17.0 humming-kernels==0.1.10 fastapi==0.136.3 nvtx==0.2.15)
# 0.22.0 is gpu-lab's own release: its wheel in smaller parts, with gpu-lab's dependencies unchanged
[ "$V" = 0.22.0 ] && EXTRA=()
python3 -m pip download -q --no-deps "${PLAT[@]}" -d "$G/dl" "vllm==$V" "${EXTRA[@]}" 2>&1 | grep -v "^WARNING: Location" || true
W=$(ls "$G"/dl/vllm-"$V"-*.whl)
rm -rf "$G"/p[0-9]* "$G"/vllm.part*
(cd "$G" && split -b $((PART_MB * 1000000)) -d -a 2 "$W" vllm.part)
i=1; for p in "$G"/vllm.part*; do mkdir -p "$G/p$i"; mv "$p" "$G/p$i/"; i=$((i + 1)); done
last="$G/p$((i - 1))"
(cd "$G/dl" && sha256sum "$(basename "$W")") > "$last/vllm-$V.sha256"
find "$G/dl" -name '*.whl' ! -name "vllm-$V-*" -exec cp {} "$last/" \;
du -sh "$G"/p*
echo "staged vllm $V in $((i - 1)) parts; carry them, then .gpu/p/c6a and .gpu/p/c6b, then run device_install_vllm.sh $V"
