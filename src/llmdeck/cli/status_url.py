"""`llmdeck status`'s rendering: the servers' table, and what any server at a URL answers (exit 1 unless
it is ready)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from llmdeck.cli.output import err_console, out_console, print_json

if TYPE_CHECKING:
    from llmdeck.settings import Settings

_WORDS = {
    "unhealthy": "unhealthy",
    "needs_api_key": "asking for an API key",
    "not_openai": "not an OpenAI-compatible server",
    "not_answering": "not answering",
    "unreachable": "unreachable",
}
_URL_HINTS = {
    "unhealthy": "It is up but not healthy; read its log.",
    "needs_api_key": "It needs an API key: pass it with LLMDECK_API_KEY.",
    "not_openai": "Check the URL: it should point at an OpenAI-compatible server (e.g. vLLM).",
    "not_answering": "Check that it finished loading and is not stuck, or raise --timeout.",
    "unreachable": "Check the host and port; start a server with `llmdeck up --model DIR`.",
}


def status_of_url(url: str, settings: Settings, as_json: bool, timeout: float) -> None:
    from llmdeck.errors import OperationError
    from llmdeck.runtime.urlstatus import url_status
    from llmdeck.util.net import normalize_base_url

    st = url_status(normalize_base_url(url), api_key=settings.api_key, limit=timeout)
    if as_json:
        print_json(st)
    else:
        models = ", ".join(st.models) or "-"
        out_console().print(f"{st.base_url}: {st.state} ({st.detail}); models: {models}", markup=False)
    if st.state != "ready":
        raise OperationError(f"{st.base_url} is {_WORDS[st.state]}: {st.detail}.", hint=_URL_HINTS[st.state])


def print_records(statuses: list[Any], as_json: bool) -> None:
    if as_json:
        print_json(statuses)
        return
    if not statuses:
        return
    from rich.table import Table

    table = Table(title="llmdeck servers")
    for col in ("name", "state", "engine", "model", "url", "pid", "uptime", "run", "wait", "KV"):
        table.add_column(col)
    for st in statuses:
        m = st.metrics or {}
        uptime = f"{st.uptime_s / 60:.1f} min" if st.uptime_s is not None else "-"
        kv = f"{m['kv_usage'] * 100:.1f}%" if "kv_usage" in m else "-"
        table.add_row(
            st.name,
            st.state,
            st.engine,
            st.served_model_name,
            st.base_url,
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
            err_console().print(
                f"[red]{escape(st.name)} is dead[/]; last lines of {escape(str(st.log_path))}:"
            )
            from llmdeck.util.redact import redact_text

            err_console().print(redact_text(st.log_tail), markup=False, highlight=False)
