#!/bin/bash
# On the device: the wheel came as six pieces (vpiece.0..5, a lighter carry); rebuild part0..4 for device-install.sh
set -e
S=/root/stash
for i in 0 1 2 3 4 5; do [ -f $S/vpiece.$i ] || { echo "missing $S/vpiece.$i: machine went cold"; exit 3; }; done
cat $S/vpiece.0 $S/vpiece.1 $S/vpiece.2 $S/vpiece.3 $S/vpiece.4 $S/vpiece.5 > $S/vllm.part0 && rm $S/vpiece.*
for i in 1 2 3 4; do : > $S/vllm.part$i; done
echo joined
