"""A client's YAML config (Continue's config.yaml, aider's .aider.conf.yml) merged with ruamel.yaml's
round trip: the user's comments, anchors, merge keys, quoting and key order kept, where PyYAML's
load-and-dump had dropped every comment and expanded every alias. The file is parsed with PyYAML's
safe loader first (``parse_yaml``): its errors, depth and number bounds, in llmdeck's words."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmdeck.connect.write import parse_yaml, read_text_file
from llmdeck.errors import ConfigError


def merged_yaml(path: Path, update: Callable[[Any], None], empty: dict[str, Any] | None = None) -> str:
    """The text of ``path`` with ``update`` applied to its top-level mapping (``empty``'s keys first for
    a file that is missing or holds nothing)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    text = read_text_file(path) or ""
    parse_yaml(text, path)  # a malformed, too deep or non-mapping file: ConfigError before anything else
    rt = YAML()  # round trip
    rt.preserve_quotes = True
    rt.width = 4096  # long lines (a system prompt) stay on one line as they were
    rt.indent(mapping=2, sequence=4, offset=2)  # lists as Continue's docs write them: `  - name: ...`
    data = rt.load(text) if text.strip() else None
    if data is None:
        data = CommentedMap(empty or {})
    update(data)
    out = io.StringIO()
    rt.dump(data, out)
    return out.getvalue()


def continue_update(entry: dict[str, Any], path: Path) -> Callable[[Any], None]:
    """Continue's ``models:`` list with ``entry`` in place of any model of the same name (exit 2 for a
    ``models:`` that is no list: it had been split into its characters)."""

    def update(data: Any) -> None:
        models = data.get("models")
        if models is None:
            data["models"] = [entry]
            return
        if not isinstance(models, list):
            what = "a mapping" if isinstance(models, dict) else repr(models)[:40]
            raise ConfigError(
                f"{path}: models is {what}, not a list of models; llmdeck will not rewrite it.",
                hint="Make `models:` a list of `- name: ...` entries, or use --print and paste the model.",
            )
        keep = [m for m in models if not (isinstance(m, dict) and m.get("name") == entry["name"])]
        models[:] = [*keep, entry]

    return update
