"""Output helpers: data to stdout (tables or --json), diagnostics to stderr."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import typer

from llmdeck.util.safetext import is_unsafe, markup_data
from llmdeck.util.safetext import safe_text as safe_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.segment import Segment
    from rich.text import Text

    from llmdeck.settings import Settings

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON to stdout.")


# llmdeck's own markup: styles built from these words, and closing tags. Any other tag in a string a
# console renders ([link=...], [reverse], [@click] ...) is escaped before rich parses it, so data that
# reached a markup string unescaped still cannot add a hyperlink or restyle the terminal.
_STYLE_WORDS = frozenset(
    {"bold", "dim", "italic", "underline", "strike", "not", "on", "b", "i", "u", "s"}
    | {"red", "green", "yellow", "blue", "magenta", "cyan", "white", "black"}
)
_TAG = re.compile(r"(\\*)\[([a-z#/@][^\[]*?)\]")


def esc(value: object) -> str:
    """``value`` (a model id, a URL, an error from a server) ready to go into a markup string."""
    return markup_data(value)


def _own_tag(tag: str) -> bool:
    words = tag.removeprefix("/").split()
    return tag == "/" or (bool(words) and all(w in _STYLE_WORDS for w in words))


def neutralize_markup(text: str) -> str:
    """``text`` with every tag that is not llmdeck's own styling escaped (see ``_STYLE_WORDS``)."""

    def fix(m: re.Match[str]) -> str:
        slashes, tag = m.group(1), m.group(2)
        if len(slashes) % 2 or _own_tag(tag):
            return m.group(0)
        return f"{slashes}\\[{tag}]"

    return _TAG.sub(fix, text)


_CONSOLE: type[Console] | None = None


def _console_class() -> type[Console]:
    """rich's Console, made safe for data: every string it renders (prints, titles, table cells) passes
    through safe_text, tags that are not llmdeck's styling are escaped, markup that does not parse is
    printed as plain text (never a crash), and text inside any renderable (``Text`` cells, progress
    columns) has its control characters shown too. rich's own styles are added after, so colours work."""
    global _CONSOLE
    if _CONSOLE is None:
        from rich.console import Console
        from rich.errors import MarkupError
        from rich.segment import Segment

        class SafeConsole(Console):
            def render_str(self, text: str, **kwargs: Any) -> Text:
                text = safe_text(text)
                if kwargs.get("markup") is False or (kwargs.get("markup") is None and not self._markup):
                    return super().render_str(text, **kwargs)
                try:
                    return super().render_str(neutralize_markup(text), **kwargs)
                except MarkupError:
                    return super().render_str(text, **{**kwargs, "markup": False})

            def print(self, *objects: Any, **kwargs: Any) -> None:
                from llmdeck.cli.narrow import fit_to_width

                super().print(*(fit_to_width(self, o) for o in objects), **kwargs)

            def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
                for seg in super().render(renderable, options):
                    if seg.control is None and any(is_unsafe(ch) for ch in seg.text):
                        yield Segment(safe_text(seg.text), seg.style)
                    else:
                        yield seg

        _CONSOLE = SafeConsole
    return _CONSOLE


def err_console() -> Console:
    """A rich console on stderr, for progress and diagnostics. Never wrapped, as stdout's: the commands
    a note or hint says to run (``VLLM_API_KEY=... llmdeck up --spec FILE``) had been split across lines
    at 80 columns when stderr was not a terminal, so a pasted one broke."""
    return _console_class()(stderr=True, soft_wrap=True)


def out_console() -> Console:
    """A rich console on stdout, for human-readable data (tables)."""
    return _console_class()(soft_wrap=True)


def to_jsonable(obj: Any) -> Any:
    """Turn pydantic models (or lists/dicts of them) into plain JSON data, each field under its
    alias: the name the model reads and writes in files (netcheck's rows: ``schema``, not ``schema_``)."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", by_alias=True)
    if isinstance(obj, list | tuple):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    return obj


def finite(obj: Any) -> Any:
    """JSON-like data with NaN and ±inf (a server's /metrics may say NaN) as None: standard JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(x) for x in obj]
    return obj


# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal acts on: DEL, C1, bidi controls;
# and lone surrogates (a path's bytes that are not UTF-8: `$'caf\xe9'`), which stdout cannot encode
# (an internal error, or invalid UTF-8 in the document): written as \udcXX, as json.loads reads back.
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


_JSON_WRITTEN: list[bool] = []  # one entry once this process has written a JSON document to stdout


def json_written(*, reset: bool = False) -> bool:
    """Whether a JSON document went to stdout in this run (``reset``: a new run starts)."""
    if reset:
        _JSON_WRITTEN.clear()
    return bool(_JSON_WRITTEN)


def print_json(obj: Any, *, shown_once: str | None = None) -> None:
    """Write one standard JSON document to stdout (NaN/inf as null), secrets redacted
    (llmdeck.util.redact), no character raw that could drive the terminal. ``shown_once`` names the one
    top-level field left as it is: the secret a command prints once because nothing else keeps it
    (``keys create --json``)."""
    from llmdeck.util.redact import redact_data

    data = to_jsonable(obj)
    kept = data.pop(shown_once) if shown_once and isinstance(data, dict) and shown_once in data else None
    data = redact_data(data)
    if kept is not None:
        data[shown_once] = kept
    from llmdeck.cli.streams import writes_unicode

    # a stdout that cannot encode "×" (PYTHONIOENCODING=ascii) gets it as \u00d7: the same document
    text = json.dumps(finite(data), indent=2, ensure_ascii=not writes_unicode(sys.stdout), allow_nan=False)
    sys.stdout.write(_RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")
    sys.stdout.flush()
    _JSON_WRITTEN.append(True)


def log_text(text: str) -> str:
    """A server's log as data: secrets redacted (the same redactor as ``status``), control characters
    shown (``safe_text``), CRLF line ends kept as line ends."""
    from llmdeck.util.redact import redact_text

    return safe_text(redact_text(text.replace("\r\n", "\n")))


def info(message: str) -> None:
    """A diagnostic line on stderr."""
    err_console().print(message, highlight=False)


def get_settings(ctx: typer.Context) -> Settings:
    """The Settings built once by the root callback (imported lazily to keep --help instant)."""
    root = ctx.find_root()
    if root.obj is None:
        from llmdeck.settings import load_settings

        root.obj = load_settings()
    settings: Settings = root.obj
    return settings
