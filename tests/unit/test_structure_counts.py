"""Issue 39's countable criteria hold on this checkout (evidence/structure/measure.py counts them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from repo_paths import ROOT


def _measure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("measure", ROOT / "evidence/structure/measure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_engines_errors_and_config_json_each_have_one_home() -> None:
    found = _measure().measure(ROOT / "src/llmdeck", ROOT / "pyproject.toml")
    assert found["engine_string_tests_outside_engines"] == []
    assert found["exceptions_outside_LlmdeckError"] == []
    assert found["modules_parsing_config_json"] == ["formats/model_folder.py"]
    assert [i for i in found["imports"] if i["down_the_layers"] is False] == []


def test_the_counter_sees_what_it_counts(tmp_path: Path) -> None:
    pkg = tmp_path / "llmdeck"
    (pkg / "runtime").mkdir(parents=True)
    (pkg / "runtime" / "x.py").write_text(
        "import json\n"
        "class Gone(RuntimeError): ...\n"
        "def go(spec):\n"
        "    from llmdeck.util import net\n"
        "    return spec.engine == 'docker'\n"
        "def read_cfg(p):\n"
        "    return json.loads((p / 'config.json').read_text())\n"
    )
    (pkg / "util").mkdir()
    (pkg / "util" / "net.py").write_text("from llmdeck.runtime import x\n")
    found = _measure().measure(pkg, ROOT / "pyproject.toml")
    assert found["engine_string_tests_outside_engines"] == ["runtime/x.py:5"]
    assert found["exceptions_outside_LlmdeckError"] == ["runtime/x.py:Gone"]
    assert found["modules_parsing_config_json"] == ["runtime/x.py"]
    up = [(i["from"], i["to"]) for i in found["imports"] if i["down_the_layers"] is False]
    assert up == [("util", "runtime")]
    inside = [i for i in found["imports"] if i["where"] == "function"]
    assert [(i["from"], i["to"]) for i in inside] == [("runtime", "util")]
