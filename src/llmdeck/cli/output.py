"""Output helpers: data to stdout (tables or --json), diagnostics to stderr."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from llmdeck.settings import Settings

JSON_OPTION = typer.Option(False, "--json", help="Print machine-readable JSON to stdout.")


def _control(ch: str) -> bool:
    code = ord(ch)
    return (code < 32 and ch not in "\n\t") or code == 127 or 0x80 <= code < 0xA0


def safe_text(text: str) -> str:
    """``text`` with control characters (ESC, CR, BEL, C1 ...) shown as ``\\xNN``: a string from a server
    or a file is printed as data and never drives the terminal (colours, titles, cursor moves)."""
    if not any(_control(ch) for ch in text):
        return text
    return "".join(f"\\x{ord(ch):02x}" if _control(ch) else ch for ch in text)


_CONSOLE: type[Console] | None = None


def _console_class() -> type[Console]:
    """rich's Console, with every string it renders (prints, table cells) passed through safe_text;
    rich's own styles are added after, so colours still work."""
    global _CONSOLE
    if _CONSOLE is None:
        from rich.console import Console
        from rich.text import Text

        class SafeConsole(Console):
            def render_str(self, text: str, **kwargs: Any) -> Text:
                return super().render_str(safe_text(text), **kwargs)

        _CONSOLE = SafeConsole
    return _CONSOLE


def err_console() -> Console:
    """A rich console on stderr, for progress and diagnostics."""
    return _console_class()(stderr=True)


def out_console() -> Console:
    """A rich console on stdout, for human-readable data (tables)."""
    return _console_class()(soft_wrap=True)


def to_jsonable(obj: Any) -> Any:
    """Turn pydantic models (or lists/dicts of them) into plain JSON data."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, list | tuple):
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    return obj


def print_json(obj: Any) -> None:
    """Write one JSON document to stdout, secrets redacted (llmdeck.util.redact)."""
    from llmdeck.util.redact import redact_data

    sys.stdout.write(json.dumps(redact_data(to_jsonable(obj)), indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


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
