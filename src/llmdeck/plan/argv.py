"""Render a plan as commands: ``docker run``, ``vllm serve``, and the LaunchSpec ``llmdeck up`` consumes.

The ``docker run -d`` argv has exactly one implementation, :func:`llmdeck.engines.docker.up_argv`
(owned by the lifecycle engine: what `up --engine docker` runs); :func:`docker_argv` is the planner's
name for it.
"""

from __future__ import annotations

from llmdeck.engines.docker import DEFAULT_LOG_DRIVER, log_opts_for, up_argv
from llmdeck.engines.spec import LaunchSpec


def docker_argv(spec: LaunchSpec, *, log_driver: str | None = None) -> list[str]:
    """The ``docker run -d ...`` argv `up --engine docker` runs for ``spec`` on a daemon whose log
    driver is ``log_driver`` (docker's default, json-file, when None): with the options that bound
    docker's log of the container, as `up` passes them (pure). The printed command had lacked them:
    one copied ran with an unbounded json-file log."""
    return up_argv(spec, log_opts=log_opts_for(log_driver or DEFAULT_LOG_DRIVER))


def vllm_serve_argv(spec: LaunchSpec) -> list[str]:
    """The ``vllm serve MODEL ...`` argv for a venv that has vLLM (pure). No secret in it, as in the
    ``docker run`` line: ``--api-key X`` leaves for ``VLLM_API_KEY``, which vLLM reads itself (shown
    redacted, ``--api-key '<redacted>'`` had been pasted as a server whose key was ``<redacted>``)."""
    from llmdeck.engines.secrets import split_secrets

    spec = split_secrets(spec)[0]
    return [
        "vllm",
        "serve",
        spec.model,
        "--served-model-name",
        spec.effective_served_name,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        *spec.vllm_args,
    ]


def shell_join(argv: list[str], *, multiline: bool = True) -> str:
    """A copy-pasteable shell command; one flag per line when ``multiline``."""
    from llmdeck.util.shellquote import join, quote

    if not multiline:
        return join(argv)
    lines: list[str] = []
    current: list[str] = []
    for i, tok in enumerate(argv):
        flag_full = len(current) >= 2 and current[0].startswith("-")  # a flag already has its value
        if current and i > 1 and (tok.startswith("-") or flag_full):
            lines.append(" ".join(quote(t) for t in current))
            current = []
        current.append(tok)
    if current:
        lines.append(" ".join(quote(t) for t in current))
    return " \\\n  ".join(lines)
