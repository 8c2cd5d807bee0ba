"""Dump the `vllm serve` command line an installed vLLM accepts: every long flag, its boolean flags,
the flags that take several values, short aliases, the choices llmdeck checks (``--dtype``,
``--kv-cache-dtype``) and ``--quantization``'s methods.

    python evidence/plan/vllm-cli/dump_cli.py > evidence/plan/vllm-cli/vllm-X.Y.Z.json

tests/unit/test_vllm_cli_tables.py holds llmdeck's tables (llmdeck/plan/vllm_cli.py) against every
committed dump, so a flag vLLM takes without a value is never read as taking one.
"""

from __future__ import annotations

import json
import sys
from typing import Any, get_args


def _parser() -> Any:
    import importlib

    from vllm.utils.argparse_utils import FlexibleArgumentParser

    # vLLM 0.2x: the API server's parser; 0.32: launchers; 0.34: entrypoints/common
    for where in ("openai.cli_args", "launchers.cli_args", "common.cli_args"):
        try:
            module = importlib.import_module(f"vllm.entrypoints.{where}")
        except ImportError:
            continue
        return module.make_arg_parser(FlexibleArgumentParser())
    raise SystemExit("no make_arg_parser in this vLLM's entrypoints")


def main() -> int:
    import vllm
    from vllm.model_executor.layers.quantization import QuantizationMethods

    booleans: set[str] = set()
    multi: set[str] = set()
    short: dict[str, str] = {}
    choices: dict[str, list[str]] = {}
    inverse: dict[str, str] = {}
    parser = _parser()
    # every spelling the parser takes (0.33's --no-enable-x lives only in negative_option_strings)
    every = {o[2:] for o in parser._option_string_actions if o.startswith("--")}
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs:
            continue
        name = longs[0][2:]
        if action.nargs == 0 and name != "help":
            booleans.update(o[2:] for o in longs if not o.startswith("--no-"))
        # 0.34's EnableDisableAction: --disable-x sets --enable-x's dest to False (and the reverse)
        for neg in getattr(action, "negative_option_strings", ()):
            if not neg.startswith("--no-") and neg in longs:
                inverse[neg[2:]] = name
        if action.nargs in ("+", "*"):
            multi.add(name)
        for o in action.option_strings:
            if not o.startswith("--"):
                short[o] = name
        if name in ("dtype", "kv-cache-dtype") and action.choices:
            choices[name] = sorted(str(c) for c in action.choices)
    if "kv-cache-dtype" not in choices:  # 0.34: no argparse choices, CacheConfig validates the name
        from vllm.config import cache

        choices["kv-cache-dtype"] = sorted(getattr(cache, "KV_CACHE_DTYPES", get_args(cache.CacheDType)))
    out = {
        "vllm_version": vllm.__version__,
        "flags": sorted(every),
        "boolean_flags": sorted(booleans),
        "multi_value_flags": sorted(multi),
        "short_aliases": dict(sorted(short.items())),
        "choices": choices,
        "quantization_methods": sorted(get_args(QuantizationMethods)),
        **({"inverse_flags": dict(sorted(inverse.items()))} if inverse else {}),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
