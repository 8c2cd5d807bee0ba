"""The CLI's timeout options, defined once: one flag and one help wording per meaning.

Every command that bounds a wait in seconds declares it with a factory from here (the default passed in,
as each command's own), so that a flag name says one thing across the CLI:

- ``--timeout``: the limit for each request to a server (or Ollama, or the hub's API): check, connect,
  launch, status URL, migrate, fetch;
- ``--ready-timeout``: how long a start may take to become ready (up, restart, tune);
- ``--task-timeout``: the agent's wall time on each eval task;
- ``--step-timeout`` / ``--test-timeout``: the cluster commands' steps and the all-reduce test;
- ``--drain``: how long a stop waits for the server's running requests to finish (down, restart);
- ``--timeout-connect`` / ``--timeout-read`` / ``--timeout-total`` / ``--timeout-probe``: bench's and
  eval's bounds on a benchmark request and on the questions asked before a run.

Where a command used ``--timeout`` for another meaning before, ``--timeout`` stays its second name, so
existing scripts keep working. tests/unit/test_cli_options.py fails when a command declares a timeout
outside this module or with a help text that is not one of :data:`MEANINGS`. Nothing heavy is imported
here: every command module imports it for ``llmdeck --help``.
"""

from __future__ import annotations

from typing import Any

import typer

from llmdeck.cli.validate import MAX_SECONDS, number, positive_seconds

READY = "Limit (s) for a start to become ready"
REQUEST = "Limit (s) for each request to"
PROBE = "Limit (s) for each question to the server before the run"
CONNECT = "Limit (s) for opening each connection to the server"
READ = "Limit (s) for a silence in each stream"
TOTAL = "Limit (s) for each benchmark request as a whole"
TASK = "Limit (s) for the agent's wall time on each task"
STEP = "Limit (s) for each step"
TEST = "Limit (s) for the whole test"
DRAIN = "Limit (s) for the server's running requests to finish before it is stopped"

MEANINGS: dict[str, str] = {
    "ready": READY,
    "request": REQUEST,
    "probe": PROBE,
    "connect": CONNECT,
    "read": READ,
    "total": TOTAL,
    "task": TASK,
    "step": STEP,
    "test": TEST,
    "drain": DRAIN,
}
"""Every timeout option's help begins with one of these (a command may append its own detail)."""


def _help(meaning: str, detail: str) -> str:
    """The meaning's wording, then the command's detail as given (" (...)", ": ..."), then a full stop."""
    text = meaning + detail
    return text if text.endswith(".") else text + "."


_AT_LEAST_1_S = number(at_least=1, at_most=MAX_SECONDS)
_SECONDS_OR_0 = number(at_least=0, at_most=MAX_SECONDS)


def _seconds(default: float | None, names: tuple[str, ...], help_: str, **extra: Any) -> Any:
    return typer.Option(default, *names, callback=positive_seconds, help=help_, **extra)


def ready_timeout(default: float | None, detail: str = "", *, also_timeout: bool = True) -> Any:
    """``--ready-timeout`` (and ``--timeout``, its older name on up and restart): a start's limit."""
    names = ("--ready-timeout", "--timeout") if also_timeout else ("--ready-timeout",)
    return _seconds(default, names, _help(READY, detail))


def request_timeout(default: float, to: str = " the server", detail: str = "") -> Any:
    """``--timeout``: the limit for each request to ``to`` (" the server", " Ollama", ...)."""
    return _seconds(default, ("--timeout",), _help(REQUEST + to, detail))


def probe_timeout(default: float, detail: str = "") -> Any:
    """``--timeout-probe``: each question before a bench or eval run (/v1/models, ...)."""
    return _seconds(default, ("--timeout-probe",), _help(PROBE, detail))


def connect_timeout(default: float) -> Any:
    """``--timeout-connect``: opening a benchmark connection."""
    return _seconds(default, ("--timeout-connect",), _help(CONNECT, ""))


def read_timeout(default: float) -> Any:
    """``--timeout-read``: the longest silence in a benchmark stream."""
    return _seconds(default, ("--timeout-read",), _help(READ, ""))


def total_timeout(default: float, detail: str = "") -> Any:
    """``--timeout-total``: a benchmark request from start to end."""
    return _seconds(default, ("--timeout-total",), _help(TOTAL, detail))


def task_timeout(default: float | None, detail: str = "") -> Any:
    """``--task-timeout`` (and ``--timeout``, its older name): the agent's wall time on each eval task."""
    return _seconds(default, ("--task-timeout", "--timeout"), _help(TASK, detail))


def step_timeout(default: float, detail: str = "") -> Any:
    """``--step-timeout`` (and ``--timeout``, its older name): each step of a cluster command."""
    return typer.Option(
        default, "--step-timeout", "--timeout", callback=_AT_LEAST_1_S, help=_help(STEP, detail)
    )


def netcheck_timeout(default: float, detail: str = "") -> Any:
    """``--test-timeout`` (and ``--timeout``, its older name): the whole all-reduce test."""
    return typer.Option(
        default, "--test-timeout", "--timeout", callback=_AT_LEAST_1_S, help=_help(TEST, detail)
    )


def drain_timeout(default: float, detail: str) -> Any:
    """``--drain``: how long a stop waits for the server's running requests (0: it stops them now)."""
    return typer.Option(default, "--drain", callback=_SECONDS_OR_0, help=_help(DRAIN, detail))
