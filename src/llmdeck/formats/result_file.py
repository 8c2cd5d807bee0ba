"""A saved result file (bench, eval, tune, compare), read in one place: gzipped or not, bounded in
size (``MAX_RESULT_BYTES``, inflated or not) and depth (``util.jsonsafe``), decoded, then checked for its
``kind`` and ``schema_version`` and validated into its model. Every failure is one
:class:`ResultFileError` naming the file (exit 2). What a result's numbers must be is for its
package (``bench.report.load_result``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from llmdeck.errors import ResultFileError
from llmdeck.util.gz import InflatedTooLargeError, InflateError, read_bytes
from llmdeck.util.jsonsafe import TooDeepError
from llmdeck.util.jsonsafe import loads as json_loads
from llmdeck.util.localfile import FileTooLargeError, NotRegularFileError

M = TypeVar("M", bound=BaseModel)
# A result file's content, gzipped or not: the largest llmdeck has written is 2.3 MB (2,000 requests with
# their ITL, evidence/report/results/big-2000.json.gz); JSON takes several times its size as objects, so
# a file 100x that is read and anything past 256 MiB (a gzip bomb, no result) is refused at once.
MAX_RESULT_BYTES = 256 << 20

# Results that other commands write (no `report` renders them), named when one is passed to a reader.
WRITTEN_BY = {
    "llmdeck.check": "`llmdeck check --json`",
    "llmdeck.connect": "`llmdeck connect --json`",
    "llmdeck.migrate.ollama": "`llmdeck migrate ollama`",
    "llmdeck.tune.trial": "`llmdeck tune` (a line of its trials.jsonl: pass the tune's folder)",
}


def read_json_file(p: Path, hint: str) -> Any:
    """A JSON file's content (gzipped or not); ResultFileError (exit 2) when it is missing or not JSON."""
    try:
        return json_loads(read_bytes(p, MAX_RESULT_BYTES).decode("utf-8"))
    except FileNotFoundError as exc:
        raise ResultFileError(f"{p} does not exist.", hint=hint) from exc
    except (FileTooLargeError, InflatedTooLargeError) as exc:  # a gzip bomb, or no result file at all
        why = exc.strerror if isinstance(exc, OSError) else exc.message
        raise ResultFileError(f"{p} is too large to be a result file: {why}.", hint=hint) from exc
    except (NotRegularFileError, IsADirectoryError) as exc:
        raise ResultFileError(f"{p} is not a result file: {exc.strerror}.", hint=hint) from exc
    except TooDeepError as exc:
        raise ResultFileError(f"{p} is not a result file: its JSON nests too deeply.", hint=hint) from exc
    except (OSError, InflateError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultFileError(f"{p} is not a JSON file ({exc}).", hint=hint) from exc


def non_finite(data: Any, where: str = "") -> str | None:
    """``where: value`` of the first NaN or infinity in a decoded JSON document (Python's decoder takes
    them; JSON has none, and no measurement llmdeck writes is one), else None."""
    if isinstance(data, float) and not math.isfinite(data):
        return f"{where.rstrip('.') or 'the document'}: {data}"
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found = non_finite(value, f"{where}{key}.")
        if found:
            return found
    return None


def first_problem(exc: ValidationError) -> str:
    """``where: what`` of a validation error's first problem, for a one-line message."""
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first.get("loc", ()))
    what = str(first.get("msg")).removeprefix("Value error, ")
    if first.get("type") in ("model_type", "dict_type"):  # "... or instance of VllmBenchResult": a class
        what = f"{json.dumps(first.get('input'))[:40]} is not a JSON object"
    return f"{where}: {what}" if where else what  # the top level has no location (was ": : ...")


def load_versioned(path: Path, model: type[M], kind: str, version: int, noun: str, command: str) -> M:
    """Read a result file of ``kind`` at schema ``version`` into ``model``; ResultFileError (exit 2)
    naming what is wrong: missing, not JSON, another kind, another schema version, invalid."""
    p = Path(path)
    data = read_json_file(p, f"Pass a file written by `llmdeck {command}`.")
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else None
        who = WRITTEN_BY.get(found) if isinstance(found, str) else None
        reads = "; `llmdeck report` reads the results of bench, bench --compare, eval and tune"
        raise ResultFileError(
            f'{p} is not an llmdeck {noun} result (its "kind" is {found!r}'
            + (f": {who} wrote it)." if who else ")."),
            hint=f"Pass a file written by `llmdeck {command} --out`{reads if who else ''}.",
        )
    found_version = data.get("schema_version")
    if not isinstance(found_version, int) or isinstance(found_version, bool):
        raise ResultFileError(
            f"{p}: schema_version is {json.dumps(found_version)[:40]}; it must be an integer (this llmdeck "
            f"reads {noun} schema version {version}).",
            hint=f"The file may be edited by hand; run the {noun} again.",
        )
    if found_version != version:
        raise ResultFileError(
            f"{p} has {noun} schema version {data.get('schema_version')!r}; this llmdeck reads version "
            f"{version}.",
            hint=f"Re-render it with the llmdeck version that wrote it, or run the {noun} again.",
        )
    if bad := non_finite(data):
        raise ResultFileError(
            f"{p} is not a valid {noun} result: {bad} is not a measurement.",
            hint=f"The file may be edited by hand or written by something else; run the {noun} again.",
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ResultFileError(
            f"{p} is not a valid {noun} result: {first_problem(exc)}.",
            hint=f"The file may be truncated or edited by hand; run the {noun} again.",
        ) from exc
