"""An all-reduce sweep's output (``python -m llmdeck.cluster.allreduce`` on rank 0, saved by
``llmdeck cluster netcheck --out``), read in one place: a bounded UTF-8 text file whose JSON lines of
the sweep's ``schema`` are validated into the caller's model (``cluster.verdict.Row``); other lines
(NCCL's INFO logs) are skipped. Every failure is one :class:`ResultFileError` naming the line (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from llmdeck.errors import ResultFileError
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.localfile import read_regular_text

MAX_NETCHECK_BYTES = 64 << 20  # a sweep is tens of lines; NCCL's logs around them a few MB at most
ROWS_HINT = (
    "Give --result a file saved by `llmdeck cluster netcheck --out FILE` (what "
    "`python -m llmdeck.cluster.allreduce` prints on rank 0), or run the test again without --result."
)
M = TypeVar("M", bound=BaseModel)


def read_netcheck_text(path: Path) -> str:
    """The saved output's text (a pipe or a device: refused, never waited on)."""
    try:
        return read_regular_text(path, MAX_NETCHECK_BYTES)
    except OSError as exc:
        raise ResultFileError(f"Cannot read {path}: {exc.strerror}.", hint=ROWS_HINT) from exc
    except UnicodeDecodeError as exc:
        raise ResultFileError(
            f"{path} is not text (not UTF-8): not a saved netcheck.", hint=ROWS_HINT
        ) from exc


def parse_netcheck_rows(text: str, model: type[M], schema: str, source: str) -> list[M]:
    """The JSON lines of ``schema`` in ``text`` as ``model``; at least one."""
    rows: list[M] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json_loads(line)
        except json.JSONDecodeError as exc:
            raise ResultFileError(f"Line {n} of {source} is not JSON: {exc.msg}.", hint=ROWS_HINT) from exc
        if not isinstance(data, dict) or data.get("schema") != schema:
            continue
        try:
            rows.append(model.model_validate(data))
        except ValidationError as exc:
            raise ResultFileError(
                f"Line {n} of {source} is not an all-reduce row: {_where(exc)}{exc.errors()[0]['msg']}.",
                hint=ROWS_HINT,
            ) from exc
    if not rows:
        raise ResultFileError(f"{source} has no all-reduce rows (schema {schema}).", hint=ROWS_HINT)
    return rows


def _where(exc: ValidationError) -> str:
    loc = ".".join(str(x) for x in exc.errors()[0].get("loc", ()))
    return f"{loc}: " if loc else ""
