"""One exception tree: every exception class llmdeck defines derives from ``LlmdeckError``.

Every module of the package is imported (the evals' task folders are data, not modules; a module whose
optional dependency is missing here is skipped by name), then every ``Exception`` subclass defined in
llmdeck is checked. ``cli.app.Terminated`` is a ``KeyboardInterrupt`` (a ``BaseException``, SIGTERM
read as Ctrl-C), not an error, so it is not counted.
"""

from __future__ import annotations

import importlib
import json
import pkgutil

import pytest

import llmdeck
from llmdeck.errors import InternalError, LlmdeckError


def _import_all() -> tuple[list[str], list[str]]:
    """(imported module names, skipped ``name: missing dependency``)."""
    imported, skipped = [], []
    for info in pkgutil.walk_packages(llmdeck.__path__, "llmdeck."):
        if ".evals.tasks" in info.name or info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("llmdeck"):
                raise
            skipped.append(f"{info.name}: {exc.name}")
            continue
        imported.append(info.name)
    return imported, skipped


def _defined_exceptions() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    stack: list[type[BaseException]] = [Exception]
    seen: set[type[BaseException]] = set()
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub in seen:
                continue
            seen.add(sub)
            stack.append(sub)
            if sub.__module__.split(".")[0] == "llmdeck":
                found.append(sub)
    return found


def test_every_exception_llmdeck_defines_is_an_llmdeck_error() -> None:
    imported, skipped = _import_all()
    assert len(imported) > 200, (len(imported), skipped)  # the walk really saw the package
    classes = _defined_exceptions()
    assert len(classes) > 40
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, LlmdeckError))
    assert outside == [], f"exceptions outside LlmdeckError: {outside}"


def test_stdlib_bases_still_catch_what_they_caught() -> None:
    """Callers catch these by their stdlib class; constructing them works as the stdlib's does."""
    import errno

    from llmdeck.util.gz import InflateError
    from llmdeck.util.jsonsafe import TooDeepError, loads
    from llmdeck.util.localfile import NotRegularFileError

    with pytest.raises(json.JSONDecodeError) as deep:
        loads("[" * 100_000)
    assert isinstance(deep.value, TooDeepError) and isinstance(deep.value, ValueError)
    assert deep.value.msg == "the JSON is nested too deep to read" and deep.value.lineno == 1
    with pytest.raises(json.JSONDecodeError) as long:  # Python's bare ValueError names sys.set_int_...
        loads('{"n": ' + "9" * 5000 + "}")
    assert "4,300 digits" in long.value.msg and "sys." not in str(long.value)
    fifo = NotRegularFileError(errno.EINVAL, "it is a named pipe (FIFO), not a regular file", "/x")
    assert (
        isinstance(fifo, OSError) and fifo.strerror.startswith("it is a named pipe") and fifo.filename == "/x"
    )
    assert isinstance(InflateError("cut short"), ValueError)


def test_internal_errors_reaching_the_cli_are_reported_as_bugs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An InternalError is for a caller inside llmdeck; escaping to the CLI it reads as any other bug."""
    from llmdeck.cli import app as cli_app
    from llmdeck.util.http import NotAnswering

    def boom(*_: object, **__: object) -> None:
        raise NotAnswering("http://127.0.0.1:9/health")

    monkeypatch.delenv("LLMDECK_DEBUG", raising=False)
    monkeypatch.setattr(cli_app, "build_app", lambda: boom)
    with pytest.raises(SystemExit) as done:
        cli_app.main(["status"])
    err = capsys.readouterr().err
    assert done.value.code == 1
    assert "internal error: NotAnswering: http://127.0.0.1:9/health" in err and "bug" in err
    assert NotAnswering("u").render() == "NotAnswering: u" and issubclass(NotAnswering, InternalError)


def test_a_broken_reply_that_reaches_the_cli_is_said_in_words() -> None:
    """An httpx error that reached the CLI unmapped had read "(RemoteProtocolError: )": its class name and
    an empty message; now its kind in words."""
    import httpx

    from llmdeck.cli.failures import known_failure

    err = known_failure(httpx.RemoteProtocolError(""))
    assert err.message == (
        "The reply broke off or never finished (the server closed the connection or broke the HTTP exchange)."
    )
