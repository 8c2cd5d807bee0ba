"""Codex's config.toml merged with tomlkit: the user's other keys, tables, comments and order kept."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from llmdeck.connect.write import drop_key, read_text_file
from llmdeck.errors import ConfigError

_HINT = "Fix the file, or use --print and paste the keys yourself, or --file to write a separate file."


def read_toml(path: Path) -> Any:
    """The user's file as a tomlkit document (an empty one when there is none); ConfigError (exit 2)
    when it is not TOML."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    text = read_text_file(path)
    if text is None or not text.strip():
        return tomlkit.document()
    try:
        return tomlkit.parse(text)
    except (TOMLKitError, ValueError, RecursionError) as exc:
        raise ConfigError(
            f"{path} is not valid TOML ({exc}); llmdeck will not rewrite a file it cannot read.", hint=_HINT
        ) from exc


def _only_tables(value: dict[str, Any]) -> bool:
    return bool(value) and all(isinstance(v, dict) for v in value.values())


def _merge(target: MutableMapping[str, Any], update: dict[str, Any]) -> None:
    import tomlkit

    for key, value in update.items():
        if isinstance(value, dict):
            current = target.get(key)
            if not isinstance(current, MutableMapping):
                current = tomlkit.table(is_super_table=_only_tables(value))
                target[key] = current
                current = target[key]
            _merge(current, value)
        else:
            target[key] = value


def merged_toml(path: Path, block: dict[str, Any], drop: tuple[str, ...] = ()) -> str:
    """The text of ``path`` with ``block``'s keys laid over it (tables merged, values replaced), and the
    key at the path ``drop`` removed (an earlier server's token)."""
    import tomlkit

    doc = read_toml(path)
    _merge(doc, block)
    if drop:
        drop_key(doc, *drop)
    return tomlkit.dumps(doc)


def render_toml(block: dict[str, Any]) -> str:
    import tomlkit

    doc = tomlkit.document()
    _merge(doc, block)
    return tomlkit.dumps(doc)
