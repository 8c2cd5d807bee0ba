"""validate_model_dir: what `llmdeck up` checks about a model folder before starting anything."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmdeck.errors import ConfigError, ModelPathError, UsageError
from llmdeck.model.inspect import validate_model_dir
from repo_paths import SHARED

FIXTURE_CONFIGS = SHARED / "fixtures" / "configs"


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelPathError) as info:
        validate_model_dir(tmp_path / "nope")
    assert "does not exist" in info.value.message and str(tmp_path / "nope") in info.value.message
    assert info.value.exit_code == 2


def test_file_not_dir(tmp_path: Path) -> None:
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"x")
    with pytest.raises(ModelPathError, match="not a directory"):
        validate_model_dir(f)


def test_no_config_json(tmp_path: Path) -> None:
    with pytest.raises(ModelPathError) as info:
        validate_model_dir(tmp_path)
    msg = info.value.message
    assert "has no config.json" in msg and "Hugging Face model folder" in msg and "llmdeck fetch" in msg


def test_config_not_json_reports_position(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "qwen3",\n  "vocab_size": }')
    with pytest.raises(ConfigError) as info:
        validate_model_dir(tmp_path)
    assert "line 2" in info.value.message and "column" in info.value.message
    assert isinstance(info.value, UsageError)


def test_config_not_object(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="not an object"):
        validate_model_dir(tmp_path)


def test_config_without_architecture(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"vocab_size": 10}')
    with pytest.raises(ConfigError, match="architectures"):
        validate_model_dir(tmp_path)


def test_config_only_folder(tmp_path: Path) -> None:
    """A real public config.json alone: valid, but no weights and no tokenizer."""
    src = FIXTURE_CONFIGS / "Qwen3-0.6B.config.json"
    if not src.is_file():
        pytest.skip(f"{src} is not present")
    shutil.copy(src, tmp_path / "config.json")
    info = validate_model_dir(tmp_path)
    assert info.architecture == "Qwen3ForCausalLM" and info.model_type == "qwen3"
    assert info.max_position_embeddings == 40960
    assert not info.has_weights and not info.has_tokenizer and not info.is_tiny


def test_model_type_only_and_text_config(tmp_path: Path) -> None:
    config = {"model_type": "qwen3_5_moe", "text_config": {"max_position_embeddings": 262144}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"0" * 10)
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "{{ x }}"}')
    info = validate_model_dir(tmp_path)
    assert info.architecture is None and info.model_type == "qwen3_5_moe"
    assert info.max_position_embeddings == 262144
    assert info.has_weights and info.weight_files == ["model-00001-of-00002.safetensors"]
    assert info.weight_bytes == 10
    assert info.has_tokenizer and info.has_chat_template


def test_tiny_model_is_valid(tiny_model_dir: Path) -> None:
    info = validate_model_dir(tiny_model_dir)
    assert info.architecture == "Qwen3ForCausalLM"
    assert info.has_weights and info.has_tokenizer and info.has_chat_template and info.is_tiny
