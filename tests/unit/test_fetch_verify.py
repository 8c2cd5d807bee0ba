"""Verification of downloaded model folders: real safetensors files written with `safetensors`."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from llmdeck.fetch.verify import verify_model_files
from llmdeck.formats.safetensors import SafetensorsHeaderError, read_safetensors_header


def write_sharded_model(folder: Path) -> dict[str, int]:
    """A two-shard model with an index, as the hub lays it out; returns the real file sizes."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    shard1 = {
        "model.embed_tokens.weight": rng.standard_normal((64, 16), dtype=np.float32),
        "model.norm.weight": np.ones((16,), dtype=np.float16),
    }
    shard2 = {"model.layers.0.mlp.up_proj.weight": rng.standard_normal((32, 16)).astype(np.float32)}
    save_file(shard1, str(folder / "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
    save_file(shard2, str(folder / "model-00002-of-00002.safetensors"), metadata={"format": "pt"})
    weight_map = {k: "model-00001-of-00002.safetensors" for k in shard1}
    weight_map.update({k: "model-00002-of-00002.safetensors" for k in shard2})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map})
    )
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    return {p.name: p.stat().st_size for p in folder.iterdir()}


def test_good_folder_verifies(tmp_path: Path) -> None:
    sizes = write_sharded_model(tmp_path)
    report = verify_model_files(tmp_path, expected_sizes=sizes)
    assert report.ok, report.problems
    assert report.sizes_checked
    by_name = {c.name: c for c in report.checked_files}
    assert by_name["model-00001-of-00002.safetensors"].tensors == 2
    assert by_name["model-00002-of-00002.safetensors"].tensors == 1
    assert "config.json" in by_name  # size compared


def test_header_parses_real_file(tmp_path: Path) -> None:
    write_sharded_model(tmp_path)
    tensors = read_safetensors_header(tmp_path / "model-00001-of-00002.safetensors")
    assert set(tensors) == {"model.embed_tokens.weight", "model.norm.weight"}


def test_truncated_shard_fails(tmp_path: Path) -> None:
    write_sharded_model(tmp_path)
    shard = tmp_path / "model-00002-of-00002.safetensors"
    data = shard.read_bytes()
    shard.write_bytes(data[:-100])  # an interrupted download
    report = verify_model_files(tmp_path)
    assert not report.ok
    assert any("model-00002-of-00002.safetensors" in p and "truncated" in p for p in report.problems)
    with pytest.raises(SafetensorsHeaderError):
        read_safetensors_header(shard)


def test_garbage_and_empty_files_fail(tmp_path: Path) -> None:
    write_sharded_model(tmp_path)
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"<html>502 Bad Gateway</html>" * 3)
    (tmp_path / "extra.safetensors").write_bytes(b"")
    report = verify_model_files(tmp_path)
    assert not report.ok
    names = " ".join(report.problems)
    assert "model-00001-of-00002.safetensors" in names and "extra.safetensors" in names


def test_header_not_json(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", 4) + b"nope")
    with pytest.raises(SafetensorsHeaderError, match="JSON"):
        read_safetensors_header(path)


def test_wrong_dtype_size_fails(tmp_path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}).encode()
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(SafetensorsHeaderError, match="expected 16"):
        read_safetensors_header(path)


def test_missing_shard_fails_unless_config_only(tmp_path: Path) -> None:
    write_sharded_model(tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    report = verify_model_files(tmp_path)
    assert not report.ok and report.missing_files == ["model-00002-of-00002.safetensors"]
    relaxed = verify_model_files(tmp_path, require_shards=False)
    assert relaxed.ok and relaxed.missing_files == []


def test_size_mismatch_with_hub_metadata_fails(tmp_path: Path) -> None:
    sizes = write_sharded_model(tmp_path)
    sizes["config.json"] += 1
    report = verify_model_files(tmp_path, expected_sizes=sizes)
    assert not report.ok
    assert any(p.startswith("config.json:") and "the hub says" in p for p in report.problems)


def test_bad_index_fails(tmp_path: Path) -> None:
    write_sharded_model(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": [1]}')
    report = verify_model_files(tmp_path)
    assert not report.ok and "index" in report.problems[0]


def test_hub_cache_folder_is_ignored(tmp_path: Path) -> None:
    write_sharded_model(tmp_path)
    partial = tmp_path / ".cache" / "huggingface" / "download"
    partial.mkdir(parents=True)
    (partial / "model-00002-of-00002.safetensors.incomplete").write_bytes(b"12")
    (partial / "junk.safetensors").write_bytes(b"12")
    assert verify_model_files(tmp_path).ok


def test_an_index_shard_outside_the_folder_fails_verification(tmp_path: Path) -> None:
    """`weight_map: {"w": "../../../../etc/passwd"}` had been "verified": the file is there."""
    write_sharded_model(tmp_path / "m")
    index = tmp_path / "m" / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    doc["weight_map"]["extra.weight"] = "../../../../etc/passwd"
    index.write_text(json.dumps(doc))
    report = verify_model_files(tmp_path / "m")
    assert not report.ok and any("not a file of this folder" in p for p in report.problems)
