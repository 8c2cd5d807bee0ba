"""Verify a downloaded model folder without loading it.

* every shard named in ``*.safetensors.index.json`` exists, and a whole-repo fetch holds at least one
  weight file (unless only the config or ``--include`` patterns were fetched);
* every ``*.safetensors`` file's header parses, and its tensors exactly cover the data section
  (a truncated or overwritten file fails here without reading the tensor data);
* file sizes match the hub's metadata, when it is known;
* with ``--checksum``, every file the hub keeps in LFS (the weights) hashes to the sha256 the hub lists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.errors import DownloadError, UsageError
from llmdeck.fetch.guards import HubFiles
from llmdeck.formats.model_folder import read_index_weight_map
from llmdeck.formats.safetensors import SafetensorsHeaderError, read_safetensors_header


class FileCheck(BaseModel):
    name: str
    size: int | None = None
    expected_size: int | None = None
    tensors: int | None = None
    sha256_ok: bool | None = Field(None, description="matches the hub's sha256 (--checksum); None: not read")
    ok: bool = True
    problem: str | None = None


class VerifyReport(BaseModel):
    """What verification found; ``ok`` is false if any problem was seen."""

    ok: bool = True
    checked_files: list[FileCheck] = Field(default_factory=list)
    missing_files: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)
    sizes_checked: bool = False
    sha256_checked: int = Field(0, description="files whose sha256 was compared with the hub's (--checksum)")
    no_weights: bool = Field(False, description="a full fetch whose folder holds no weight file at all")
    notes: list[str] = Field(default_factory=list)


OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def offline_set(env: Mapping[str, str] | None = None) -> list[str]:
    """The offline variables set to a true value (huggingface_hub's reading: 1, on, yes, true)."""
    env = os.environ if env is None else env
    return [v for v in OFFLINE_VARS if (env.get(v) or "").strip().upper() in {"1", "ON", "YES", "TRUE"}]


def offline_error(repo_id: str) -> UsageError:
    """The error of a fetch in Hugging Face's offline mode."""
    return UsageError(
        f"Cannot download {repo_id}: Hugging Face offline mode is on (HF_HUB_OFFLINE or "
        "TRANSFORMERS_OFFLINE) and no complete copy is on disk.",
        hint=f"Unset them before fetching: `unset {' '.join(OFFLINE_VARS)}`.",
    )


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
    expected_sha256: dict[str, str] | None = None,
) -> VerifyReport:
    """Verify the files in ``local_dir`` (see the module docstring); never raises for bad files.

    ``expected_sizes`` maps repo file names to sizes from the hub; only files present locally are
    compared. With ``require_shards`` false (a config-only fetch) shards may be absent. Files named in
    ``expected_sha256`` (``fetch --checksum``: the hub's LFS hashes) are read whole and hashed.
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
    report.sizes_checked = expected_sizes is not None
    if expected_sizes is None:
        report.notes.append("the hub's file sizes were not available; sizes not compared")
    for path in files:
        rel = path.relative_to(local_dir).as_posix()
        check = _check_file(path, rel, (expected_sizes or {}).get(rel), (expected_sha256 or {}).get(rel))
        if check is None:
            continue
        if not check.ok:
            report.problems.append(f"{rel}: {check.problem}")
        report.checked_files.append(check)
        report.sha256_checked += check.sha256_ok is not None
    report.ok = not report.problems
    return report


def _check_file(path: Path, rel: str, expected: int | None, sha256: str | None) -> FileCheck | None:
    """One file against the hub's size (and sha256), a safetensors file's header; None: not checked."""
    is_weights = rel.endswith(".safetensors")
    if not is_weights and expected is None and sha256 is None:
        return None
    check = FileCheck(name=rel, size=path.stat().st_size, expected_size=expected)
    if expected is not None and check.size != expected:
        check.ok = False
        check.problem = f"size {check.size} bytes, the hub says {expected}"
        return check
    if is_weights:
        try:
            check.tensors = len(read_safetensors_header(path))
        except (SafetensorsHeaderError, OSError) as exc:
            check.ok = False
            check.problem = f"not a valid safetensors file: {exc}"
            return check
    if sha256 is not None:
        got = file_sha256(path)
        check.sha256_ok = got == sha256
        if not check.sha256_ok:
            check.ok = False
            check.problem = f"sha256 {got[:16]}…, the hub says {sha256[:16]}… (a corrupt copy)"
    return check


def file_sha256(path: Path, chunk: int = 8 << 20) -> str:
    """The sha256 of a file's bytes, read in 8 MiB pieces (a 60 GB model: about a minute)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verify_download(
    target: Path,
    repo_id: str,
    hub: HubFiles | None,
    *,
    require_shards: bool,
    endpoint: str,
    checksum: bool,
    config_only: bool = False,
) -> VerifyReport:
    """Verify what a fetch left in ``target`` (with ``checksum``, the sha256 of the hub's LFS files too);
    DownloadError (exit 1) naming what is wrong."""
    sizes = hub.sizes if hub else None
    sha = hub.sha256 if hub and checksum else None
    report = verify_model_files(
        target, expected_sizes=sizes, require_shards=require_shards, expected_sha256=sha
    )
    if checksum and not report.sha256_checked:
        why = "the hub's metadata was not available" if hub is None else "no file here is one the hub hashes"
        report.notes.append(f"--checksum: no sha256 compared ({why})")
    no_config = config_only and not (target / "config.json").is_file()
    if (report.no_weights or no_config) and sizes is None:
        # huggingface_hub, when the hub cannot be reached, hands back any non-empty --local-dir as
        # it is ("Returning existing local_dir"): that is no copy of the model (nor of its config)
        held = "no config.json" if no_config else "no model weights"
        if offline_set():  # not the network's doing: it had said so
            raise offline_error(repo_id)
        raise DownloadError(
            f"Cannot reach {endpoint} to download {repo_id}, and {target} holds {held} "
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
