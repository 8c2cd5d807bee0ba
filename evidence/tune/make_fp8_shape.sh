#!/bin/bash
# The Qwen3.6-35B-A3B-FP8 release's shape on the device: gpu-lab's public bf16 config.json plus the
# block-FP8 `quantization_config` of Qwen's FP8 releases (the catalog's override). Used by
# device_tune.sh and device_firstmove.sh; does nothing when the folder is already there.
DIR=/root/models/qwen3.6-35b-a3b-fp8
[ -f $DIR/config.json ] && exit 0
mkdir -p $DIR && cp /root/models/qwen3.6-35b-a3b/tokenizer*.json $DIR/
python3 - <<'PY'
import json
c = json.load(open("/root/models/qwen3.6-35b-a3b/config.json"))
c["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]}
json.dump(c, open("/root/models/qwen3.6-35b-a3b-fp8/config.json", "w"), indent=2)
PY
