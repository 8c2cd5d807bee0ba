"""A ``*.safetensors`` file's header, read in one place: its 8-byte length (at most
``MAX_HEADER_BYTES``), UTF-8 JSON within the decoder's depth, one object whose tensor entries must
each be well formed and together cover the data section exactly. A file that breaks any of that is a
:class:`SafetensorsHeaderError` saying what (``fetch``'s verification records it as a problem). The
tensor data is never read.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

from llmdeck.errors import InternalError
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
