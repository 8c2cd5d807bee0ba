"""Verify a downloaded model folder without loading it.

* every shard named in ``*.safetensors.index.json`` exists (unless only the config was fetched);
* every ``*.safetensors`` file's header parses, and its tensors exactly cover the data section
  (a truncated or overwritten file fails here without reading the tensor data);
* file sizes match the hub's metadata, when it is known.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.formats.model_folder import read_index_weight_map
from llmdeck.formats.safetensors import SafetensorsHeaderError, read_safetensors_header


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
