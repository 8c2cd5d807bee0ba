"""Merge a client configuration into the user's file without clobbering it, with a backup first."""

from __future__ import annotations

import contextlib
import copy
import json
import shlex
import shutil
from collections.abc import MutableMapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from llmdeck.errors import ConfigError
from llmdeck.util.atomic import atomic_write_text, check_writable, resolve_target
from llmdeck.util.jsonsafe import loads as json_loads


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` laid over ``base``: nested dicts merge, other values replace; ``base`` is not changed."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def drop_key(data: Any, *keys: str) -> None:
    """Remove ``data[k1]...[kn]`` where it is there: a key llmdeck wrote for an earlier server, when this
    one needs none (merged, it would stay and be sent to the new server)."""
    for key in keys[:-1]:
        data = data.get(key) if isinstance(data, MutableMapping) else None
    if isinstance(data, MutableMapping):
        data.pop(keys[-1], None)


def backup(path: Path) -> Path:
    """Copy ``path`` to ``<path>.bak-<YYYYmmdd-HHMMSS>`` (a suffix if that exists) and return it.

    A copy that fails (a full disk had left an empty backup and an "internal error") is removed, and is
    an OperationError (no space, exit 1) or UsageError (exit 2) naming the backup."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    try:
        shutil.copy2(path, target)
    except OSError as exc:  # a full disk: no empty or half copy is left beside the user's file
        with contextlib.suppress(OSError):
            target.unlink()
        from llmdeck.util.atomic import write_error

        raise write_error(target, exc) from exc
    return target


MAX_CLIENT_CONFIG_BYTES = 16 << 20  # a client's config is a few KB


def read_text_file(path: Path) -> str | None:
    """The text of the user's config file, None when there is none; ConfigError (exit 2) when it is a
    pipe, a device, too large, unreadable or not UTF-8 (never waits on a FIFO)."""
    from llmdeck.util.localfile import read_regular_text

    try:
        return read_regular_text(path, MAX_CLIENT_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not a text file (not UTF-8: {exc.reason}); llmdeck will not rewrite it.",
            hint="Use --print and paste the block yourself, or --file to write a separate file.",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"Cannot read {path}: {exc.strerror or exc}.",
            hint="Give a regular file with --file, or use --print and paste the block yourself.",
        ) from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """One object's keys, each once: a key given twice is refused (JSON readers keep the last silently,
    so the merge would have dropped the first without a word)."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"the key {key!r} is given twice in one object; keep one")
        data[key] = value
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"it holds {name}, which is no JSON number")


def _parse_json(text: str) -> Any:
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except RecursionError:
        return json_loads(text)  # raises the bounded reader's "nested too deep" (a ValueError)
    try:  # what is read must write back: a lone surrogate had failed only after the backup was made
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("it holds a lone UTF-16 surrogate (such as \\ud800), which is no text") from None
    return data


# --file had been the advice even with --file given (and for aider's metadata file, which --file does not
# name): --print fits every case
_NOT_MERGED_HINT = "Fix the file, or use --print and paste the block yourself."


def read_json(path: Path) -> dict[str, Any]:
    text = read_text_file(path)
    if text is None:
        return {}
    if not text.strip():
        return {}
    try:
        data = _parse_json(text)
    except ValueError as exc:
        where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ConfigError(
            f"{path} is not plain JSON ({where}); llmdeck will not rewrite a file it "
            "cannot read completely (comments or trailing commas, JSONC/JSON5, are not merged).",
            hint="Use --print and paste the block yourself, or --file to write a separate file.",
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds JSON that is not an object.", hint=_NOT_MERGED_HINT)
    return data


def _unique_key_loader() -> Any:
    """PyYAML's SafeLoader refusing a key given twice in one mapping (it kept the last silently, and the
    round-trip writer refused the file later: an internal error). Merge keys (``<<``) may be overridden."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str | int | float | bool):
                    continue  # a complex key: nothing to compare by
                if key in seen:
                    why = f"the key {key!r} is given twice in one mapping; keep one"
                    raise yaml.constructor.ConstructorError(None, None, why, key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeys


def read_yaml(path: Path) -> dict[str, Any]:
    return parse_yaml(read_text_file(path), path)


def parse_yaml(text: str | None, path: Path) -> dict[str, Any]:
    """The mapping ``text`` (the file at ``path``, None: none) holds; ConfigError (exit 2) otherwise."""
    import yaml

    if text is None:
        return {}
    try:
        data = yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({exc}).", hint="Fix the file or use --print.") from exc
    except (RecursionError, ValueError) as exc:  # nested past the stack; an integer of 4300+ digits
        why = (
            "it nests too deeply" if isinstance(exc, RecursionError) else "it holds a number too long to read"
        )
        raise ConfigError(
            f"{path} cannot be read as YAML ({why}); llmdeck will not rewrite a file it cannot read.",
            hint="Fix the file, or use --print and paste the block yourself.",
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds YAML that is not a mapping.", hint=_NOT_MERGED_HINT)
    return data


def read_env(path: Path) -> list[str]:
    text = read_text_file(path)
    return text.splitlines() if text is not None else []


def merged_env_text(path: Path, values: dict[str, str]) -> str:
    """The .env file at ``path`` with ``values`` merged in (:func:`merge_env`), in its own line endings
    (a CRLF file had come back LF)."""
    text = read_text_file(path) or ""
    eol = "\r\n" if "\r\n" in text else "\n"
    return eol.join(merge_env(text.splitlines(), values)) + eol


def env_line(key: str, value: str, *, export: bool = False) -> str:
    """``KEY='value'``: the value shell-quoted (a model id from a server is data, never code); for a shell
    (``export``) a control character as ANSI-C ``$'\x1b'``, which pastes back as the same value (it had
    been the text ``\x1b`` in single quotes); a .env file's line as dotenv readers take it."""
    from llmdeck.util.shellquote import quote

    return f"export {key}={quote(value)}" if export else f"{key}={shlex.quote(value)}"


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


MERGE_LOCK_S = 30.0  # a merge holds the folder for milliseconds


def merging(path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold the folder of ``path`` (its nearest one that exists) from reading the user's file to writing
    it back: two `connect` at once (another provider each) had both read the file, and the last write
    dropped the other's block although both said "updated"."""
    from llmdeck.util.filelock import folder_lock

    folder = resolve_target(path).parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder_lock(folder, timeout_s=MERGE_LOCK_S, what="`llmdeck connect`")


def write_if_changed(
    path: Path, text: str, *, secret: bool = False
) -> tuple[Literal["created", "updated", "unchanged"], Path | None]:
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
