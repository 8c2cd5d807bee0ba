"""The gateway's config file (YAML), read in one place: a regular UTF-8 file of at most
``MAX_CONFIG_BYTES``, parsed once with every node's line kept (:class:`MarkedDocument`: the data and
the line of any location in it, for messages like ``gw.yaml:7: routes[0].backends: ...``), a mapping
at the top. Every failure is one :class:`ConfigError` naming the file and line (exit 2). What the
fields mean is ``gateway.config``'s.

The document is composed once (``yaml.compose`` keeps every node's start mark) and converted to plain
data from the nodes, so the data and the line map come from the same parse.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from llmdeck.errors import ConfigError
from llmdeck.util.localfile import read_regular_text
from llmdeck.util.safeyaml import UniqueKeyLoader, unreadable_value

MAX_CONFIG_BYTES = 16 << 20  # a gateway config is a few KB; more is not a config
MAX_VALUES = 100_000  # values once aliases are expanded: a config has hundreds; a "billion laughs" has 10^9
HELP = "(see `llmdeck gateway up --help`)"


def read_gateway_text(path: Path) -> str:
    """The text of the gateway config at ``path`` (a pipe or /dev/zero: refused, never waited on)."""
    try:
        return read_regular_text(path, MAX_CONFIG_BYTES)
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"The gateway config {path} is not a text file (not UTF-8: {exc.reason}).",
            hint=f"Give a YAML file with --config {HELP}.",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"Cannot read the gateway config {path} ({exc.strerror or exc}).",
            hint=f"Give an existing YAML file with --config {HELP}.",
        ) from exc


def parse_gateway_yaml(text: str, source: str) -> MarkedDocument:
    """The config's document; its data is a mapping (the fields are for the caller to validate)."""
    doc = MarkedDocument(text, source)
    if not isinstance(doc.data, dict):
        raise ConfigError(
            f"{doc.where(())}: the gateway config must be a mapping with a `routes:` list.",
            hint="Start from the example in `llmdeck gateway up --help`.",
        )
    return doc


class MarkedDocument:
    """A parsed YAML document, its data, and a way to find the line of any location in it."""

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
            self.data: Any = yaml.load(text, Loader=UniqueKeyLoader) if self.root is not None else None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f"{source}:{mark.line + 1}" if mark is not None else source
            raise ConfigError(
                f"{where}: not valid YAML ({exc.problem or exc.context}).",
                hint="Fix the YAML syntax at that line (indentation, a missing ':' or quote).",
            ) from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML ({exc}).", hint="Fix the YAML syntax.") from exc
        except ValueError as exc:  # `ttl_s: 2024-13-45` (a date that is none), an int of 5,000 digits
            raise ConfigError(
                f"{source}: not valid YAML (it holds {unreadable_value(exc)}).",
                hint="Fix that value (a number of seconds or GiB, or text in quotes).",
            ) from exc
        except RecursionError:  # PyYAML composes recursively: `routes: [[[[...` past the stack
            raise ConfigError(
                f"{source}: the YAML nests too deeply (lists or mappings inside each other) to read.",
                hint="Fix the file: a gateway config nests a few levels (routes, backends, defaults).",
            ) from None

        if _more_values_than(self.data, MAX_VALUES):  # each request's body would carry them (merge.py)
            raise ConfigError(
                f"{source}: the YAML expands to more than {MAX_VALUES:,} values (aliases inside aliases: "
                "*name of an &name that holds more *names).",
                hint="Write the values out, or nest fewer aliases: a gateway config holds a few hundred.",
            )

    def line_of(self, loc: Sequence[str | int]) -> int:
        """The 1-based line of the deepest node on ``loc`` that exists (missing keys: their parent)."""
        node = self.root
        if node is None:
            return 1
        line = node.start_mark.line + 1
        for part in loc:
            child = _child(node, part)
            if child is None:
                continue  # a union branch name or a missing key: stay on the parent
            node = child
            line = node.start_mark.line + 1
        return line

    def where(self, loc: Sequence[str | int]) -> str:
        return f"{self.source}:{self.line_of(loc)}"


def _more_values_than(data: Any, limit: int) -> bool:
    """Whether ``data`` holds more than ``limit`` values counted as written out (a shared list, an alias,
    counts at each place): stops counting past ``limit``, so a billion laughs costs ``limit`` steps."""
    stack, seen = [data], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _child(node: yaml.Node, part: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return value  # type: ignore[no-any-return]
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int):
        items = node.value
        return items[part] if 0 <= part < len(items) else None
    return None


def format_loc(loc: Sequence[str | int]) -> str:
    """``('routes', 0, 'backends')`` -> ``routes[0].backends``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(top level)"
