"""`llmdeck status`'s rendering: the servers' table, and what any server at a URL answers (exit 1 unless
it is ready)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmdeck.cli.output import err_console, esc, log_text, out_console, print_json

if TYPE_CHECKING:
    from llmdeck.settings import Settings

_WORDS = {
    "unhealthy": "unhealthy",
    "needs_api_key": "asking for an API key",
    "not_openai": "not an OpenAI-compatible server",
    "bad_reply": "answering with an impossible value",
    "not_answering": "not answering",
    "unreachable": "unreachable",
}
_URL_HINTS = {
    "unhealthy": "It is up but not healthy; read its log.",
    "needs_api_key": "It needs an API key: pass it with LLMDECK_API_KEY.",
    "not_openai": "Check the URL: it should point at an OpenAI-compatible server (e.g. vLLM).",
    "bad_reply": "Check the server's flags (vLLM reports its --max-model-len in /v1/models) and any proxy "
    "in front of it.",
    "not_answering": "Check that it finished loading and is not stuck, or raise --timeout.",
    "unreachable": "Check the host and port; start a server with `llmdeck up --model DIR`.",
}
_REJECTED_HINT = "Set LLMDECK_API_KEY to the key the server was started with (its --api-key / VLLM_API_KEY)."


def status_of_url(url: str, settings: Settings, as_json: bool, timeout: float) -> None:
    from llmdeck.errors import OperationError
    from llmdeck.runtime.urlstatus import url_status
    from llmdeck.util.net import normalize_base_url
    from llmdeck.util.redact import redact_url

    st = url_status(normalize_base_url(url), api_key=settings.api_key, limit=timeout)
    shown = redact_url(st.base_url)
    if as_json:
        print_json(st)
    else:
        models = ", ".join(st.models) or "-"
        out_console().print(f"{shown}: {st.state} ({st.detail}); models: {models}", markup=False)
    if st.state == "needs_api_key" and settings.api_key:  # a key was sent: it is the wrong one
        raise OperationError(f"{shown} rejected the API key: {st.detail}.", hint=_REJECTED_HINT)
    if st.state != "ready":
        raise OperationError(f"{shown} is {_WORDS[st.state]}: {st.detail}.", hint=_URL_HINTS[st.state])


def print_records(statuses: list[Any], as_json: bool) -> None:
    if as_json:
        print_json(statuses)
        return
    if not statuses:
        return
    from rich.table import Table

    from llmdeck.util.redact import redact_url

    table = Table(title="llmdeck servers")
    for col in ("name", "state", "engine", "model", "url", "pid", "uptime", "run", "wait", "KV"):
        table.add_column(col)
    for st in statuses:
        m = st.metrics or {}
        uptime = f"{st.uptime_s / 60:.1f} min" if st.uptime_s is not None else "-"
        kv = f"{m['kv_usage'] * 100:.1f}%" if "kv_usage" in m else "-"
        table.add_row(
            esc(st.name),
            esc(st.state),
            esc(st.engine),
            esc(st.served_model_name),
            esc(redact_url(st.base_url)),
            str(st.pid or "-"),
            uptime,
            str(int(m["running"])) if "running" in m else "-",
            str(int(m["waiting"])) if "waiting" in m else "-",
            kv,
        )
    out_console().print(table)
    for st in statuses:
        if st.note:
            err_console().print(f"{st.name}: {st.note}", markup=False, highlight=False)
        if st.state == "dead" and st.log_tail:
            err_console().print(f"[red]{esc(st.name)} is dead[/]; last lines of {esc(st.log_path)}:")
            err_console().print(log_text(st.log_tail), markup=False, highlight=False)
