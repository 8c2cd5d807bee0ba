"""`llmdeck status URL`: print what any server at a URL answers (exit 1 unless it is ready)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmdeck.cli.output import out_console, print_json

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
