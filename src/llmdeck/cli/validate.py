"""Option checks shared by the commands: finite numbers, hosts, and forwarding only what follows ``--``.

A bad value is a click ``BadParameter`` (exit 2, "Invalid value for '--timeout': ..."): the message
names the option because click adds it. Typer's ``min=``/``max=`` let ``inf`` and ``nan`` through
(``nan < 0`` is false), so every float option goes through :func:`number` instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand


def _shown(bound: float) -> str:
    """A bound as a person writes it: 2592000, not 2.592e+06."""
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e15 else f"{bound:g}"


def number(
    *, above: float | None = None, at_least: float | None = None, at_most: float | None = None
) -> Callable[[float | None], float | None]:
    """A typer callback: the value must be a finite number in the given bounds (None = not given)."""
    bounds = []
    if above is not None:
        bounds.append(f"above {_shown(above)}")
    if at_least is not None:
        bounds.append(f"at least {_shown(at_least)}")
    if at_most is not None:
        bounds.append(f"at most {_shown(at_most)}")
    wanted = "a finite number" + (" " + " and ".join(bounds) if bounds else "")

    def check(value: float | None) -> float | None:
        if value is None:
            return None
        bad = (
            not math.isfinite(value)
            or (above is not None and value <= above)
            or (at_least is not None and value < at_least)
            or (at_most is not None and value > at_most)
        )
        if bad:
            raise typer.BadParameter(f"{value:g} is not allowed; give {wanted}.")
        return value

    return check


MAX_SECONDS = 30 * 86400.0
"""The longest wait any flag may ask for (30 days): 1e300 s overflowed the socket and clock calls
(an internal error), and no wait of llmdeck's is meant to last longer."""


def positive_seconds(value: float | None) -> float | None:
    """Timeouts, deadlines and intervals: finite seconds above 0, at most :data:`MAX_SECONDS`."""
    return number(above=0, at_most=MAX_SECONDS)(value)


def host(value: str | None) -> str | None:
    """An IP address or host name (not a URL, no spaces)."""
    from llmdeck.util.net import HOST_ACCEPTED, bare_host, is_valid_host

    if value is not None and not is_valid_host(value):
        raise typer.BadParameter(f"{value!r} is not a host; use {HOST_ACCEPTED}.")
    return None if value is None else bare_host(value)


def not_utf8(value: str) -> bool:
    """Whether ``value`` holds bytes that are no UTF-8 (Python keeps them as lone surrogates, e.g. from
    ``$'\\xff'`` or a Latin-1 terminal): fine as a path to open, but no text llmdeck can store."""
    return any("\ud800" <= ch <= "\udfff" for ch in value)


_NOT_UTF8 = "holds bytes that are not UTF-8 text, which llmdeck cannot store; type it again in UTF-8"


def utf8_text(value: str | None) -> str | None:
    """A typer callback for a value llmdeck stores (a key's --models, ...): UTF-8 text, or exit 2."""
    if value is not None and not_utf8(value):
        raise typer.BadParameter(f"{value!r} {_NOT_UTF8}.")
    return value


def nonempty(value: str | None) -> str | None:
    """A typer callback: a value given empty (``''``, spaces, a newline) is refused, where it had been
    taken as "not given" and the default used in silence (check '' asked the default server)."""
    if value is not None and not value.strip():
        raise typer.BadParameter("an empty value is not allowed; give one, or leave it out for the default.")
    return value


def image_name(value: str | None) -> str | None:
    """A typer callback: ``--image`` as a launch spec takes it (``plan`` refused 'bad image;rm' that
    ``doctor`` had judged as an image)."""
    from llmdeck.engines.spec import ImageName

    value = nonempty(value)
    if value is None:
        return None
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(ImageName).validate_python(value)
    except ValidationError as exc:
        raise typer.BadParameter(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from exc


def api_key(value: str | None) -> str | None:
    """An API key that an HTTP header can carry; the message never quotes it."""
    from llmdeck.util.redact import api_key_problem

    why = api_key_problem(value) if value else None
    if why:
        raise typer.BadParameter(f"the key cannot be sent: {why}. Pass the key exactly as the server has it.")
    return value


def api_key_option(help_: str = "API key (default: LLMDECK_API_KEY).") -> Any:
    """``--api-key``, its value checked by :func:`api_key` (a key no header can carry is exit 2)."""
    return typer.Option(None, "--api-key", callback=api_key, help=help_, envvar=None)


def _usage_error() -> Any:
    """click's UsageError class (typer >= 0.2x vendors click as typer._click)."""
    try:
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click.exceptions import UsageError  # type: ignore[assignment,unused-ignore]
    return UsageError


class ForwardingCommand(TyperCommand):
    """A command whose extra arguments are exactly those after ``--`` (they go to ``vllm serve``).

    Every option before ``--`` is llmdeck's: an unknown one is a usage error with click's closest
    suggestion ("No such option: --contxt Did you mean --context?"), not a flag passed on to vLLM.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if "--" in args:
            cut = args.index("--")
            own, forwarded = args[:cut], args[cut + 1 :]
        else:
            own, forwarded = args, []
        rest = super().parse_args(ctx, own)
        if ctx.args:
            raise _usage_error()(
                f"Unexpected argument {ctx.args[0]!r}. Flags for vLLM go after `--`, "
                "e.g. `-- --max-model-len 8192`.",
                ctx=ctx,
            )
        bad = next((arg for arg in forwarded if not_utf8(arg)), None)
        if bad is not None:  # they are stored with the server's spec (JSON): an internal error there
            raise _usage_error()(f"The argument {bad!r} after `--` {_NOT_UTF8}.", ctx=ctx)
        ctx.args = list(forwarded)
        return rest
