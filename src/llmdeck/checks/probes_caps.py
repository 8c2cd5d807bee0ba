"""A server-side cap on reply length, judged against the output the client asks for.

vLLM takes the smaller of a request's ``max_tokens`` and the generation config's
``max_new_tokens`` (``--override-generation-config '{"max_new_tokens": 48}'``, or the model's own
generation_config.json): a client that asks for 4096 then gets 48 tokens and ``finish_reason:
length``, and fails ("reached the maximum output token limit"). The probe asks for more than the
cap could allow, with ``ignore_eos`` so the model cannot stop early on its own, and reads where the
reply stopped.
"""

from __future__ import annotations

from llmdeck.checks.probe_base import Outcome, ProbeContext, _finish
from llmdeck.checks.traffic import Recording, output_limit

PROBE_TOKENS = 512  # asked for; a cap below it shows as a shorter reply that stops with "length"


def needed_output(ctx: ProbeContext, rec: Recording) -> tuple[int, str]:
    """The reply length the client may ask for: its recorded max_tokens, else what connect writes."""
    if rec.max_tokens:
        return rec.max_tokens, f"{rec.label} sends max_tokens {rec.max_tokens}"
    out = output_limit(ctx.facts.max_model_len)
    return out, f"{rec.label} sends no max_tokens; llmdeck connect gives it an output limit of {out}"


def probe_client_output_cap(ctx: ProbeContext, rec: Recording) -> Outcome:
    need, why = needed_output(ctx, rec)
    room = (ctx.facts.max_model_len or PROBE_TOKENS + 64) - 64
    ask = max(16, min(need, PROBE_TOKENS, room))
    body = ctx.chat_body(
        [{"role": "user", "content": "Count from 1 to 1000."}],
        max_tokens=ask,
        ignore_eos=True,
        chat_template_kwargs=ctx.no_thinking(),
    )
    reply = ctx.post("/v1/chat/completions", body)
    if not reply.ok:
        how = "the cap is judged through chat completions with ignore_eos"
        return Outcome("inconclusive", f"HTTP {reply.status_code}: {reply.error_message()} ({how}).")
    usage = reply.data.get("usage") if isinstance(reply.data, dict) else None
    got = usage.get("completion_tokens") if isinstance(usage, dict) else None
    if not isinstance(got, int):
        return Outcome("inconclusive", "The reply carries no usage.completion_tokens.")
    data = {"asked": ask, "got": got, "client_needs": need}
    if got >= ask:
        return Outcome(
            "pass", f"No cap below {ask} tokens: a reply ran to the {ask} asked ({why}).", data=data
        )
    if _finish(reply) != "length":
        return Outcome(
            "inconclusive",
            f"The reply stopped at {got} of {ask} tokens (finish_reason "
            f"{_finish(reply)}) despite ignore_eos.",
            data=data,
        )
    return Outcome(
        "fail",
        f"The server caps replies at {got} tokens (asked {ask}, ignore_eos, finish_reason length): {why}, "
        f"so its replies are cut and it fails ('reached the maximum output token limit').",
        fix=f"Restart the server without the max_new_tokens cap (--override-generation-config "
        f"'{{\"max_new_tokens\": {need}}}' or drop it; a model's generation_config.json can set it too).",
        data={**data, "cap": got},
    )
