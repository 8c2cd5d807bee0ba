"""A model folder's config.json is read in one place: ``llmdeck.formats.model_folder``.

Static: outside ``formats/`` no function both names a model folder's JSON file (``"config.json"``, the
safetensors index, ...) and decodes JSON. Behaviour: the
places that need a config (``up``'s model check and preflight, plan, the catalog's user configs) all
go through :func:`read_model_config`, so they give the same one-paragraph errors.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from llmdeck.errors import ConfigError, ModelPathError
from llmdeck.formats import model_folder
from llmdeck.formats.model_folder import read_index_total_size, read_model_config
from repo_paths import ROOT

SRC = ROOT / "src" / "llmdeck"
FOLDER_FILES = {
    "config.json",
    "hf_quant_config.json",
    "tokenizer_config.json",
    "model.safetensors.index.json",
    "*.safetensors.index.json",
}
# Functions that name config.json only to test it exists, and decode another file.
NAMES_ONLY = {"model/tiny.py is_tiny_model"}  # decodes its own marker file
DECODERS = {"loads", "_json_loads", "json_loads", "load", "model_validate_json", "safe_load"}


def _called(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def test_no_function_outside_formats_decodes_a_model_folder_json() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] in {"formats", "evals"} and (rel.parts[0] == "formats" or "tasks" in rel.parts):
            continue
        tree = ast.parse(path.read_text("utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            names = any(isinstance(n, ast.Constant) and n.value in FOLDER_FILES for n in ast.walk(fn))
            decodes = any(_called(n) in DECODERS for n in ast.walk(fn))
            if names and decodes and f"{rel} {fn.name}" not in NAMES_ONLY:
                offenders.append(f"{rel}:{fn.lineno} {fn.name}")
    assert offenders == [], f"a model folder's JSON decoded outside llmdeck.formats: {offenders}"


def _folder(tmp: Path, text: str) -> Path:
    (tmp / "m").mkdir()
    (tmp / "m" / "config.json").write_text(text)
    return tmp / "m"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("[1, 2]", ("not a JSON object", "not an object", "an array")),
        ('{"model_type": "qwen3",\n  "vocab_size": }', ("not valid JSON", "line 2", "column")),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", ("nests its JSON 5001 levels deep",)),
        ('{"a": ' + "[" * 100 + "]" * 100 + "}", ("nests its JSON 101 levels deep",)),
    ],
)
def test_every_reader_gives_the_same_error(tmp_path: Path, text: str, needles: tuple[str, ...]) -> None:
    from llmdeck.model.inspect import validate_model_dir
    from llmdeck.plan.modelinfo import facts_from_dir

    folder = _folder(tmp_path, text)
    messages = set()
    for read in (lambda: read_model_config(folder / "config.json"), lambda: validate_model_dir(folder)):
        with pytest.raises(ConfigError) as info:
            read()
        messages.add(info.value.message)
    with pytest.raises(ConfigError) as info:
        facts_from_dir(folder)
    messages.add(info.value.message)
    assert len(messages) == 1, messages
    message = messages.pop()
    assert all(n in message for n in needles), message


def test_the_bounds_hold_for_every_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.runtime.preflight.model_checks import read_architecture

    monkeypatch.setattr(model_folder, "MAX_CONFIG_BYTES", 64)
    folder = _folder(tmp_path, json.dumps({"architectures": ["X"], "pad": "y" * 100}))
    with pytest.raises(ConfigError, match="more than the 64"):
        read_model_config(folder / "config.json")
    assert read_architecture(folder) is None  # preflight: no architecture from a file past the cap
    monkeypatch.setattr(model_folder, "MAX_CONFIG_BYTES", 4 << 20)
    assert read_architecture(folder) == "X"


def test_missing_and_fifo(tmp_path: Path) -> None:
    import os

    with pytest.raises(ModelPathError, match="does not exist"):
        read_model_config(tmp_path / "config.json")
    os.mkfifo(tmp_path / "config.json")
    with pytest.raises(ConfigError, match="named pipe"):
        read_model_config(tmp_path / "config.json")


def test_catalog_user_config_goes_through_the_reader(tmp_path: Path) -> None:
    from llmdeck.catalog.entries import load_catalog

    (tmp_path / "bad.config.json").write_text('"x"')
    entry: dict[str, Any] = {
        "name": "Mine",
        "repo_id": "me/mine",
        "config": str(tmp_path / "bad.config.json"),
    }
    (tmp_path / "cat.yaml").write_text(json.dumps({"schema_version": 1, "models": [entry]}))
    cat = load_catalog([tmp_path / "cat.yaml"])
    with pytest.raises(ConfigError) as info:
        cat.config_for(cat.get("Mine"))
    assert (
        "Catalog entry Mine" in info.value.message
        and "not a JSON object (it holds a string" in info.value.message
    )


def test_formats_imports_only_util_and_errors() -> None:
    """The boundary sits at the bottom (the layer contract says so too): readers, not users."""
    bad = []
    for path in sorted((SRC / "formats").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmdeck"):
                top = (node.module or "").split(".")[1] if "." in (node.module or "") else ""
                if top not in {"errors", "util", "formats"}:
                    bad.append(f"{path.name}: {node.module}")
    assert bad == []


def test_index_total_size(tmp_path: Path) -> None:
    assert read_index_total_size(tmp_path) is None
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {"total_size": 1234}}')
    assert read_index_total_size(tmp_path) == 1234
    (tmp_path / "model.safetensors.index.json").write_bytes(b"\xff\xfe")
    assert read_index_total_size(tmp_path) is None


@pytest.mark.parametrize(
    ("content", "words"),
    [
        # it had said "The download was probably cut short"
        (b'\xef\xbb\xbf{"model_type": "qwen3"}', "starts with a UTF-8 byte-order mark"),
        # it had said "it holds a NoneType"
        (b"null", "not a JSON object (it holds null"),
        (b"[1]", "not a JSON object (it holds an array"),
    ],
)
def test_a_config_that_is_no_json_object_says_so_in_json_words(
    tmp_path: Path, content: bytes, words: str
) -> None:
    from llmdeck.formats.model_folder import read_model_config

    (tmp_path / "config.json").write_bytes(content)
    with pytest.raises(ConfigError, match=re.escape(words)):
        read_model_config(tmp_path / "config.json")
