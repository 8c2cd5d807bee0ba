"""What `llmdeck fetch` checks around a download that huggingface_hub does not: a file of the user's in
the target folder that the download would replace (hf overwrites it without a word), and an ``--include``
that matched nothing (hf says so only in a log line; the empty folder was then "verified")."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.errors import UsageError

HF_METADATA = Path(".cache") / "huggingface" / "download"  # hf keeps <file>.metadata for each it downloads


def refuse_files_not_from_the_hub(target: Path, repo_files: Iterable[str] | None) -> None:
    """UsageError (exit 2) when ``target`` holds a file the download would write (one of ``repo_files``;
    None: the hub's list could not be had, and then nothing is refused: an unreachable hub writes
    nothing) that did not come from the hub: no hf metadata beside it, so it is the user's own (an
    edited config.json, weights of their own)."""
    if not target.is_dir() or repo_files is None:
        return
    wanted = set(repo_files)
    theirs = []
    for path in sorted(target.rglob("*")):
        rel = path.relative_to(target)
        if not path.is_file() or rel.parts[0] == ".cache":
            continue
        name = rel.as_posix()
        if name in wanted and not (target / HF_METADATA / f"{name}.metadata").exists():
            theirs.append(name)
    if theirs:
        shown = ", ".join(theirs[:5]) + (f" and {len(theirs) - 5} more" if len(theirs) > 5 else "")
        raise UsageError(
            f"{target} holds {shown}, which the download would replace and which did not come from the "
            "hub (yours?); llmdeck fetch does not overwrite them.",
            hint="Give another --local-dir, or move those files away yourself.",
        )


def refuse_nothing_matched(include: list[str] | None, files: list[Path]) -> None:
    """UsageError (exit 2) when ``--include`` was given and no file of the repo matched it."""
    if include and not files:
        raise UsageError(
            f"--include {' '.join(include)} matched no file of the repo: nothing was downloaded.",
            hint="Check the patterns against the repo's file names (e.g. --include '*.json' "
            "'model-0000[1-2]*.safetensors'), or leave --include out.",
        )


class HubFiles(BaseModel):
    """What the hub's metadata says of a repo's files: sizes, and the sha256 of each LFS file (weights)."""

    sizes: dict[str, int]
    sha256: dict[str, str] = Field(default_factory=dict)


def hub_files(endpoint: str, repo_id: str, revision: str | None, limit: float = 30.0) -> HubFiles | None:
    """The repo's files from the hub's metadata (whole within ``limit`` s), or None if they cannot be had."""
    try:
        import huggingface_hub

        from llmdeck.fetch.hubcap import capped_hub_client

        with capped_hub_client(huggingface_hub, config_only=False, api_limit=limit):
            info = huggingface_hub.HfApi(endpoint=endpoint).model_info(
                repo_id, revision=revision, files_metadata=True, timeout=limit
            )
    except Exception:
        return None
    siblings = info.siblings or []
    sizes = {s.rfilename: int(s.size) for s in siblings if s.size is not None}
    sha = {s.rfilename: str(s.lfs.sha256).lower() for s in siblings if s.lfs is not None and s.lfs.sha256}
    return HubFiles(sizes=sizes, sha256=sha) if sizes else None
