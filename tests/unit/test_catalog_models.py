"""The catalog: bundled YAML data, provenance, user catalogs, broken catalogs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmdeck.catalog.entries import load_catalog
from llmdeck.cli.app import main
from llmdeck.errors import ConfigError, UnknownModelError
from repo_paths import ROOT, SHARED

SEEDS = SHARED / "seeds"


def test_every_entry_has_provenance_and_parsers_for_the_seed_models() -> None:
    cat = load_catalog()
    for e in cat.models:
        assert e.repo_id and e.provenance, e.name
        for p in e.provenance:
            assert p.source and p.result
    coder = cat.get("Qwen3-Coder-30B-A3B-Instruct-FP8")
    assert (coder.tool_call_parser, coder.reasoning_parser, coder.thinking) == ("qwen3_coder", None, False)
    q36 = cat.get("Qwen/Qwen3.6-35B-A3B-FP8")  # by repo id too
    assert (q36.tool_call_parser, q36.reasoning_parser, q36.thinking) == ("qwen3_coder", "qwen3", True)
    arch = cat.min_vllm_for(q36.architecture)
    assert arch is not None and arch.min_vllm == "0.17.0"


def test_provenance_cites_seed_sections_that_exist() -> None:
    if not SEEDS.is_dir():
        pytest.skip("seeds not present")
    seed004 = next(SEEDS.glob("004_*.txt")).read_text(encoding="utf-8")
    # the numbers the catalog cites for Qwen3.6-35B-A3B-FP8 are in the seed
    for needle in ("74.67 GiB", "3,795,968", "28.96x", "33.38 GiB"):
        assert needle in seed004
    entry = load_catalog().get("Qwen3.6-35B-A3B-FP8")
    assert any("74.67 GiB" in p.result and "§5.1" in p.source for p in entry.provenance)


def test_bundled_fp8_config_overrides_apply() -> None:
    cat = load_catalog()
    cfg = cat.config_for(cat.get("Qwen3-Coder-30B-A3B-Instruct-FP8"))
    assert cfg is not None and cfg["quantization_config"]["quant_method"] == "fp8"
    assert cat.config_for(cat.get("Qwen3-Coder-Next")) is None


def test_user_catalog_adds_and_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "mine.config.json"
    src = ROOT / "src/llmdeck/catalog/data/configs/Qwen3-0.6B.config.json"
    cfg.write_bytes(src.read_bytes())
    (tmp_path / "mine.yaml").write_text(
        "models:\n"
        "  - name: My-Tiny\n    repo_id: me/my-tiny\n    architecture: Qwen3ForCausalLM\n"
        "    config: mine.config.json\n    provenance: [{source: me, result: works}]\n"
        "  - name: Qwen3-0.6B\n    repo_id: Qwen/Qwen3-0.6B\n    tool_call_parser: qwen3_xml\n"
        "    config: mine.config.json\n    provenance: [{source: me, result: override}]\n"
    )
    cat = load_catalog([tmp_path])
    assert cat.get("My-Tiny").catalog_file == str(tmp_path / "mine.yaml")
    assert cat.config_for(cat.get("My-Tiny"))["num_hidden_layers"] == 28  # type: ignore[index]
    assert cat.get("Qwen3-0.6B").tool_call_parser == "qwen3_xml"
    with pytest.raises(UnknownModelError):
        cat.get("nope")


def test_broken_user_catalog_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  - name: X\n")  # no repo_id
    with pytest.raises(ConfigError, match="repo_id"):
        load_catalog([bad])
    bad.write_text("models: [unclosed\n")
    with pytest.raises(ConfigError, match=r"not (valid|acceptable) YAML"):
        load_catalog([bad])
    with pytest.raises(ConfigError, match="does not exist"):
        load_catalog([tmp_path / "missing.yaml"])


def test_models_cli_reads_user_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text("models:\n  - {name: Zed-1B, repo_id: z/zed, provenance: []}\n")
    monkeypatch.setenv("LLMDECK_CATALOG_PATHS", json.dumps([str(tmp_path)]))
    with pytest.raises(SystemExit) as exc:
        main(["models", "--json"])
    assert exc.value.code == 0
    assert "Zed-1B" in {m["name"] for m in json.loads(capsys.readouterr().out)["models"]}
    (tmp_path / "c.yaml").write_text("models: 3\n")
    with pytest.raises(SystemExit) as exc:
        main(["models"])
    assert exc.value.code == 2


def test_models_table_shows_a_catalogs_markup_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name `[bold red]Evil[/]` had been taken as styling (shown as `Evil`)."""
    (tmp_path / "c.yaml").write_text(
        'models:\n  - {name: "[bold red]Evil[/]", repo_id: "z/[link=file:///etc/passwd]x", provenance: []}\n'
    )
    monkeypatch.setenv("LLMDECK_CATALOG_PATHS", json.dumps([str(tmp_path)]))
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as exc:
        main(["models"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and "[bold red]Evil[/]" in out and "[link=file:///etc/passwd]x" in out


def test_family_entries_parsers_and_sizes_from_their_configs() -> None:
    from llmdeck.plan.modelinfo import facts_from_config
    from llmdeck.plan.params import weight_bytes

    cat = load_catalog()
    parsers = {
        "gpt-oss-120b": ("openai", "openai_gptoss", "GptOssForCausalLM"),
        "gpt-oss-20b": ("openai", "openai_gptoss", "GptOssForCausalLM"),
        "GLM-4.7-Flash": ("glm47", "glm45", "Glm4MoeLiteForCausalLM"),
        "Llama-3.1-8B-Instruct": ("llama3_json", None, "LlamaForCausalLM"),
        "Mistral-7B-Instruct-v0.3": ("mistral", None, "MistralForCausalLM"),
    }
    for name, (tool, reasoning, arch) in parsers.items():
        e = cat.get(name)
        assert (e.tool_call_parser, e.reasoning_parser, e.architecture) == (tool, reasoning, arch)
    for name in ("gpt-oss-120b", "gpt-oss-20b", "GLM-4.7-Flash", "Llama-3.1-8B-Instruct", "gemma-3-4b-it"):
        e = cat.get(name)
        cfg = cat.config_for(e)
        assert cfg is not None and e.size_on_disk_gb is not None
        f = facts_from_config(cfg, source=name)
        assert weight_bytes(f, language_model_only=False) / 1e9 == pytest.approx(e.size_on_disk_gb, rel=0.01)
    nvfp4 = cat.get("Qwen3.6-35B-A3B-NVFP4")
    cfg = cat.config_for(nvfp4)
    assert cfg is not None and facts_from_config(cfg, source="x").quantization.scheme == "nvfp4"  # type: ignore[union-attr]


@pytest.mark.parametrize("size", ["-5", ".nan", ".inf"])
def test_a_user_catalog_size_that_no_model_has_is_refused(tmp_path: Path, size: str) -> None:
    """size_on_disk_gb -5 had been listed as is, and .nan read as 'unknown'."""
    path = tmp_path / "c.yaml"
    path.write_text(
        f"schema_version: 1\nmodels:\n  - name: Mine\n    repo_id: me/mine\n    size_on_disk_gb: {size}\n"
    )
    with pytest.raises(ConfigError, match="size_on_disk_gb"):
        load_catalog([path])


@pytest.mark.parametrize(
    "text",
    [
        'architectures:\n  FooArch: {min_vllm: "not-a-version", evidence: x}\n',
        'images:\n  - {image: "weird/image:1", vllm: "banana", evidence: x}\n',
    ],
)
def test_a_user_catalog_version_that_is_no_version_is_refused(tmp_path: Path, text: str) -> None:
    """min_vllm "not-a-version" had turned the architecture's version lint off, in silence."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"is no vLLM version: write it as 0\.22\.0"):
        load_catalog([path])


def test_a_catalog_folder_with_no_catalog_file_is_refused(tmp_path: Path) -> None:
    """A misspelt folder (or catalogs saved as .json) had been taken with none of the user's models."""
    (tmp_path / "readme.txt").write_text("hi")
    with pytest.raises(ConfigError, match=r"holds no \.yaml or \.yml file"):
        load_catalog([tmp_path])


@pytest.mark.parametrize("context", ["0", "-1", "99999999999999"])
def test_a_user_catalog_recommendation_of_no_context_is_refused(tmp_path: Path, context: str) -> None:
    """`context: 0` had loaded, and `recommend` then died on it (an internal pydantic error)."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "models:\n  - {name: Mine, repo_id: me/mine}\nrecommendations:\n"
        f"  - {{machine: h200, workload: multi-user, pick: Mine, context: {context}, why: x}}\n"
    )
    with pytest.raises(ConfigError, match=r"recommendations\.0\.context"):
        load_catalog([path])


def test_a_user_catalog_engine_no_llmdeck_has_and_a_misspelt_key_are_named(tmp_path: Path) -> None:
    """``engine: banana`` had been listed (and `recommend` died on it); a misspelt key was dropped."""
    path = tmp_path / "c.yaml"
    entry = "schema_version: 1\nmodels:\n  - name: Mine\n    repo_id: me/mine\n"
    path.write_text(entry + "    engine: banana\n")
    with pytest.raises(ConfigError, match=r"models\.0\.engine: Input should be 'cpu', 'venv' or 'docker'"):
        load_catalog([path])
    path.write_text(entry + "    tool_parser: hermes\n")
    typo = r"models\.0\.tool_parser: not a key here \(the keys here: .*tool_call_parser"
    with pytest.raises(ConfigError, match=typo):
        load_catalog([path])
    path.write_text(entry + "    engine: venv\n")
    assert load_catalog([path]).get("Mine").engine == "venv"


def test_a_user_catalog_key_given_twice_is_named_with_its_line(tmp_path: Path) -> None:
    """PyYAML keeps the last of two equal keys without a word: the second `name:` had renamed the entry."""
    path = tmp_path / "c.yaml"
    path.write_text("schema_version: 1\nmodels:\n  - name: Mine\n    repo_id: me/mine\n    name: Other\n")
    with pytest.raises(
        ConfigError, match=r"at line 5: the key 'name' is given twice in one mapping \(lines 3 and 5\)"
    ):
        load_catalog([path])
