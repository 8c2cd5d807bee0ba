"""A server's flags changed for a restart: ``llmdeck restart NAME -- --max-model-len 32768``.

The hints that tell the user to restart a server with another flag (connect, check, bench, eval) had no
command that did it: ``restart`` started the recorded spec again, as it was. :func:`changed_spec` is the
recorded spec with the given vLLM flags in place of the same flags recorded (the others kept as the user
spelled them); ``--port``, ``--host``, ``--served-model-name`` and ``--model`` set the spec's fields,
as they do after ``up``'s ``--``.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmdeck.engines.spec import LaunchSpec, build_spec, fold_spec_flags
from llmdeck.plan.flags import VllmFlags, _take, parse_vllm_flags


def _groups(args: list[str]) -> list[tuple[set[str], list[str]]]:
    """Each flag of ``args`` with the tokens it takes: ({its names}, tokens)."""
    groups, i = [], 0
    while i < len(args):
        probe = VllmFlags()
        used = _take(probe, args, i)
        groups.append((set(probe.values), args[i : i + used]))
        i += used
    return groups


def without_flags(base: Sequence[str], changes: Sequence[str]) -> list[str]:
    """``base`` without the flags ``changes`` sets, in any spelling (``--x v``, ``--x=v``, ``--no-x``).
    UsageError (exit 2) for a change that is not a vLLM flag with its value."""
    changed = set(parse_vllm_flags(list(changes)).values)
    return [tok for names, toks in _groups(list(base)) if not names & changed for tok in toks]


def changed_spec(spec: LaunchSpec, changes: Sequence[str]) -> LaunchSpec:
    """``spec`` with ``changes`` (vLLM flags, as after ``--``) in place of the same flags; validated as
    ``up`` validates a spec (exit 2 naming the flag)."""
    from llmdeck.util.redact import SECRET_FLAGS, secret_flag

    extra, fields = fold_spec_flags(list(changes), {})
    # a new --api-key replaces the recorded key (held in the environment since the first start)
    given = {
        SECRET_FLAGS[w] for tok in extra if tok.startswith("--") and (w := secret_flag(tok.split("=")[0]))
    }
    env = {k: v for k, v in spec.env.items() if k not in given}
    base = spec.model_copy(update={"vllm_args": without_flags(spec.vllm_args, extra), "env": env})
    return build_spec(base, overrides=fields, extra_args=extra, defaults={})
