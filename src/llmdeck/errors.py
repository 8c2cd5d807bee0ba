"""The one exception tree of llmdeck.

Every error a user can cause or meet derives from :class:`LlmdeckError`. Each carries a
one-paragraph ``message`` (what is wrong) and an optional ``hint`` (what to do), and an
``exit_code``: 2 for bad usage or input, 1 for a failed check or operation. The CLI maps
them to output in exactly one place (``llmdeck.cli.app.main``).

:class:`InternalError` is the third branch: raised by one part of llmdeck for a caller to catch and put
in its own words (a peer that does not answer, a file that is a pipe, NVML that does not start, a
scenario whose server went away). Some also derive from the stdlib class their callers catch
(``ValueError``, ``OSError``, ``json.JSONDecodeError``). One that reaches the CLI is a bug, shown as
an internal error, as any other exception would be.
"""

from __future__ import annotations


class LlmdeckError(Exception):
    """Root of every llmdeck error."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        text = self.message.rstrip()
        if self.hint:
            text += " " + self.hint.strip()
        return text


# ---- exit code 2: the user asked for something wrong -------------------------------------


class UsageError(LlmdeckError):
    """Bad usage or input: a flag, a path, a config file, a port, a URL, a result file."""

    exit_code = 2


class ModelPathError(UsageError):
    """A model directory is missing or is not a model (no config.json, broken config)."""


class ConfigError(UsageError):
    """A config.json, catalog, spec or settings file cannot be read or is invalid."""


class PortInUseError(UsageError):
    """The requested port is taken by another process."""


class NotRunningError(UsageError):
    """A named server is not known or not running."""


class AlreadyExistsError(UsageError):
    """Something would be overwritten without --force."""


class UnknownModelError(UsageError):
    """A model name that no catalog knows."""


class PlanError(UsageError):
    """The request cannot be planned (e.g. a context beyond memory)."""


class ResultFileError(UsageError):
    """A result file is missing, not JSON, or of an unknown schema."""


class MissingDependencyError(UsageError):
    """An optional extra (e.g. the CPU engine) is not installed."""


# ---- exit code 1: an operation or a check failed ------------------------------------------


class OperationError(LlmdeckError):
    """An operation failed: the server did not come up, a download broke, ..."""

    exit_code = 1


class ServerStartError(OperationError):
    """The engine process exited or stalled before it was ready."""

    def __init__(
        self, message: str, *, hint: str | None = None, log_tail: str = "", causes: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, hint=hint)
        self.log_tail = log_tail
        self.causes = (
            causes  # the ids of the known failures its log matched (runtime/data/vllm_failures.yaml)
        )


class StartStopped(ServerStartError):
    """A start stopped on request before the server was ready (the dashboard's stop of a starting model)."""


class EndpointError(OperationError):
    """An HTTP endpoint did not answer as expected (connection refused, HTTP error, bad stream)."""


class CheckFailedError(OperationError):
    """A check the user asked for failed (the report has been printed already)."""


class DownloadError(OperationError):
    """A model download failed (network, hub outage) or the downloaded files did not verify."""


# ---- raised and caught inside llmdeck -----------------------------------------------------


class InternalError(LlmdeckError):
    """Raised for a caller inside llmdeck to catch and turn into its own message; never shown as is.

    Its :meth:`render` names the class (``NotAnswering: http://...``), as an unexpected exception
    is shown, and the CLI reports one that escapes as an internal error (exit 1)."""

    exit_code = 1

    def render(self) -> str:
        return f"{type(self).__name__}: {self}"
