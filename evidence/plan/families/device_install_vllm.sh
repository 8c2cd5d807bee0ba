#!/bin/bash
# On the device: assemble the vLLM wheel that stage_vllm.sh split, install it with gpu-lab's dependency
# wheels into /tmp/site (in place of 0.22.0: the family scripts look there), and make the tokenizer
# folders the family runs use (qwen3; Qwen3.6's own). The stash is /root/stash (device-stash.sh).
set -euo pipefail
V=${1:?usage: device_install_vllm.sh VERSION}
S=/root/stash
ls $S/vllm.part* >/dev/null 2>&1 || { echo "COLD: no wheel parts in $S (carry them again)"; exit 3; }
cat $(ls $S/vllm.part* | sort) > $S/vllm-$V-cp38-abi3-manylinux_2_28_x86_64.whl
(cd $S && sha256sum -c vllm-$V.sha256)
rm -f $S/vllm.part*
if [ "$V" != 0.22.0 ]; then  # 0.22.0 is gpu-lab's own release, with its own dependencies
  rm -f $S/vllm-0.22.0-*.whl
  # the versions this release wants in place of gpu-lab's (stage_vllm.sh EXTRA)
  for old in compressed_tensors-0.15 humming_kernels-0.1.2- fastapi-0.165; do rm -f $S/$old*.whl; done
fi
rm -rf /tmp/site && mkdir -p /tmp/site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $S/*.whl 2>&1 \
  | grep -v 'WARNING: Target directory' || true
mk() {  # mk NAME CONFIG TOKENIZER_FAMILY (as gpu-lab's device-install.sh)
  local d=/root/models/$1; mkdir -p $d
  cp $S/models/$2 $d/config.json
  gunzip -c $S/models/tok-$3/tokenizer.json.gz > $d/tokenizer.json
  cp $S/models/tok-$3/tokenizer_config.json $d/
}
mk qwen3-0.6b Qwen3-0.6B.config.json qwen3
mk qwen3.6-35b-a3b Qwen3.6-35B-A3B.config.json qwen3_5
PYTHONPATH=/tmp/site python3 -c "import vllm, torch, transformers; print('vllm', vllm.__version__, '| torch', torch.__version__, '| transformers', transformers.__version__, '| gpu', torch.cuda.get_device_name(0))"
touch /tmp/site/.done
