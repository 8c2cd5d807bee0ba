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
from llmdeck.checks.traffic import Recording, output_limit, replay_body

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


CAP_WORDS = ("cannot be greater than max_model_len", "maximum context length", "output tokens")


def probe_client_own_cap(ctx: ProbeContext, rec: Recording) -> Outcome:
    """The client's own request with the output it asks for when set up by hand (no ``llmdeck
    connect``/``launch``, which write its output limit): Claude Code asks ``max_tokens: 32000`` unless
    ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` is set, which a context of 32k or less refuses on every request
    (vLLM 0.32: "cannot be greater than max_model_len"; 0.22-0.31 count it against the context). Sent
    streamed and closed at its first event; a gateway that fits the cap passes (evidence/device/outcap)."""
    ask = rec.max_tokens
    if not ask:
        return Outcome("not_applicable", f"{rec.label} sends no max_tokens of its own.")
    body = replay_body(rec, ctx.facts.model or "", max_tokens=ask, stream=True)
    if rec.surface == "responses":
        body["max_output_tokens"] = body.pop("max_tokens")
    path = rec.agent.path + (f"?{rec.agent.query}" if rec.agent.query else "")
    reply = ctx.stream(path, body, first_only=True)
    if reply.ok:
        return Outcome("pass", f"The server takes {rec.label}'s own output ask ({ask} tokens).")
    message = reply.error_message()
    if not any(w in message for w in CAP_WORDS):
        return Outcome(
            "inconclusive", f"HTTP {reply.status_code}: {message[:300]} (client_request judges it)."
        )
    return Outcome(
        "warn",
        f"Set up by hand, {rec.label} asks {ask} output tokens, and this server refuses that on every "
        f"request (HTTP {reply.status_code}: {message[:300]}).",
        fix=f"Set {rec.client} up with `llmdeck connect {rec.client}` or `llmdeck launch {rec.client}` "
        "(they write its output limit), or serve it through `llmdeck gateway`, which fits the cap to the "
        "context.",
        data={"asked": ask, "status": reply.status_code},
    )
