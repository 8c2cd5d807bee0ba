"""A tune's trials file (``trials.jsonl``), read in one place: gzipped or not (``util.gz``: bounded
when inflated), UTF-8, a header line of the tune's kind and a schema version this llmdeck reads, then
one JSON line per trial; a torn last line (a crash mid-write) is dropped. Each line is validated into
the caller's models (``tune.models.TrialsHeader`` / ``TrialRecord``); every failure is one
:class:`ResultFileError` naming the file and line (exit 2). The writer is ``tune.trials``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from llmdeck.errors import ResultFileError
from llmdeck.formats.result_file import first_problem, non_finite
from llmdeck.util.gz import InflateError, read_bytes
from llmdeck.util.jsonsafe import loads as json_loads

H = TypeVar("H", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)


def _bad(path: Path, lineno: int, why: str, header_kind: str) -> ResultFileError:
    what = f"a {header_kind} header" if lineno == 1 else "a tune trial"
    return ResultFileError(
        f"{path}:{lineno} is not {what} ({why}).",
        hint="This trials file was edited or is not llmdeck's; pick another --out folder "
        "(or, for `report`, the folder a tune wrote).",
    )


def _lines(path: Path) -> list[str]:
    """The file's whole, non-blank lines (a last line without its newline was cut short: dropped)."""
    try:
        text = read_bytes(path).decode("utf-8")  # gzipped or not
    except (OSError, InflateError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)  # no "[Errno 22] ..."
        if isinstance(exc, UnicodeDecodeError):
            why = f"it is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
        raise ResultFileError(
            f"Cannot read the trials file {path}: {why}.",
            hint="Pick another --out folder (or, for `report`, the folder a tune wrote).",
        ) from exc
    lines = text.split("\n")
    if lines and lines[-1] != "":
        lines = lines[:-1]
    return [ln for ln in lines if ln.strip()]


def read_trials_file(
    path: Path, header: type[H], record: type[R], *, kinds: tuple[str, str], version: int
) -> tuple[H, list[R]]:
    """(header, every whole trial) of ``path``; ``kinds``: the header's and a trial line's ``kind``."""
    header_kind, record_kind = kinds
    lines = _lines(path)
    if not lines:
        raise _bad(path, 1, "empty", header_kind)
    try:
        head = json_loads(lines[0])
    except json.JSONDecodeError as exc:
        raise _bad(path, 1, f"not JSON: {exc.msg}", header_kind) from exc
    if not isinstance(head, dict) or head.get("kind") != header_kind:
        why = f"kind {head.get('kind')!r}" if isinstance(head, dict) else "not an object"
        raise _bad(path, 1, why, header_kind)
    found = head.get("schema_version")
    if not isinstance(found, int) or isinstance(found, bool):  # true is no version 1, "1" none at all
        raise _bad(path, 1, f"schema_version is {json.dumps(found)[:40]}, not an integer", header_kind)
    if found > version:
        raise ResultFileError(
            f"{path} has schema_version {found}; this llmdeck reads version {version}.",
            hint="Upgrade llmdeck, or tune into another --out folder.",
        )
    try:
        first = header.model_validate(head)
    except ValidationError as exc:
        raise _bad(path, 1, first_problem(exc), header_kind) from exc
    records: list[R] = []
    for lineno, line in enumerate(lines[1:], 2):
        try:
            data = json_loads(line)
            if not isinstance(data, dict) or data.get("kind") != record_kind:
                raise _bad(path, lineno, "not a trial line", header_kind)
            if bad := non_finite(data):
                raise _bad(path, lineno, f"{bad} is not a measurement", header_kind)
            records.append(record.model_validate(data))
        except json.JSONDecodeError as exc:
            raise _bad(path, lineno, f"not JSON: {exc.msg}", header_kind) from exc
        except ValidationError as exc:
            raise _bad(path, lineno, first_problem(exc), header_kind) from exc
    return first, records
