"""Dump the `vllm serve` command line an installed vLLM accepts: its boolean flags, the flags that take
several values, short aliases, the choices llmdeck checks (``--dtype``, ``--kv-cache-dtype``) and
``--quantization``'s methods.

    python evidence/plan/vllm-cli/dump_cli.py > evidence/plan/vllm-cli/vllm-X.Y.Z.json

tests/unit/test_vllm_cli_tables.py holds llmdeck's tables (llmdeck/plan/vllm_cli.py) against every
committed dump, so a flag vLLM takes without a value is never read as taking one.
"""

from __future__ import annotations

import json
import sys
from typing import Any, get_args


def _parser() -> Any:
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:  # vLLM 0.2x: the API server's parser; later: launchers
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    except ImportError:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser  # type: ignore[no-redef]
    return make_arg_parser(FlexibleArgumentParser())


def main() -> int:
    import vllm
    from vllm.model_executor.layers.quantization import QuantizationMethods

    booleans: set[str] = set()
    multi: set[str] = set()
    short: dict[str, str] = {}
    choices: dict[str, list[str]] = {}
    for action in _parser()._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs:
            continue
        name = longs[0][2:]
        if action.nargs == 0 and name != "help":
            booleans.update(o[2:] for o in longs if not o.startswith("--no-"))
        if action.nargs in ("+", "*"):
            multi.add(name)
        for o in action.option_strings:
            if not o.startswith("--"):
                short[o] = name
        if name in ("dtype", "kv-cache-dtype") and action.choices:
            choices[name] = sorted(str(c) for c in action.choices)
    out = {
        "vllm_version": vllm.__version__,
        "boolean_flags": sorted(booleans),
        "multi_value_flags": sorted(multi),
        "short_aliases": dict(sorted(short.items())),
        "choices": choices,
        "quantization_methods": sorted(get_args(QuantizationMethods)),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
