"""Where a model's config comes from: a local folder (or its config.json), a catalog name or repo
id (local copy, Hugging Face cache, or the config bundled with the catalog)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from llmdeck.catalog.entries import Catalog, CatalogEntry
from llmdeck.errors import ConfigError, UnknownModelError
from llmdeck.formats.model_folder import read_model_config
from llmdeck.plan.modelinfo import ModelFacts, facts_from_config, facts_from_dir
from llmdeck.util.hfpaths import find_in_hf_cache
from llmdeck.util.shellquote import quote


class ResolvedModel(BaseModel):
    name: str
    repo_id: str | None = None
    local_path: str | None = None
    config_source: str


# what the commands serve for a lone config file (`plan base.json`): no folder vLLM can load, no hub id
LONE_CONFIG_MODEL = "MODEL_DIR"


def find_local_copy(entry_or_repo: str, models_dir: Path | None) -> Path | None:
    """seed 004's layout: ``~/.cache/huggingface/models/<name>`` with config.json."""
    if models_dir is None:
        return None
    base = entry_or_repo.rstrip("/").split("/")[-1]
    for cand in (models_dir / base, models_dir / entry_or_repo):
        if (cand / "config.json").is_file():
            return cand
    return None


def _local(
    path: Path, catalog: Catalog, overrides: dict[str, Any] | None
) -> tuple[ModelFacts, CatalogEntry | None, ResolvedModel]:
    if path.is_file() and path.name != "config.json" and path.suffix == ".json":
        return _config_file(path, catalog, overrides)  # `plan Qwen3-0.6B.config.json`: that file alone
    if path.is_file():  # `plan PATH/config.json` reads like its folder
        path = path.parent
    facts = facts_from_dir(path, overrides=overrides)
    folder = path.resolve()
    entry = catalog.find(folder.name)
    return (
        facts,
        entry,
        ResolvedModel(
            name=folder.name,
            repo_id=entry.repo_id if entry else None,
            local_path=str(folder),
            config_source=str(folder / "config.json"),
        ),
    )


def _config_file(
    path: Path, catalog: Catalog, overrides: dict[str, Any] | None
) -> tuple[ModelFacts, CatalogEntry | None, ResolvedModel]:
    """A lone config file (``NAME.config.json``): planned from it; named NAME (a catalog entry when known)."""
    name = path.name.removesuffix(".json").removesuffix(".config") or path.stem
    facts = facts_from_config(read_model_config(path), source=str(path), overrides=overrides)
    entry = catalog.find(name)
    resolved = ResolvedModel(name=name, repo_id=entry.repo_id if entry else None, config_source=str(path))
    return facts, entry, resolved


def resolve_model(
    model: str, catalog: Catalog, models_dir: Path | None = None, overrides: dict[str, Any] | None = None
) -> tuple[ModelFacts, CatalogEntry | None, ResolvedModel]:
    """Local folder or config.json, catalog name / repo id (local copy, HF cache, or bundled config),
    or HF-cached repo id."""
    path = Path(model).expanduser()
    if path.exists() or model.startswith(("/", "./", "../", "~")):
        return _local(path, catalog, overrides)
    entry = catalog.find(model)
    repo_id = entry.repo_id if entry else model
    name = entry.name if entry else model.split("/")[-1]
    local = find_local_copy(entry.name if entry else model, models_dir) or (
        find_local_copy(repo_id, models_dir) if entry else None
    )
    if local is None and "/" in repo_id:
        local = find_in_hf_cache(repo_id)
    if local is not None:
        facts = facts_from_dir(local, overrides=overrides)
        return (
            facts,
            entry,
            ResolvedModel(
                name=name,
                repo_id=repo_id,
                local_path=str(local) if "snapshots" not in local.parts else None,
                config_source=str(local / "config.json"),
            ),
        )
    if entry is not None:
        return _bundled(entry, catalog, overrides)
    if "/" in model:
        raise UnknownModelError(
            f"{model} is not in a catalog and its config.json is not in the Hugging Face cache.",
            hint=f"Fetch the config first (`hf download {quote(model)} config.json`), or pass a local model "
            "folder.",
        )
    known = ", ".join(e.name for e in catalog.models)
    raise UnknownModelError(
        f"Unknown model {model!r}: not a folder, not a catalog name (known: {known}), not a repo id.",
        hint="Run `llmdeck models` for the catalog, or pass a model folder or an org/name repo id.",
    )


def _bundled(
    entry: CatalogEntry, catalog: Catalog, overrides: dict[str, Any] | None
) -> tuple[ModelFacts, CatalogEntry | None, ResolvedModel]:
    cfg = catalog.config_for(entry)
    if cfg is None:
        raise ConfigError(
            f"{entry.name} is in the catalog, but llmdeck has no config.json for it offline "
            "(none bundled, none in the Hugging Face cache or the models folder), so it cannot size it.",
            hint=f"Fetch just its config into the models folder (LLMDECK_MODELS_DIR): `llmdeck fetch "
            f"{quote(entry.repo_id)} --config-only`, then run llmdeck plan again.",
        )
    facts = facts_from_config(cfg, source=f"catalog:{entry.name} ({entry.config})", overrides=overrides)
    return (
        facts,
        entry,
        ResolvedModel(name=entry.name, repo_id=entry.repo_id, config_source=f"bundled:{entry.config}"),
    )
