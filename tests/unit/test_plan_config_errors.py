"""Bad config.json files: one paragraph naming the file and the field, exit 2, never a traceback.

Also `plan PATH/config.json` (a file reads like its folder) and `plan --json`'s error object when
the model does not fit (scripts read stdout).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from repo_paths import ROOT

FAMILIES = ROOT / "evidence" / "plan" / "families" / "configs"
LLAMA = json.loads((FAMILIES / "llama-3.1-8b-instruct" / "config.json").read_text())


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(args, capsys)


def write(tmp_path: Path, content: Any) -> Path:
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(content if isinstance(content, str) else json.dumps(content))
    return d


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"num_attention_heads": 0}, "num_attention_heads", "it must be positive"),
        ({"hidden_size": -4096}, "hidden_size", "it must be positive"),
        ({"num_hidden_layers": "32"}, "num_hidden_layers", 'is "32", not a whole number'),
        ({"intermediate_size": 14336.5}, "intermediate_size", "not a whole number"),
        ({"num_key_value_heads": True}, "num_key_value_heads", "not a whole number"),
        ({"vocab_size": None}, "vocab_size", "lacks"),
        ({"layer_types": "full_attention"}, "layer_types", "not a list"),
        ({"num_experts": 4, "num_experts_per_tok": 100}, "num_experts_per_tok", "more than the 4 experts"),
    ],
)
def test_bad_sizes_name_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], field: str, why: str
) -> None:
    d = write(tmp_path, {**LLAMA, **change})
    rc, out, err = run(["plan", str(d), "--machine", "h200"], capsys)
    assert rc == 2 and out == ""
    assert str(d / "config.json") in err and field in err and why in err
    assert "Traceback" not in err and "ZeroDivisionError" not in err and "KeyError" not in err


def test_missing_key_without_any_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {k: v for k, v in LLAMA.items() if k not in ("hidden_size", "model_type")}
    rc, _, err = run(["plan", str(write(tmp_path, cfg)), "--machine", "h200"], capsys)
    assert rc == 2 and "hidden_size" in err and "config.json" in err


def test_missing_key_with_a_library_default_is_filled_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # vLLM builds LlamaConfig from the file, so transformers' default hidden_size applies there too
    cfg = {k: v for k, v in LLAMA.items() if k != "hidden_size"}
    rc, out, _ = run(["plan", str(write(tmp_path, cfg)), "--machine", "h200", "--json"], capsys)
    facts = json.loads(out)["facts"]
    assert rc in (0, 1) and facts["hidden_size"] == 4096 and "hidden_size" in facts["defaults_used"]
    assert facts["defaults_source"].startswith("transformers")


@pytest.mark.parametrize(
    ("content", "needle"), [("[1, 2]", "not a JSON object"), ('{"a": ', "not valid JSON"), ('"x"', "str")]
)
def test_not_an_object_or_not_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str
) -> None:
    d = write(tmp_path, content)
    rc, _, err = run(["plan", str(d / "config.json"), "--machine", "h200"], capsys)
    assert rc == 2 and needle in err and "config.json" in err and "Traceback" not in err


def test_nested_text_config_field_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = json.loads((FAMILIES / "gemma-3-4b-it" / "config.json").read_text())
    cfg["text_config"]["num_attention_heads"] = 0
    rc, _, err = run(["plan", str(write(tmp_path, cfg)), "--machine", "h200"], capsys)
    assert rc == 2 and "text_config.num_attention_heads" in err


def test_plan_config_json_file_is_its_folder(capsys: pytest.CaptureFixture[str]) -> None:
    folder = FAMILIES / "gpt-oss-20b"
    rc1, out1, _ = run(["plan", str(folder), "--machine", "h200", "--engine", "venv", "--json"], capsys)
    rc2, out2, _ = run(
        ["plan", str(folder / "config.json"), "--machine", "h200", "--engine", "venv", "--json"], capsys
    )
    a, b = json.loads(out1), json.loads(out2)
    assert rc1 == rc2
    assert a["memory"]["capacity"] == b["memory"]["capacity"]
    assert b["model"]["local_path"] == str(folder.resolve())


def test_json_error_object_when_the_model_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(
        ["plan", str(FAMILIES / "qwen3-next-80b-a3b"), "--machine", "h200", "--engine", "venv", "--json"],
        capsys,
    )
    assert rc == 2
    doc = json.loads(out)
    assert doc["error"]["kind"] == "does-not-fit" and doc["error"]["exit_code"] == 2
    assert "does not fit" in doc["error"]["message"]
    assert doc["plan"]["memory"]["available_kv_gib"] < 0
    assert "does not fit" in err


@pytest.mark.parametrize(
    ("change", "field", "value"),
    [
        ({"torch_dtype": "float1024"}, "torch_dtype", '"float1024"'),
        ({"dtype": 16}, "dtype", "16"),
        ({"quantization_config": "fp8"}, "quantization_config", '"fp8"'),
        ({"architectures": []}, "architectures", "[]"),
        ({"architectures": "LlamaForCausalLM"}, "architectures", '"LlamaForCausalLM"'),
        ({"model_type": ["qwen3"]}, "model_type", '["qwen3"]'),
        ({"rope_scaling": "yarn"}, "rope_scaling", '"yarn"'),
        ({"text_config": [1]}, "text_config", "[1]"),
        ({"vision_config": 5}, "vision_config", "5"),
    ],
)
def test_fields_of_the_wrong_shape_name_the_field_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], field: str, value: str
) -> None:
    """A dtype no torch has, a quantization_config that is no object, no architecture, a model_type
    that is no name: exit 2 naming the field, what it holds and what is expected (it used to plan)."""
    d = write(tmp_path, {**LLAMA, **change})
    rc, out, err = run(["plan", str(d), "--machine", "h200"], capsys)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert f"field {field} is {value}, not a" in err and str(d / "config.json") in err


def test_a_quant_method_that_is_no_name_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``quant_method: 5`` had planned as an unquantized model of method "5"."""
    d = write(tmp_path, {**LLAMA, "quantization_config": {"quant_method": 5}})
    rc, out, err = run(["plan", str(d), "--machine", "h200"], capsys)
    assert rc == 2 and out == "" and "has quant_method 5, not a method name" in err


@pytest.mark.parametrize(
    ("rope", "needle"),
    [
        ({"rope_type": "yarn", "factor": -1}, "field rope_scaling.factor is -1, not a positive number"),
        ({"rope_type": "yarn", "factor": "x"}, 'field rope_scaling.factor is "x", not a positive number'),
        ({"rope_type": "yarn", "factor": 1e300}, "Fix rope_scaling.factor"),
        (
            {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": "big"},
            "rope_scaling.original_max_position_embeddings",
        ),
    ],
)
def test_a_bad_rope_scaling_is_named_not_max_position_embeddings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rope: dict[str, Any], needle: str
) -> None:
    d = write(tmp_path, {**LLAMA, "rope_scaling": rope})
    rc, _, err = run(["plan", str(d), "--machine", "h200"], capsys)
    assert rc == 2 and needle in err and "Fix max_position_embeddings" not in err


@pytest.mark.parametrize("kind", ["loop", "two-link-loop", "dangling"])
def test_a_config_json_link_that_leads_nowhere_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A symlink loop used to read as "has no config.json"; `up`'s model check says the same."""
    from llmdeck.errors import ConfigError
    from llmdeck.model.inspect import validate_model_dir

    d = tmp_path / "m"
    d.mkdir()
    target = {"loop": "config.json", "two-link-loop": "other", "dangling": "/nonexistent/config.json"}[kind]
    (d / "config.json").symlink_to(target)
    if kind == "two-link-loop":
        (d / "other").symlink_to("config.json")
    says = "does not exist (a broken link)" if kind == "dangling" else "is a symbolic link that loops"
    for arg in (d, d / "config.json"):
        rc, out, err = run(["plan", str(arg), "--machine", "h200"], capsys)
        assert rc == 2 and out == "" and says in err and "has no config.json" not in err
    with pytest.raises(ConfigError, match="symbolic link"):
        validate_model_dir(d)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hidden_size": 1e308}, "hidden_size"),
        ({"torch_dtype": "float1024"}, "torch_dtype"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": "x"}}, "rope_scaling.factor"),
    ],
)
def test_up_checks_a_local_config_as_plan_does_before_starting(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    """`up --model DIR` validated only that config.json parsed: a hidden_size of 1e308 went on to the
    engine. The spec's validation (before any port, preflight or engine) now refuses it, exit 2."""
    import sys

    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.errors import ConfigError
    from llmdeck.runtime.launcher import validate_spec

    d = write(tmp_path, {**LLAMA, **change})
    spec = LaunchSpec(name="t", engine="venv", model=str(d), python=sys.executable)
    with pytest.raises(ConfigError) as info:
        validate_spec(spec)
    assert info.value.exit_code == 2 and f"field {field}" in info.value.render()
    validate_spec(spec.model_copy(update={"model": str(FAMILIES / "gemma-3-4b-it")}))  # a good one passes


def test_up_leaves_sizes_plan_cannot_read_to_the_engine(tmp_path: Path) -> None:
    """A model plan cannot size (an encoder-decoder names d_model, not hidden_size) may still be served."""
    import sys

    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.launcher import validate_spec

    cfg = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "d_model": 1280}
    validate_spec(LaunchSpec(name="t", engine="venv", model=str(write(tmp_path, cfg)), python=sys.executable))


CT_CHANNEL = {
    "quant_method": "compressed-tensors",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "strategy": "channel", "group_size": -1},
        }
    },
}


def test_quantization_bits_no_checkpoint_has_are_exit_2_and_a_channel_scale_is_priced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gptq bits -64 had priced the weights at -2.98 GiB and group_size -1 (a scale per channel) at
    -0.32 GiB, exit 0."""
    bad = write(tmp_path, {**LLAMA, "quantization_config": {"quant_method": "gptq", "bits": -64}})
    rc, out, err = run(["plan", str(bad), "--machine", "h200"], capsys)
    assert rc == 2 and out == "" and "-64 bits" in err
    channel = tmp_path / "channel"
    channel.mkdir()
    (channel / "config.json").write_text(json.dumps({**LLAMA, "quantization_config": CT_CHANNEL}))
    rc, out, err = run(["plan", str(channel), "--machine", "h200", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["memory"]["weights_gib"] > 3  # 8 B params at 4 bits: ~4 GiB, not negative
