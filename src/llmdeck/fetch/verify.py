"""Verify a downloaded model folder without loading it.

* every shard named in ``*.safetensors.index.json`` exists (unless only the config was fetched);
* every ``*.safetensors`` file's header parses, and its tensors exactly cover the data section
  (a truncated or overwritten file fails here without reading the tensor data);
* file sizes match the hub's metadata, when it is known.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.errors import InternalError
from llmdeck.formats.model_folder import read_index_weight_map
from llmdeck.util.jsonsafe import loads as _json_loads

# bytes per element of every safetensors dtype (sub-byte types are counted in bits below)
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "C64": 64,
}
MAX_HEADER_BYTES = 100 * 1024 * 1024


class SafetensorsHeaderError(InternalError, ValueError):
    """A safetensors file whose header does not parse or does not match the file."""


class FileCheck(BaseModel):
    name: str
    size: int | None = None
    expected_size: int | None = None
    tensors: int | None = None
    ok: bool = True
    problem: str | None = None


class VerifyReport(BaseModel):
    """What verification found; ``ok`` is false if any problem was seen."""

    ok: bool = True
    checked_files: list[FileCheck] = Field(default_factory=list)
    missing_files: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    sizes_checked: bool = False
    notes: list[str] = Field(default_factory=list)


def read_safetensors_header(path: Path) -> dict[str, object]:
    """Parse a safetensors header and check it against the file; return the tensor entries.

    Raises :class:`SafetensorsHeaderError` if the file is too short, the header is not a JSON
    object, an entry is malformed, or the tensors do not exactly cover the data section.
    """
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise SafetensorsHeaderError(f"{size} bytes: too short for a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES or 8 + n > size:
            raise SafetensorsHeaderError(f"header length {n} does not fit in a file of {size} bytes")
        raw = fh.read(n)
    try:
        header = _json_loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SafetensorsHeaderError(f"header is not valid JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise SafetensorsHeaderError("header is not a JSON object")
    data_size = size - 8 - n
    end_max = 0
    tensors: dict[str, object] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict):
            raise SafetensorsHeaderError(f"tensor {name!r}: entry is not an object")
        dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
        if (
            not isinstance(shape, list)
            or not all(isinstance(d, int) and d >= 0 for d in shape)
            or not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(o, int) for o in offsets)
        ):
            raise SafetensorsHeaderError(f"tensor {name!r}: bad shape or data_offsets")
        begin, end = offsets
        if not 0 <= begin <= end <= data_size:
            raise SafetensorsHeaderError(
                f"tensor {name!r}: data_offsets [{begin}, {end}] beyond the {data_size} data bytes "
                "(file truncated?)"
            )
        bits = DTYPE_BITS.get(str(dtype))
        if bits is not None:
            want = math.ceil(math.prod(shape) * bits / 8)
            if end - begin != want:
                raise SafetensorsHeaderError(
                    f"tensor {name!r}: {end - begin} bytes for {dtype} {shape}, expected {want}"
                )
        end_max = max(end_max, end)
        tensors[name] = entry
    if end_max != data_size:
        raise SafetensorsHeaderError(
            f"tensors cover {end_max} of {data_size} data bytes (file truncated or has trailing data)"
        )
    return tensors


def _index_shards(local_dir: Path, report: VerifyReport) -> set[str]:
    shards: set[str] = set()
    for index in sorted(local_dir.glob("*.safetensors.index.json")):
        try:
            weight_map = read_index_weight_map(index)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            report.problems.append(f"{index.name}: not a valid safetensors index ({exc})")
            continue
        shards.update(str(v) for v in weight_map.values())
    return shards


def verify_model_files(
    local_dir: Path,
    *,
    expected_sizes: dict[str, int] | None = None,
    require_shards: bool = True,
) -> VerifyReport:
    """Verify the files in ``local_dir`` (see the module docstring); never raises for bad files.

    ``expected_sizes`` maps repo file names to sizes from the hub; only files present locally are
    compared. With ``require_shards`` false (a config-only fetch) shards may be absent.
    """
    local_dir = Path(local_dir)
    report = VerifyReport()
    shards = _index_shards(local_dir, report)
    if require_shards:
        report.missing_files = sorted(s for s in shards if not (local_dir / s).is_file())
        for name in report.missing_files:
            report.problems.append(f"{name}: listed in the safetensors index but missing")
    elif shards:
        report.notes.append(f"config only: {len(shards)} shard(s) listed in the index were not fetched")

    files = sorted(
        p for p in local_dir.rglob("*") if p.is_file() and ".cache" not in p.relative_to(local_dir).parts
    )
    sizes = expected_sizes or {}
    report.sizes_checked = expected_sizes is not None
    if expected_sizes is None:
        report.notes.append("the hub's file sizes were not available; sizes not compared")
    for path in files:
        rel = path.relative_to(local_dir).as_posix()
        is_weights = rel.endswith(".safetensors")
        expected = sizes.get(rel)
        if not is_weights and expected is None:
            continue
        check = FileCheck(name=rel, size=path.stat().st_size, expected_size=expected)
        if expected is not None and check.size != expected:
            check.ok = False
            check.problem = f"size {check.size} bytes, the hub says {expected}"
        elif is_weights:
            try:
                check.tensors = len(read_safetensors_header(path))
            except (SafetensorsHeaderError, OSError) as exc:
                check.ok = False
                check.problem = f"not a valid safetensors file: {exc}"
        if not check.ok:
            report.problems.append(f"{rel}: {check.problem}")
        report.checked_files.append(check)
    report.ok = not report.problems
    return report
