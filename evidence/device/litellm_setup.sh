# Sourced by the device scripts that put LiteLLM's proxy beside llmdeck's gateway (serving_layer.sh,
# gateway_eval_h200.sh). LiteLLM travels as wheels (LITELLM_WHEELS, default /root/stash/litellm: see
# benchmarks/README.md); they go to /tmp/litellm-site, away from vLLM's /tmp/site.
litellm_setup() {  # LOGDIR: installs the carried wheels; prints a `litellm` launcher's path, or nothing
  local whl=${LITELLM_WHEELS:-/root/stash/litellm} py; py=$(command -v python3)
  ls "$whl"/*.whl >/dev/null 2>&1 || return 0
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/litellm-site \
    "$whl"/*.whl > "$1/litellm-install.txt" 2>&1 || return 0
  mkdir -p /root/llbin
  printf '#!/bin/sh\nPYTHONPATH=/tmp/litellm-site:/tmp/site exec %s -c "import sys; from litellm.proxy.proxy_cli import run_server; sys.exit(run_server())" "$@"\n' "$py" > /root/llbin/litellm
  # gateway_overhead.py asks the `python` beside the launcher for LiteLLM's version (session 12's
  # first run lacked it: the benchmark died in 14 s and was rerun by hand)
  printf '#!/bin/sh\nPYTHONPATH=/tmp/litellm-site:/tmp/site exec %s "$@"\n' "$py" > /root/llbin/python
  chmod +x /root/llbin/litellm /root/llbin/python
  echo /root/llbin/litellm
}
