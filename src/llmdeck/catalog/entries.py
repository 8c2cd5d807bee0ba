"""The model catalog: YAML data files bundled with llmdeck plus the user's own "
"(``settings.catalog_paths``)."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from llmdeck.errors import ConfigError, UnknownModelError, UsageError
from llmdeck.formats.launch_spec import EngineKind
from llmdeck.formats.model_folder import parse_model_config, read_model_config
from llmdeck.util.localfile import read_regular_text

CATALOG_SCHEMA_VERSION = 1
MAX_CATALOG_FILE_BYTES = 1 << 20  # a user catalog is a few KB (settings refuse a named file over this too)


class _Strict(BaseModel):
    """A catalog's parts: a key llmdeck does not read is a typo to name, not to drop."""

    model_config = ConfigDict(extra="forbid")


class Provenance(_Strict):
    source: str = Field(..., description="Seed file + section, fixture path, or vllm-facts.md section.")
    result: str


class CatalogEntry(_Strict):
    """One model llmdeck knows by name."""

    name: str
    repo_id: str
    size_on_disk_gb: float | None = Field(None, ge=0, allow_inf_nan=False)
    architecture: str | None = None
    architecture_verified: bool = True
    kind: str | None = None
    quantization: str | None = None
    family: str | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    thinking: bool = False
    multimodal: bool = False
    config: str | None = Field(None, description="Bundled config.json file name, or a path (user catalogs).")
    config_overrides: dict[str, Any] = Field(default_factory=dict)
    engine: EngineKind | None = Field(None, description="The engine the entry's figures come from.")
    ollama: list[str] = Field(
        default_factory=list,
        description="Ollama library names (name:tag) this entry is a vLLM build of (`migrate ollama`).",
    )
    provenance: list[Provenance] = Field(default_factory=list)
    catalog_file: str | None = None


def _version(value: str | None) -> str | None:
    """A vLLM release as the catalog writes it (0.22.0, v0.10.1.1): "banana" had turned the lint of
    the release an architecture needs off, in silence."""
    if value is not None and not re.fullmatch(r"v?\d+(\.\d+){1,3}", value.strip()):
        raise ValueError(f"{value!r} is no vLLM version: write it as 0.22.0")
    return value


Version = Annotated[str, AfterValidator(_version)]


class ArchitectureInfo(_Strict):
    min_vllm: Version
    evidence: str


class ImageInfo(_Strict):
    image: str
    vllm: Version | None = None
    below: Version | None = None
    evidence: str


class Recommendation(_Strict):
    machine: str
    workload: str
    pick: str
    context: int = Field(..., gt=0, le=2**31 - 1, description="max_model_len of the pick (tokens).")
    alternatives: list[str] = Field(default_factory=list)
    why: str


class CatalogFile(_Strict):
    schema_version: int = CATALOG_SCHEMA_VERSION
    architectures: dict[str, ArchitectureInfo] = Field(default_factory=dict)
    images: list[ImageInfo] = Field(default_factory=list)
    models: list[CatalogEntry] = Field(default_factory=list)
    recommendations: list[Recommendation] = Field(default_factory=list)


class Catalog(BaseModel):
    """All catalogs merged; later files (user catalogs) override earlier entries of the same name."""

    architectures: dict[str, ArchitectureInfo] = Field(default_factory=dict)
    images: list[ImageInfo] = Field(default_factory=list)
    models: list[CatalogEntry] = Field(default_factory=list)
    recommendations: list[Recommendation] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)

    def find(self, name: str) -> CatalogEntry | None:
        """By catalog name or HF repo id, case-insensitively."""
        key = name.strip().lower()
        for entry in self.models:
            if entry.name.lower() == key or entry.repo_id.lower() == key:
                return entry
        return None

    def get(self, name: str) -> CatalogEntry:
        entry = self.find(name)
        if entry is None:
            known = ", ".join(e.name for e in self.models)
            raise UnknownModelError(
                f"No catalog knows a model named {name!r} (known: {known}).",
                hint="Pass a local model folder or a Hugging Face repo id whose config.json is in the HF "
                "cache, "
                "or add the model to a catalog of your own (LLMDECK_CATALOG_PATHS).",
            )
        return entry

    def min_vllm_for(self, architecture: str | None) -> ArchitectureInfo | None:
        if not architecture:
            return None
        return self.architectures.get(architecture)

    def image_info(self, image: str) -> ImageInfo | None:
        for info in self.images:
            if info.image == image:
                return info
        return None

    def config_for(self, entry: CatalogEntry) -> dict[str, Any] | None:
        """The entry's config.json (bundled or a user path) with its overrides merged, or None."""
        if not entry.config:
            return None
        path = Path(entry.config)
        if not path.is_absolute():
            candidate = None
            if entry.catalog_file:
                candidate = Path(entry.catalog_file).parent / entry.config
            if candidate is not None and candidate.is_file():
                path = candidate
            else:
                bundled = resources.files("llmdeck.catalog").joinpath("data", "configs", entry.config)
                try:
                    text = bundled.read_text(encoding="utf-8")
                except (FileNotFoundError, OSError) as exc:
                    raise ConfigError(
                        f"Catalog entry {entry.name} names config {entry.config}, which is not bundled.",
                        hint="Fix the catalog entry's `config` field.",
                    ) from exc
                return _merge(parse_model_config(text, entry.config), entry.config_overrides)
        try:
            config = read_model_config(path)  # the one config.json reader: bounds and messages
        except UsageError as exc:  # missing (ModelPathError) or not a config (ConfigError)
            raise ConfigError(
                f"Catalog entry {entry.name} names config {path}, which cannot be used: {exc.message}",
                hint="Fix the catalog entry's `config` path, or fetch the config again.",
            ) from exc
        return _merge(config, entry.config_overrides)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _load_file(text: str, where: str) -> CatalogFile:
    from llmdeck.util.safeyaml import load_limited

    try:  # no anchors/aliases, bounded depth and size: a user catalog cannot exhaust memory
        data = load_limited(text, f"The catalog {where}")
    except yaml.YAMLError as exc:
        raise ConfigError(f"The catalog {where} is not valid YAML ({exc}).", hint="Fix the file.") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"The catalog {where} is not a YAML mapping.", hint="Start it with `models:`.")
    try:
        parsed = CatalogFile.model_validate(data)
    except ValidationError as exc:
        from llmdeck.formats.validation import explain

        places = explain(exc, CatalogFile, 3)
        where_why = "; ".join(f"at {'.'.join(map(str, loc))}: {why}" for loc, why in places)
        raise ConfigError(
            f"The catalog {where} is invalid {where_why}.",
            hint="Compare it with llmdeck's bundled catalog (llmdeck models --json).",
        ) from exc
    if parsed.schema_version != CATALOG_SCHEMA_VERSION:
        raise ConfigError(
            f"The catalog {where} has schema_version {parsed.schema_version}; llmdeck reads "
            f"{CATALOG_SCHEMA_VERSION}.",
            hint="Update the file or llmdeck.",
        )
    for entry in parsed.models:
        entry.catalog_file = where
    return parsed


def _user_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        p = Path(p).expanduser()
        if p.is_dir():
            found = sorted([*p.glob("*.yaml"), *p.glob("*.yml")])
            if not found:  # a misspelt folder had been taken in silence, with none of the user's models
                raise ConfigError(
                    f"The catalog folder {p} (from LLMDECK_CATALOG_PATHS) holds no .yaml or .yml file.",
                    hint="Point LLMDECK_CATALOG_PATHS at the folder of your catalog files, or at the file.",
                )
            files.extend(found)
        elif p.exists():  # a file, or a pipe or device that the read refuses, saying which
            files.append(p)
        else:
            raise ConfigError(
                f"The catalog path {p} (from LLMDECK_CATALOG_PATHS) does not exist.",
                hint="Fix LLMDECK_CATALOG_PATHS or create the file.",
            )
    return files


def load_catalog(catalog_paths: list[Path] | None = None) -> Catalog:
    """The bundled catalog plus user catalogs (files or folders of *.yaml), in that order."""
    bundled = resources.files("llmdeck.catalog").joinpath("data", "models.yaml")
    parts = [_load_file(bundled.read_text(encoding="utf-8"), "llmdeck:catalog/data/models.yaml")]
    files = ["llmdeck:catalog/data/models.yaml"]
    for path in _user_files(list(catalog_paths or [])):
        try:
            text = read_regular_text(path, MAX_CATALOG_FILE_BYTES)
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"The catalog {path} (from LLMDECK_CATALOG_PATHS) is not UTF-8 text ({exc.reason} at byte "
                f"{exc.start}), so not a YAML catalog.",
                hint="Point LLMDECK_CATALOG_PATHS at your catalog's .yaml file, or save it as UTF-8.",
            ) from exc
        except OSError as exc:
            raise ConfigError(
                f"Cannot read the catalog {path} (from LLMDECK_CATALOG_PATHS): {exc.strerror or exc}.",
                hint="Check the file, or fix LLMDECK_CATALOG_PATHS.",
            ) from exc
        parts.append(_load_file(text, str(path)))
        files.append(str(path))
    catalog = Catalog(files=files)
    for part in parts:
        catalog.architectures.update(part.architectures)
        catalog.images = [i for i in catalog.images if i.image not in {x.image for x in part.images}]
        catalog.images.extend(part.images)
        names = {m.name.lower() for m in part.models}
        catalog.models = [m for m in catalog.models if m.name.lower() not in names] + list(part.models)
        keys = {(r.machine, r.workload) for r in part.recommendations}
        catalog.recommendations = [
            r for r in catalog.recommendations if (r.machine, r.workload) not in keys
        ] + list(part.recommendations)
    return catalog
