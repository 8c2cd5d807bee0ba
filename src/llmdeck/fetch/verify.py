"""Verify a downloaded model folder without loading it.

* every shard named in ``*.safetensors.index.json`` exists, and a whole-repo fetch holds at least one
  weight file (unless only the config or ``--include`` patterns were fetched);
* every ``*.safetensors`` file's header parses, and its tensors exactly cover the data section
  (a truncated or overwritten file fails here without reading the tensor data);
* file sizes match the hub's metadata, when it is known.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.errors import DownloadError
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
    no_weights: bool = Field(False, description="a full fetch whose folder holds no weight file at all")
    notes: list[str] = Field(default_factory=list)


MIRROR_HINT = (
    "If huggingface.co is blocked or slow where you are, use a mirror: "
    "`export HF_ENDPOINT=https://hf-mirror.com` or `--endpoint https://hf-mirror.com`."
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def _index_shards(local_dir: Path, report: VerifyReport) -> set[str]:
    shards: set[str] = set()
    for index in sorted(local_dir.glob("*.safetensors.index.json")):
        try:
            weight_map = read_index_weight_map(index)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            report.problems.append(f"{index.name}: not a valid safetensors index ({exc})")
            continue
        for shard in {str(v) for v in weight_map.values()}:
            norm = os.path.normpath(shard)  # not resolved: a shard may be a link into hf's cache
            if not os.path.isabs(shard) and norm != ".." and not norm.startswith("../"):
                shards.add(shard)
            else:  # `../../etc/passwd` had been "verified" as a shard that is there
                report.problems.append(
                    f"{index.name}: the shard {shard[:120]!r} is not a file of this folder"
                )
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
    if require_shards and not any(p.name.endswith(WEIGHT_SUFFIXES) for p in files):
        report.no_weights = True
        report.problems.append("the folder holds no weight file (*.safetensors, *.bin, *.pt, *.pth, *.gguf)")
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


def verify_download(
    target: Path, repo_id: str, sizes: dict[str, int] | None, *, require_shards: bool, endpoint: str
) -> VerifyReport:
    """Verify what a fetch left in ``target``; DownloadError (exit 1) naming what is wrong."""
    report = verify_model_files(target, expected_sizes=sizes, require_shards=require_shards)
    if report.no_weights and sizes is None:
        # huggingface_hub, when the hub cannot be reached, hands back any non-empty --local-dir as
        # it is ("Returning existing local_dir"): that is no copy of the model
        raise DownloadError(
            f"Cannot reach {endpoint} to download {repo_id}, and {target} holds no model weights "
            "(huggingface_hub handed back the folder as it was, without downloading anything).",
            hint="Check the network (and any proxy variables), then fetch again; use an empty or new "
            "--local-dir. " + MIRROR_HINT,
        )
    if not report.ok:
        shown = "; ".join(report.problems[:5]) + (" ..." if len(report.problems) > 5 else "")
        raise DownloadError(
            f"The download of {repo_id} into {target} did not verify: {shown}.",
            hint="Delete the broken or partial files named above and run the same command again "
            "(finished files are kept, missing ones are downloaded).",
        )
    return report
