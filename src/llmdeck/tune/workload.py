"""The tune's workloads as bench requests, at their target load.

* ``agent``: a coding agent's traffic (bench's ``agent-sessions``): chat sessions of ``num_turns``
  turns (4 by default) whose context grows turn by turn, every one opening with the same system
  prompt (``prefix_len`` tokens, 4096 by default), ``concurrency`` requests in flight: the prefix
  cache sees the shared prompt across sessions and each session's history across its turns.
* ``multi-user``: chat sessions of several turns whose context grows, no shared system prompt,
  ``concurrency`` at once.
* ``long-context``: few requests with long prompts (32k tokens by default).
* ``prompts``: the user's own prompts (a JSONL file, as `llmdeck bench --prompts`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from llmdeck.bench.request import BenchRequest, build_scenarios
from llmdeck.bench.result_schema import ScenarioSpec
from llmdeck.errors import UsageError
from llmdeck.tune.schema import LoadShape, TuneRequest, TuneWorkload

WORKLOADS: tuple[str, ...] = ("agent", "multi-user", "long-context")
_DEFAULTS: dict[str, dict[str, int]] = {
    "agent": {
        "concurrency": 16,
        "input_len": 512,
        "output_len": 256,
        "prefix_len": 4096,
        "num_turns": 4,
        "num_prompts": 64,
    },
    "multi-user": {"concurrency": 16, "input_len": 256, "output_len": 256, "num_turns": 4, "num_prompts": 64},
    "long-context": {"concurrency": 2, "input_len": 32768, "output_len": 256, "num_prompts": 8},
    "prompts": {"concurrency": 16, "input_len": 1, "output_len": 256, "num_prompts": 64},
}
_BENCH_WORKLOAD = {"agent": "agent-sessions", "multi-user": "multi-turn", "long-context": "random"}


def check_workload(name: str | None, prompts: Path | None) -> TuneWorkload:
    """--workload / --prompts -> the workload; exit 2 for an unknown name or neither/both given."""
    hint = "Give --workload agent, --workload multi-user or --workload long-context, or --prompts FILE.jsonl."
    if prompts is not None:
        if name is not None:
            raise UsageError("Give --workload or --prompts, not both.", hint=hint)
        from llmdeck.bench.workloads import read_prompt_rows

        read_prompt_rows(prompts)  # a bad file (or none) is refused now, not by every trial's bench
        return "prompts"
    if name is None:
        raise UsageError("Nothing to tune for: no --workload and no --prompts.", hint=hint)
    if name not in WORKLOADS:
        raise UsageError(f"--workload {name!r} is not a tune workload.", hint=hint)
    return name  # type: ignore[return-value]


def load_shape(workload: TuneWorkload, **given: int | None) -> LoadShape:
    """The workload's defaults with what the user gave (None = not given)."""
    values: dict[str, int] = dict(_DEFAULTS[workload])
    values.update({k: v for k, v in given.items() if v is not None})
    values.setdefault("warmup", min(values["concurrency"], 8))
    try:
        return LoadShape.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        flag = "--" + str(err["loc"][0]).replace("_", "-") if err.get("loc") else "the load"
        raise UsageError(
            f"Invalid load for the tune: {flag} {err.get('input')!r}: {err['msg']}.",
            hint="See `llmdeck tune --help`.",
        ) from exc


def bench_request(req: TuneRequest, base_url: str, tokenizer: str | None, seed: int = 0) -> BenchRequest:
    """The bench request of one trial (the same prompts for every trial: the seed is the tune's)."""
    ld = req.load
    workload = _BENCH_WORKLOAD.get(req.workload, "jsonl")
    return BenchRequest(
        target=base_url,
        model=req.base.effective_served_name,
        tokenizer=tokenizer,
        workload=workload,
        prompts=req.prompts,
        input_len=ld.input_len,
        output_len=ld.output_len,
        prefix_len=ld.prefix_len,
        num_turns=ld.num_turns,
        num_prompts=ld.num_prompts,
        max_concurrencies=[ld.concurrency],
        warmup=ld.warmup,
        seed=req.seed + seed,
        repeat=ld.repeat,
        temperature=0.0,
    )


def scenarios_of(req: TuneRequest, base_url: str, tokenizer: str | None) -> list[ScenarioSpec]:
    return build_scenarios(bench_request(req, base_url, tokenizer))


def needed_model_len(req: TuneRequest, model_limit: int | None) -> int | None:
    """--max-model-len only as long as the workload needs (rounded up to 256), None for a prompt file
    (its lengths are the file's). Exit 2 when the workload needs more than the model has."""
    if req.workload == "prompts":
        return None
    spec = scenarios_of(req, "http://127.0.0.1:1", None)[0]
    need = -(-spec.max_context // 256) * 256
    if model_limit is not None and spec.max_context > model_limit:
        raise UsageError(
            f"The {req.workload} workload needs {spec.max_context} tokens of context but the model "
            f"takes at most {model_limit}.",
            hint="Shorten it (--input-len, --output-len, --prefix-len) or pick a model with a longer "
            "context.",
        )
    return min(need, model_limit) if model_limit is not None else need
