"""A launch spec file (``llmdeck plan --spec-out``; read by ``up --spec``, ``tune --spec``, a gateway's
``spec:`` backends), read in one place: a regular file of at most ``MAX_SPEC_BYTES``, UTF-8 JSON within
the decoder's depth, one object, a ``schema_version`` this llmdeck reads, then validated into the model
the caller passes (``engines.spec.LaunchSpec``). Every failure is one message naming the file (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from llmdeck.errors import ConfigError, UsageError
from llmdeck.util.jsonsafe import TooDeepError
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.localfile import NotRegularFileError, read_regular

# the engines a launch spec (and a catalog entry) may name; engines/ registers one class per name
EngineKind = Literal["cpu", "venv", "docker"]
MAX_SPEC_BYTES = 16 << 20  # a launch spec is a few KB
SPEC_HINT = "Write one with `llmdeck plan MODEL --spec-out FILE`."
M = TypeVar("M", bound=BaseModel)
# what a JSON document is, in JSON's words (not Python's: list, str, NoneType)
_JSON_KINDS: dict[type, str] = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}


def read_launch_spec(path: Path, model: type[M], version: int) -> M:
    """The spec at ``path`` as ``model``; ``version``: the schema version this llmdeck writes and reads."""
    data = _read_object(Path(path))
    found = data.get("schema_version", version)
    if not isinstance(found, int) or isinstance(found, bool):
        raise ConfigError(
            f"Launch spec {path}: schema_version is {json.dumps(found)[:40]}; it must be an integer "
            f"(this llmdeck writes and reads {version}).",
            hint=f'Write "schema_version": {version} without quotes, or regenerate '
            "the spec with `llmdeck plan MODEL --spec-out FILE`.",
        )
    if found > version:
        raise ConfigError(
            f"Launch spec {path} has schema_version {found!r}; this llmdeck reads version {version}.",
            hint="Upgrade llmdeck, or regenerate the spec with this llmdeck "
            "(`llmdeck plan MODEL --spec-out FILE`).",
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        from llmdeck.formats.validation import explain

        (loc, why), *_ = explain(exc, model, 1)  # a misspelt field: the fields there are named
        where = f"field {'.'.join(map(str, loc))}: " if loc else ""
        raise ConfigError(
            f"Launch spec {path} is not valid: {where}{why}.",
            hint="Regenerate it with `llmdeck plan MODEL --spec-out FILE`.",
        ) from exc


def _read_object(path: Path) -> dict[str, Any]:
    try:
        data = json_loads(read_regular(path, MAX_SPEC_BYTES).decode("utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"Launch spec {path} does not exist.", hint=SPEC_HINT) from exc
    except NotRegularFileError as exc:
        raise UsageError(f"Launch spec {path} is not a file: {exc.strerror}.", hint=SPEC_HINT) from exc
    except TooDeepError as exc:
        raise ConfigError(
            f"Launch spec {path} is not a launch spec: its JSON nests too deeply.", hint=SPEC_HINT
        ) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"Launch spec {path} is not a text file (not UTF-8: {exc.reason}).", hint=SPEC_HINT
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"Launch spec {path} is not JSON ({exc}).", hint=SPEC_HINT) from exc
    except OSError as exc:
        raise ConfigError(
            f"Cannot read the launch spec {path}: {exc.strerror or exc}.", hint=SPEC_HINT
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"Launch spec {path} is not a JSON object (it is {_JSON_KINDS.get(type(data), 'a value')}).",
            hint=SPEC_HINT,
        )
    return data
