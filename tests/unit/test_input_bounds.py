"""Inputs that once crashed or hung llmdeck: absurd config.json numbers, deep JSON, broken
quantization_config, out-of-range flags, named pipes and devices given as files, unreadable state.

Each case must end in one paragraph with exit 2 (never "internal error", never a wait).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from repo_paths import ROOT

FAMILIES = ROOT / "evidence" / "plan" / "families" / "configs"
LLAMA = json.loads((FAMILIES / "llama-3.1-8b-instruct" / "config.json").read_text())


def model(tmp_path: Path, change: dict[str, Any] | None = None, text: str | None = None) -> Path:
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    cfg = {**LLAMA, **(change or {})}
    (d / "config.json").write_text(text if text is not None else json.dumps(cfg))
    return d


def plan(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code, _, err = run_cli(["plan", *args], capsys)
    assert "internal error" not in err and "Traceback" not in err and "pydantic" not in err
    return code, " ".join(err.split())


# ---- config.json numbers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_position_embeddings": 1e308}, "max_position_embeddings"),
        ({"num_hidden_layers": 10**18}, "num_hidden_layers"),
        ({"hidden_size": 10**30}, "hidden_size"),
        ({"num_attention_heads": 10**9}, "num_attention_heads"),
        ({"vocab_size": 10**30}, "vocab_size"),
        ({"num_experts": 1e300}, "num_experts"),
    ],
)
def test_absurd_sizes_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], field: str
) -> None:
    code, err = plan([str(model(tmp_path, change)), "--machine", "dgx-spark"], capsys)
    assert code == 2
    assert f"field {field}" in err and "no real model comes near" in err


def test_rope_factor_overflow_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = model(tmp_path, {"rope_scaling": {"rope_type": "yarn", "factor": 1e308}})
    code, err = plan([str(d), "--machine", "dgx-spark"], capsys)
    assert code == 2 and "context length" in err and "rope_scaling" in err


def test_deep_json_is_refused_before_parsing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    code, err = plan([str(model(tmp_path, text=deep)), "--machine", "dgx-spark"], capsys)
    assert code == 2 and "nests its JSON 100001 levels deep" in err


def test_broken_quantization_config_names_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = model(tmp_path, {"quantization_config": {"quant_method": "fp8", "weight_block_size": "x"}})
    code, err = plan([str(d), "--machine", "dgx-spark"], capsys)
    assert code == 2 and "quantization_config.weight_block_size" in err


def test_heads_that_do_not_divide_hidden_size_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = model(tmp_path, {"num_attention_heads": 7, "num_key_value_heads": 7, "head_dim": None})
    code, err = plan([str(d), "--machine", "dgx-spark"], capsys)
    assert code == 2 and "field num_attention_heads is 7" in err and "fractional" in err
    d2 = model(tmp_path, {"num_attention_heads": 32, "num_key_value_heads": 7})
    code, err = plan([str(d2), "--machine", "dgx-spark"], capsys)
    assert code == 2 and "num_key_value_heads is 7" in err


def test_a_given_head_dim_allows_any_head_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = model(tmp_path, {"num_attention_heads": 7, "num_key_value_heads": 7, "head_dim": 128})
    code, err = plan([str(d), "--machine", "dgx-spark", "--json"], capsys)
    assert code == 0, err


def test_a_lone_config_file_is_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "Llama-x.config.json"
    f.write_text(json.dumps(LLAMA))
    code, out, err = run_cli(["plan", str(f), "--machine", "dgx-spark", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["model"]["config_source"] == str(f)


# ---- flags ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--", "--kv-cache-memory-bytes", "1e999"], "is not a size"),
        (["--", "--kv-cache-memory-bytes", "-5"], "out of range"),
        (["--", "--max-num-batched-tokens", "1e999"], "needs a whole number"),
        (["--", "--tensor-parallel-size", "0"], "--tensor-parallel-size 0 is out of range"),
        (["--", "--max-num-seqs", "-1"], "--max-num-seqs -1 is out of range"),
        (["--", "--max-model-len", "0"], "--max-model-len 0 is out of range"),
        (["--", "--kv-cache-dtype", "fp3"], "not one of vLLM's choices"),
        (["--name", "$(id)"], "is not a valid server name"),
        (["--vllm-version", "banana"], "'banana' is not a version"),
    ],
)
def test_bad_flags_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str
) -> None:
    code, err = plan([str(model(tmp_path)), "--machine", "dgx-spark", *args], capsys)
    assert code == 2 and words in err


def test_negative_seeds_are_refused_by_the_request_models() -> None:
    from pydantic import ValidationError

    from llmdeck.bench.request import BenchRequest
    from llmdeck.tune.schema import TuneRequest

    for model_cls, seed in ((BenchRequest, -5), (TuneRequest, -1), (TuneRequest, 2**32)):
        with pytest.raises(ValidationError) as info:
            model_cls.model_validate({"seed": seed})
        assert ("seed",) in [e["loc"] for e in info.value.errors()]


def test_tokenizer_folder_without_tokenizer_files(tmp_path: Path) -> None:
    from llmdeck.bench.workloads import load_tokenizer
    from llmdeck.errors import ModelPathError

    with pytest.raises(ModelPathError, match="has no tokenizer files"):
        load_tokenizer(model(tmp_path))


def test_tokenizer_folder_that_does_not_exist(tmp_path: Path) -> None:
    """It was "(OSError: Repo id must use alphanumeric chars ...)": a Python type and the hub's words."""
    from llmdeck.bench.workloads import load_tokenizer
    from llmdeck.errors import ModelPathError

    with pytest.raises(ModelPathError, match="does not exist") as info:
        load_tokenizer(tmp_path / "no-such-tokenizer")
    assert "OSError" not in info.value.render()


def test_python_that_is_not_an_executable(tmp_path: Path) -> None:
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.errors import UsageError
    from llmdeck.runtime.launcher import validate_spec

    d = model(tmp_path)
    plain = tmp_path / "python"
    plain.write_text("")
    for python in (tmp_path, plain):
        spec = LaunchSpec(name="x", engine="venv", model=str(d), python=str(python))
        with pytest.raises(UsageError, match="is not an executable"):
            validate_spec(spec)


def test_spec_schema_version_must_be_an_integer(tmp_path: Path) -> None:
    from llmdeck.engines.spec import read_spec_file
    from llmdeck.errors import ConfigError

    f = tmp_path / "s.json"
    f.write_text(json.dumps({"schema_version": "1", "name": "x", "model": "m"}))
    with pytest.raises(ConfigError, match="must be an integer"):
        read_spec_file(f)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        # a misspelt field had been dropped: the server started without its --max-model-len
        ({"vllm_arg": ["--max-model-len", "4096"]}, "field vllm_arg: not a key here (the keys here: "),
        # these had died in Popen, an internal error after "starting"
        ({"env": {"A=B": "x"}}, "field env: 'A=B' is not an environment variable name"),
        ({"env": {"": "x"}}, "field env: '' is not an environment variable name"),
        ({"env": {"A": "x\x00y"}}, "a value holds a NUL byte"),
        ({"vllm_args": ["--x\x00"]}, "a value holds a NUL byte"),
    ],
)
def test_a_spec_field_no_launch_can_take_is_named(
    tmp_path: Path, extra: dict[str, object], words: str
) -> None:
    from llmdeck.engines.spec import read_spec_file
    from llmdeck.errors import ConfigError

    f = tmp_path / "s.json"
    f.write_text(json.dumps({"schema_version": 1, "name": "x", "model": "m", **extra}))
    with pytest.raises(ConfigError, match=re.escape(words)):
        read_spec_file(f)


# ---- files that are not files --------------------------------------------------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    p = tmp_path / "fifo.json"
    os.mkfifo(p)
    return p


def test_read_regular_refuses_pipes_and_devices(fifo: Path) -> None:
    from llmdeck.util.localfile import FileTooLargeError, NotRegularFileError, read_regular

    with pytest.raises(NotRegularFileError, match="named pipe"):
        read_regular(fifo)
    with pytest.raises(NotRegularFileError, match="device"):
        read_regular(Path("/dev/zero"))
    big = fifo.parent / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(FileTooLargeError):
        read_regular(big, 10)
    assert read_regular(big, 10, head=True) == b"x" * 10


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{f}"],
        ["gateway", "up", "--config", "{f}"],
        ["gateway", "up", "--config", "/dev/zero"],
        ["plan", "{d}", "--machine", "dgx-spark"],
        ["up", "--spec", "{f}"],
    ],
)
def test_pipes_and_devices_are_refused_not_waited_on(
    fifo: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    d = fifo.parent / "mf"
    d.mkdir()
    os.mkfifo(d / "config.json")
    code, _, err = run_cli([a.format(f=fifo, d=d) for a in argv], capsys)
    assert code == 2, err
    assert "named pipe" in err or "device" in err


def test_connect_refuses_a_pipe_as_its_file(fifo: Path) -> None:
    from llmdeck.connect.write import read_json
    from llmdeck.errors import ConfigError, UsageError
    from llmdeck.util.atomic import check_writable

    with pytest.raises(UsageError, match="named pipe"):
        check_writable(fifo)
    with pytest.raises(ConfigError, match="named pipe"):
        read_json(fifo)


# ---- the state directory -------------------------------------------------------------------


def test_non_utf8_server_record_is_skipped_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = tmp_path / "state" / "servers"
    servers.mkdir(parents=True)
    (servers / "bad.json").write_bytes(b"\xff\xfe")
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    for argv in (["status"], ["status", "--json"], ["down", "--all"]):
        code, _, err = run_cli(argv, capsys)
        assert code == 0, err
        flat = "".join(err.split())  # the console wraps long lines
        assert "bad.json(notUTF-8text)" in flat


def test_log_path_that_is_a_folder(tmp_path: Path) -> None:
    from llmdeck.engines.logfiles import read_tail
    from llmdeck.errors import UsageError

    (tmp_path / "x.log").mkdir()
    with pytest.raises(UsageError, match="it is a folder"):
        read_tail(tmp_path / "x.log")
    assert read_tail(tmp_path / "missing.log") == ""


def test_gateway_state_that_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gateway").write_text("x")
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path))
    code, _, err = run_cli(["keys", "create", "x"], capsys)
    assert code == 2 and "gateway is a file, not a folder" in " ".join(err.split())


def test_make_tiny_under_a_file(tmp_path: Path) -> None:
    from llmdeck.errors import ModelPathError
    from llmdeck.model.tiny import make_tiny_model

    (tmp_path / "afile").write_text("x")
    with pytest.raises(ModelPathError, match="is a file, not a folder"):
        make_tiny_model(tmp_path / "afile" / "sub")
    assert stat.S_ISREG((tmp_path / "afile").stat().st_mode)


@pytest.mark.parametrize("dtype", ["fp8_e5m2", "nvfp4", "turboquant_k8v4", "fp8_per_token_head"])
def test_every_kv_cache_dtype_some_vllm_takes_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: str
) -> None:
    """The union of vLLM 0.22's and 0.32's choices: refusing what vLLM takes is worse than a typo."""
    code, _ = plan([str(model(tmp_path)), "--machine", "dgx-spark", "--", "--kv-cache-dtype", dtype], capsys)
    assert code == 0


def test_a_client_config_nested_too_deep_is_a_config_error(tmp_path: Path) -> None:
    """connect merges into the client's JSON file: one nested past the decoder is refused, not a bug."""
    from llmdeck.connect.write import read_json
    from llmdeck.errors import ConfigError

    path = tmp_path / "opencode.json"
    path.write_text("[" * 100_000)
    with pytest.raises(ConfigError, match="nested too deep"):
        read_json(path)


def test_a_folder_setting_this_user_may_not_look_into_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """LLMDECK_MODELS_DIR=/root/models for a user who may not enter /root: Path.exists() raises
    PermissionError, which had been an internal error of every command."""
    locked = tmp_path / "locked"
    real_stat = Path.stat

    def denied(self: Path, **kw: Any) -> Any:
        if str(self).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(self))
        return real_stat(self, **kw)

    monkeypatch.setattr(Path, "stat", denied)
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_MODELS_DIR", str(locked / "models"))
    code, _, err = run_cli(["eval", "tasks"], capsys)
    assert code == 2 and "LLMDECK_MODELS_DIR" in err and "Permission denied" in err, err
    assert "internal error" not in err


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "{p}", "--machine", "h200"],
        ["up", "--model", "{p}", "--engine", "cpu"],
        ["report", "{p}"],
        ["keys", "list", "--keys-file", "{p}"],
        ["model", "make-tiny", "{p}"],
    ],
)
def test_a_name_longer_than_the_file_system_takes_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """One name of a path over 255 bytes: pathlib's exists() raises ENAMETOOLONG where it returns False
    for a missing path, and every command that looked at such a path had been an internal error."""
    path = str(tmp_path / ("a" * 300))
    code, _, err = run_cli([a.replace("{p}", path) for a in args], capsys)
    words = " ".join(err.split())
    assert code == 2 and "internal error" not in err
    assert "is too long for the file system" in words and "characters)" in words
    assert "a" * 61 not in words[words.index("error:") :]  # the message shortens the path


class _FullDisk:
    """stdout redirected to a file on a full disk: every write fails as the kernel says (ENOSPC)."""

    def write(self, text: str) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("args", [["models", "--json"], ["models"]])
def test_stdout_on_a_full_disk_is_a_failed_write_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """`llmdeck models --json > out.json` on a full disk had been an internal error ("a bug in
    llmdeck") and, under --json, a traceback: its JSON error object failed on the same stdout."""
    monkeypatch.setattr("sys.stdout", _FullDisk())
    code, _, err = run_cli(args, capsys)
    assert code == 1 and "Cannot write the output: No space left on device" in err
    assert "internal error" not in err and "Traceback" not in err


def test_a_prompts_file_past_the_cap_is_refused_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench/tune --prompts` had read the file whole (`read_bytes`, no cap); now it reads through
    read_regular with a bound and says what to do (the cap made small here to keep the test light)."""
    from llmdeck.bench import workloads
    from llmdeck.errors import UsageError

    monkeypatch.setattr(workloads, "MAX_PROMPTS_BYTES", 1000)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hi"}\n' * 100)
    with pytest.raises(UsageError) as info:
        workloads.read_prompt_rows(prompts)
    said = info.value.render()
    assert f"--prompts {prompts} cannot be read (it is 1,700 bytes, more than the 1,000" in said, said
    assert "head -n" in said
    prompts.write_text('{"prompt": "hi"}\n' * 10)
    assert len(workloads.read_prompt_rows(prompts)) == 10


def test_a_broken_config_names_its_file_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`plan DIR` and `plan DIR/config.json` had said "The config.json of DIR/config.json lacks ..."."""
    d = model(tmp_path, text=json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 64}))
    for target in (d, d / "config.json"):
        code, _out, err = run_cli(["plan", str(target)], capsys)
        flat = " ".join(err.split())
        assert code == 2 and f"error: {d / 'config.json'} lacks num_hidden_layers" in flat, flat
        assert "config.json of" not in flat
