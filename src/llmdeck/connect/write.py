"""Merge a client configuration into the user's file without clobbering it, with a backup first."""

from __future__ import annotations

import copy
import json
import shlex
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from llmdeck.errors import ConfigError
from llmdeck.util.atomic import atomic_write_text, check_writable, resolve_target


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` laid over ``base``: nested dicts merge, other values replace; ``base`` is not changed."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def backup(path: Path) -> Path:
    """Copy ``path`` to ``<path>.bak-<YYYYmmdd-HHMMSS>`` (a suffix if that exists) and return it."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    shutil.copy2(path, target)
    return target


def read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not plain JSON (line {exc.lineno}: {exc.msg}); llmdeck will not rewrite a file it "
            "cannot read completely (comments or trailing commas, JSONC/JSON5, are not merged).",
            hint="Use --print and paste the block yourself, or --file to write a separate file.",
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds JSON that is not an object.", hint="Fix the file or use --file.")
    return data


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({exc}).", hint="Fix the file or use --print.") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds YAML that is not a mapping.", hint="Fix the file or use --file.")
    return data


def read_env(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def env_line(key: str, value: str, *, export: bool = False) -> str:
    """``KEY='value'``: the value shell-quoted (a model id from a server is data, never code)."""
    return f"{'export ' if export else ''}{key}={shlex.quote(value)}"


def merge_env(lines: list[str], values: dict[str, str]) -> list[str]:
    """Replace ``KEY=`` / ``export KEY=`` lines for our keys, keep every other line, append the rest.

    Values are shell-quoted, so the file can be ``source``d safely (dotenv readers unquote them)."""
    out: list[str] = []
    done: set[str] = set()
    for line in lines:
        stripped = line.strip()
        body = stripped[len("export ") :] if stripped.startswith("export ") else stripped
        key = body.split("=", 1)[0].strip() if "=" in body and not stripped.startswith("#") else None
        if key in values:
            if key not in done:
                out.append(env_line(key, values[key]))
                done.add(key)
            continue
        out.append(line)
    out.extend(env_line(k, v) for k, v in values.items() if k not in done)
    return out


def write_if_changed(path: Path, text: str, *, secret: bool = False) -> tuple[str, Path | None]:
    """Write ``text`` atomically; back the old file up first. Returns (action, backup path).

    A read-only file is refused before anything is written (no backup either); a symlink is written
    through to its target; an existing file keeps its mode; a new one holding a key (``secret``) is 0600.
    """
    check_writable(resolve_target(path))
    if path.exists():
        if path.read_text(encoding="utf-8") == text:
            return "unchanged", None
        saved = backup(path)
        atomic_write_text(path, text, secret=secret)
        return "updated", saved
    atomic_write_text(path, text, secret=secret)
    return "created", None
