"""Inspect a local model folder before serving it (used by ``llmdeck up``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.errors import ConfigError, ModelPathError
from llmdeck.formats.model_folder import broken_link_error, has_chat_template, read_model_config

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model", "qwen.tiktoken")


class ModelDirInfo(BaseModel):
    """What a Hugging Face model folder holds, read from its files (nothing is loaded)."""

    path: str
    architecture: str | None = Field(None, description="architectures[0] from config.json.")
    architectures: list[str] = Field(default_factory=list)
    model_type: str | None = None
    max_position_embeddings: int | None = None
    has_weights: bool = False
    weight_files: list[str] = Field(default_factory=list)
    weight_bytes: int = 0
    has_tokenizer: bool = False
    has_chat_template: bool = False
    is_tiny: bool = False


def _config_path(path: Path) -> Path:
    """``path/config.json``; ModelPathError when ``path`` is not a model folder."""
    for link in (path, path / "config.json"):
        if (broken := broken_link_error(link)) is not None:
            raise broken
    if not path.exists():
        raise ModelPathError(
            f"The model path {path} does not exist: there is no folder (or file) there, so it is not a "
            "model folder.",
            hint="Give a local model folder (e.g. one made by `llmdeck model make-tiny DIR`), "
            "or download one with `llmdeck fetch REPO_ID`.",
        )
    if not path.is_dir():
        raise ModelPathError(
            f"The model path {path} is a file, not a directory; a model is a folder with config.json, "
            "weights and tokenizer files.",
            hint="Pass the folder that contains config.json.",
        )
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ModelPathError(
            f"The model folder {path} has no config.json; is this a Hugging Face model folder? "
            "For a repo id use `llmdeck fetch`.",
            hint="Point at the folder that holds config.json, or run `llmdeck fetch REPO_ID` first.",
        )
    return config_path


def _max_positions(config: dict[str, object]) -> int | None:
    """``max_position_embeddings``, at the top or in ``text_config`` (multimodal models)."""
    max_pos = config.get("max_position_embeddings")
    if isinstance(max_pos, int):
        return max_pos
    text_config = config.get("text_config")
    if isinstance(text_config, dict) and isinstance(text_config.get("max_position_embeddings"), int):
        return int(text_config["max_position_embeddings"])
    return None


def validate_model_dir(path: Path) -> ModelDirInfo:
    """Check that ``path`` is a Hugging Face model folder and describe it.

    Raises :class:`ModelPathError` if it does not exist, is not a directory or has no
    ``config.json``; :class:`ConfigError` if ``config.json`` is not a JSON object naming
    ``architectures`` or ``model_type``.
    """
    path = Path(path).expanduser()
    config_path = _config_path(path)
    config = read_model_config(config_path)
    raw_arch = config.get("architectures")
    architectures = [a for a in raw_arch if isinstance(a, str)] if isinstance(raw_arch, list) else []
    model_type = config.get("model_type")
    if not architectures and not isinstance(model_type, str):
        raise ConfigError(
            f"{config_path} names neither `architectures` nor `model_type`, so no engine can tell which "
            "model this is.",
            hint="Re-download the model's config.json (llmdeck fetch REPO_ID --config-only).",
        )
    max_pos = _max_positions(config)
    weights = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    has_tokenizer = any((path / name).is_file() for name in TOKENIZER_FILES)
    has_template = has_chat_template(path)

    from llmdeck.model.tiny import is_tiny_model

    return ModelDirInfo(
        path=str(path.resolve()),
        architecture=architectures[0] if architectures else None,
        architectures=architectures,
        model_type=model_type if isinstance(model_type, str) else None,
        max_position_embeddings=max_pos if isinstance(max_pos, int) else None,
        has_weights=bool(weights),
        weight_files=[p.name for p in weights],
        weight_bytes=sum(p.stat().st_size for p in weights),
        has_tokenizer=has_tokenizer,
        has_chat_template=has_template,
        is_tiny=is_tiny_model(path),
    )
