"""YAML from users (catalogs) parsed with limits: no anchors or aliases, bounded size and depth, no key
given twice in one mapping (``UniqueKeyLoader``, the gateway config's loader too).

``yaml.safe_load`` builds no objects from tags, but it still expands aliases: a "billion laughs"
file of a few hundred bytes becomes billions of nodes as soon as anything walks it, and a deeply
nested one exhausts the stack. Catalog files need neither, so both are refused before any of that.
"""

from __future__ import annotations

from typing import Any

import yaml

from llmdeck.errors import ConfigError

MAX_BYTES = 1 << 20
MAX_DEPTH = 32


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently: a
    second ``routes:`` replaced the first, a typo'd copy of a block won without a word)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {key_node.value!r} is given twice in one mapping (lines {seen[key_node.value]} "
                    f"and {line}); keep one",
                    key_node.start_mark,
                )
            seen[key_node.value] = line
        return super().construct_mapping(node, deep)


class _LimitedLoader(UniqueKeyLoader):
    """SafeLoader that refuses anchors/aliases and nesting deeper than MAX_DEPTH."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.YAMLError(f"anchors and aliases (&name, *name) are not allowed{_where(event)}")
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise yaml.YAMLError(f"nesting deeper than {MAX_DEPTH} levels{_where(event)}")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _where(event: Any) -> str:
    mark = getattr(event, "start_mark", None)
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def load_limited(text: str | bytes, source: str, *, max_bytes: int = MAX_BYTES) -> Any:
    """Parse ``text`` (from ``source``, named in errors); ConfigError (exit 2) when over the limits,
    not YAML, or not text."""
    size = len(text.encode("utf-8") if isinstance(text, str) else text)
    hint = "A catalog is plain YAML (a `models:` list) under 1 MiB, without anchors or aliases."
    if size > max_bytes:
        raise ConfigError(f"{source} is {size} bytes, over the {max_bytes}-byte limit.", hint=hint)
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{source} is not a UTF-8 text file ({exc.reason}).", hint=hint) from exc
    try:
        return yaml.load(text, Loader=_LimitedLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:  # the file's line, not PyYAML's "<unicode string>" excerpt
        mark = exc.problem_mark or exc.context_mark
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{source} is not acceptable YAML{line}: {exc.problem or exc.context}.", hint=hint
        ) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source} is not acceptable YAML: {exc}.", hint=hint) from exc
    except RecursionError as exc:  # pragma: no cover - MAX_DEPTH stops it first
        raise ConfigError(f"{source} is nested too deeply.", hint=hint) from exc
    except ValueError as exc:  # a value PyYAML's constructors cannot build (no YAMLError)
        raise ConfigError(
            f"{source} is not acceptable YAML: it holds {unreadable_value(exc)}.", hint=hint
        ) from exc


def unreadable_value(exc: ValueError) -> str:
    """What a scalar PyYAML resolves but cannot build is, in words: an int of more than 4,300 digits
    (Python's cap on int(), which names sys.set_int_max_str_digits), a date that is none (2024-13-45)."""
    if "integer string conversion" in str(exc):
        return "a whole number of more than 4,300 digits"
    return f"a value that cannot be read ({exc}; quote it if it is text)"
