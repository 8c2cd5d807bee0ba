"""`llmdeck plan`, `models`, `recommend` through the real CLI entry point (exit codes and messages)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmdeck.cli.app import main
from llmdeck.engines.spec import LaunchSpec
from repo_paths import ROOT

SEED000_2048 = [
    "--max-model-len",
    "131072",
    "--gpu-memory-utilization",
    "0.85",
    "--enable-prefix-caching",
    "--reasoning-parser",
    "qwen3",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--kv-cache-dtype",
    "fp8",
    "--max-num-seqs",
    "8",
    "--max-num-batched-tokens",
    "2048",
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return int(code) if isinstance(code, int) else 1, out, err


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("LLMDECK_CATALOG_PATHS", raising=False)


def test_seed000_2048_exits_1_with_the_vllm_error_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["plan", "Qwen3.6-35B-A3B-FP8", "--machine", "h200", "--engine", "venv", "--", *SEED000_2048], capsys
    )
    assert code == 1
    assert "In Mamba cache align mode, block_size (2096) must be <= max_num_batched_tokens (2048)." in out
    assert "--max-num-batched-tokens 4192" in out
    assert "hybrid-block-size-exceeds-batched-tokens" in err
    assert "vllm serve Qwen/Qwen3.6-35B-A3B-FP8" in out  # the plan is still printed


def test_json_plan_and_spec_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_path = tmp_path / "spec.json"
    fixed = [a if a != "2048" else "4192" for a in SEED000_2048]
    code, out, _ = run(
        [
            "plan",
            "Qwen3.6-35B-A3B-FP8",
            "--machine",
            "h200",
            "--engine",
            "venv",
            "--port",
            "8011",
            "--name",
            "q36",
            "--spec-out",
            str(spec_path),
            "--json",
            "--",
            *fixed,
            "--language-model-only",
            "--default-chat-template-kwargs",
            '{"enable_thinking": false}',
        ],
        capsys,
    )
    assert code == 0, out
    data = json.loads(out)
    assert data["schema_version"] == 2 and data["llmdeck_version"]
    assert data["memory"]["layout"]["block_size"] == 2096
    assert data["memory"]["capacity"]["max_concurrency"] > 30
    # seed 000's command with its faults fixed: only the cost of its fp8 KV cache on a hybrid is left
    assert [(f["rule"], f["severity"]) for f in data["findings"]] == [
        ("hybrid-fp8-kv-coarsens-prefix-cache", "info")
    ]
    spec = LaunchSpec.model_validate_json(spec_path.read_text())
    assert spec.name == "q36" and spec.port == 8011 and spec.engine == "venv"
    assert "--max-num-batched-tokens" in spec.vllm_args and "--port" not in spec.vllm_args
    assert data["commands"]["docker"][:3] == ["docker", "run", "-d"]


def test_equals_form_after_double_dash(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        [
            "plan",
            "Qwen3-0.6B",
            "--machine",
            "h200",
            "--json",
            "--",
            "--max-model-len=8192",
            "--default-chat-template-kwargs",
            '{"enable_thinking": false}',
            "--enable-auto-tool-choice",
            "--tool-call-parser=hermes",
            "--reasoning-parser=qwen3",
        ],
        capsys,
    )
    assert code == 0, out
    data = json.loads(out)
    assert data["settings"]["max_model_len"] == 8192
    assert data["memory"]["capacity"]["kv_cache_tokens"] == pytest.approx(1_182_912, rel=0.02)


def test_unknown_model_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan", "NoSuchModel-7B", "--machine", "h200"], capsys)
    assert code == 2 and "Unknown model 'NoSuchModel-7B'" in err and "llmdeck models" in err


def test_an_error_under_json_is_also_a_json_object_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    """Scripts read stdout under --json: the one-paragraph error is there as an object (stderr keeps it
    too); a --json after `--` is vLLM's, not llmdeck's."""
    code, out, err = run(["plan", "NoSuchModel-7B", "--machine", "h200", "--json"], capsys)
    body = json.loads(out)["error"]
    assert code == 2 and body["exit_code"] == 2 and body["kind"] == "UnknownModelError"
    assert "NoSuchModel-7B" in body["message"] and "NoSuchModel-7B" in err
    code, out, _ = run(["plan", "Qwen3-0.6B", "--machine", "h200", "--contxt", "5", "--json"], capsys)
    assert (
        code == 2
        and json.loads(out)["error"]["message"] == "No such option --contxt; did you mean --context?"
    )
    code, out, _ = run(["plan", "NoSuchModel-7B", "--machine", "h200", "--", "--json"], capsys)
    assert code == 2 and out == ""
    code, out, _ = run(["plan", "Qwen3-0.6B", "--machine", "h200", "--context", "99999999", "--json"], capsys)
    assert code == 2 and json.loads(out)["error"]["kind"] == "does-not-fit"  # one document, the plan's own


def test_uncached_repo_id_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan", "someorg/Some-Model", "--machine", "h200"], capsys)
    assert code == 2 and "hf download someorg/Some-Model config.json" in err


def test_broken_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "broken"
    d.mkdir()
    (d / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024,')
    code, _, err = run(["plan", str(d), "--machine", "h200"], capsys)
    assert code == 2 and "not valid JSON" in err
    (d / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    code, _, err = run(["plan", str(d), "--machine", "h200"], capsys)
    assert code == 2 and "lacks hidden_size" in err


def test_catalog_model_without_offline_config_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["plan", "Qwen3-Coder-Next-FP8", "--machine", "dgx-spark"], capsys)
    assert code == 2 and "llmdeck fetch Qwen/Qwen3-Coder-Next-FP8 --config-only" in err


def test_context_beyond_memory_exits_2_and_says_what_fits(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        [
            "plan",
            "Qwen3-30B-A3B",
            "--machine",
            "dgx-spark",
            "--context",
            "32768",
            "--gpu-memory-utilization",
            "0.5",
        ],
        capsys,
    )
    assert code == 2
    assert "does not fit" in err and "What would fit instead" in err
    assert "--context" in err and "--gpu-memory-utilization 0." in err


@pytest.mark.parametrize(
    ("flag", "value", "advice"),
    [
        ("--max-num-seqs", "10000000", "a lower --max-num-seqs (now 10000000: its sampler takes"),
        ("--max-num-batched-tokens", "100000000", "a lower --max-num-batched-tokens (now 100000000"),
    ],
)
def test_overheads_the_flags_ask_for_name_the_flag(
    flag: str, value: str, advice: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """5,660 GiB of overheads for a 0.6B model had been told to "Pick a smaller or quantized model".."""
    code, _, err = run(["plan", "Qwen3-0.6B", "--machine", "h200", "--", flag, value], capsys)
    assert code == 2 and advice in err and "smaller or quantized" not in err and ".." not in err


def test_an_index_of_no_checkpoint_size_is_not_read_as_the_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """total_size 1e308 had been planned as 9.3e298 GiB of weights ("does not fit")."""
    bundled = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs" / "Qwen3-0.6B.config.json"
    (tmp_path / "config.json").write_text(bundled.read_text())
    index = {"metadata": {"total_size": 1e308}, "weight_map": {}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    code, out, err = run(["plan", str(tmp_path), "--machine", "h200", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["memory"]["weights_gib"] < 2


def test_a_context_beyond_any_flag_is_named_as_context(capsys: pytest.CaptureFixture[str]) -> None:
    """It had been refused in --max-model-len's words, a flag the user had not written."""
    from llmdeck.cli.plan import MAX_CONTEXT
    from llmdeck.plan.flags import MAX_FLAG_INT

    assert MAX_CONTEXT == MAX_FLAG_INT
    code, _, err = run(["plan", "Qwen3-0.6B", "--machine", "h200", "--context", str(MAX_CONTEXT + 1)], capsys)
    assert code == 2 and "--context" in err and "--max-model-len" not in err


def test_conflicting_context_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        ["plan", "Qwen3-0.6B", "--machine", "h200", "--context", "8192", "--", "--max-model-len", "4096"],
        capsys,
    )
    assert code == 2 and "given twice" in err


def test_local_model_dir_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "qwen3-0.6b"
    d.mkdir()
    src = ROOT / "src/llmdeck/catalog/data/configs/Qwen3-0.6B.config.json"
    (d / "config.json").write_bytes(src.read_bytes())
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1_500_000_000}}))
    code, out, _ = run(
        ["plan", str(d), "--machine", "h200", "--context", "8192", "--engine", "docker", "--json"], capsys
    )
    assert code == 0, out
    data = json.loads(out)
    assert data["memory"]["weights_gib"] == pytest.approx((1_500_000_000 + 40960 * 128 * 2) / 2**30)
    docker = data["commands"]["docker"]
    assert "HF_HUB_OFFLINE=1" in docker and "--gpus" in docker and "--ipc" in docker


def test_human_output_has_table_and_commands(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        [
            "plan",
            "Qwen3-Coder-30B-A3B-Instruct-FP8",
            "--machine",
            "dgx-spark",
            "--context",
            "65536",
            "--image",
            "nvcr.io/nvidia/vllm:26.01-py3",
            "--",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "qwen3_coder",
        ],
        capsys,
    )
    assert code == 0, out
    assert "Memory plan" in out and "GPU KV cache size" in out
    assert "nvcr.io/nvidia/vllm:26.01-py3" in out and "vllm serve" in out
    assert "--gpu-memory-utilization 0.85" in out  # the planner's GB10 choice


def test_models_json_lists_the_seed_models(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["models", "--json"], capsys)
    assert code == 0
    names = {m["name"] for m in json.loads(out)["models"]}
    for n in [
        "Qwen3-Coder-30B-A3B-Instruct-FP8",
        "Qwen3-Coder-Next-FP8",
        "Qwen3-Coder-Next",
        "Qwen3.6-35B-A3B-FP8",
        "Qwen3.6-27B-FP8",
        "Qwen3.5-35B-A3B",
        "GLM-4.7-Flash",
        "Qwen3-0.6B",
        "Qwen3-30B-A3B",
    ]:
        assert n in names


def test_recommend_explains_its_pick(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["recommend", "--machine", "dgx-spark", "--workload", "multi-user", "--json"], capsys)
    assert code == 0
    rec = json.loads(out)
    assert rec["pick"] == "Qwen3-Coder-30B-A3B-Instruct-FP8"
    assert "seed 004" in rec["why"].lower() and rec["kv_cache_tokens"] > 0
    code, out, _ = run(["recommend", "--machine", "dgx-spark", "--workload", "agent"], capsys)
    assert code == 0 and "Qwen3.6-35B-A3B-FP8" in out and "§10" in out
    code, _, err = run(["recommend", "--machine", "dgx-spark", "--workload", "chat"], capsys)
    assert code == 2 and "--workload" in err


def test_plan_names_the_model_runner_and_the_tokens_a_window_holds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """gemma-3-4b on vLLM 0.26: the V2 runner's sampler share, and two batches in flight held by each
    sliding window (evidence/plan/families/results-v0.26, run 3); on 0.22: V1, one batch."""
    model = str(ROOT / "evidence" / "plan" / "families" / "configs" / "gemma-3-4b-it")
    for version, runner, held in [("0.26.0", "V2", "16,384"), ("0.22.0", "V1", "8,192")]:
        argv = ["plan", model, "--machine", "h200", "--vllm-version", version, "--json", "--"]
        code, out, _ = run([*argv, "--max-model-len", "65536"], capsys)
        assert code == 0
        memory = json.loads(out)["memory"]
        assert memory["overhead"]["model_runner"] == runner
        assert f"{memory['layout']['in_flight_tokens']:,}" == held


def _fake_python(tmp_path: Path, prints: str, code: int = 0) -> Path:
    """A stand-in for a venv's Python (named so): answers the version probe with `prints`."""
    exe = tmp_path / "venv" / "bin" / "python"
    exe.parent.mkdir(parents=True)
    to = " >&2" if code else ""  # a failing probe speaks on stderr, as Python's traceback does
    exe.write_text(f"#!/bin/sh\necho '{prints}'{to}\nexit {code}\n")
    exe.chmod(0o755)
    return exe


def test_plan_reads_the_vllm_of_the_venv_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --python` plans for the release installed there (0.26: V2 runner, two batches in flight)
    and puts that Python into the spec for `up --spec`."""
    exe = _fake_python(tmp_path, "0.26.0")
    argv = ["plan", "gemma-3-4b-it", "--machine", "h200", "--python", str(exe), "--json"]
    code, out, _ = run([*argv, "--spec-out", str(tmp_path / "spec.json")], capsys)
    assert code == 0
    plan = json.loads(out)
    assert plan["target_vllm"] == "0.26.0" and str(exe) in plan["target_vllm_source"]
    assert plan["memory"]["overhead"]["model_runner"] == "V2"
    spec = LaunchSpec.model_validate_json((tmp_path / "spec.json").read_text())
    assert spec.engine == "venv" and spec.python == str(exe)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--vllm-version", "0.26.0"], "goes with neither"),
        (["--engine", "docker"], "goes with neither"),
    ],
)
def test_plan_python_with_a_conflicting_option_is_bad_usage(
    extra: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exe = _fake_python(tmp_path, "0.26.0")
    code, _, err = run(["plan", "gemma-3-4b-it", "--python", str(exe), *extra], capsys)
    assert code == 2 and says in err


def test_plan_python_without_vllm_is_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exe = _fake_python(tmp_path, "ModuleNotFoundError: No module named vllm", code=1)
    code, _, err = run(["plan", "gemma-3-4b-it", "--python", str(exe)], capsys)
    assert code == 2 and "has no vLLM to plan for" in err and "No module named vllm" in err
    code, _, err = run(["plan", "gemma-3-4b-it", "--python", str(tmp_path / "missing")], capsys)
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize(
    ("prints", "shown"), [("hello from a wrapper", '"hello from a wrapper"'), ("", "nothing")]
)
def test_plan_python_that_prints_no_version_is_bad_usage(
    prints: str, shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a wrapper prints was taken as the vLLM version (and shown as the plan's target)."""
    exe = _fake_python(tmp_path, prints)
    code, out, err = run(["plan", "gemma-3-4b-it", "--machine", "h200", "--python", str(exe)], capsys)
    assert code == 2 and out == "" and f"it printed {shown}, which is not a version" in err


@pytest.mark.timeout(60)
def test_plan_python_that_hangs_is_given_up_on_in_bounded_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe waited 180 s for a Python that never answers; now PROBE_TIMEOUT_S (60 s; 1 s here)."""
    import time

    from llmdeck.runtime.preflight import vllm_version

    monkeypatch.setattr(vllm_version, "PROBE_TIMEOUT_S", 1.0)
    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\nexec sleep 120\n")
    exe.chmod(0o755)
    t0 = time.monotonic()
    code, _, err = run(["plan", "gemma-3-4b-it", "--machine", "h200", "--python", str(exe)], capsys)
    assert code == 2 and "took more than 1 s" in err and time.monotonic() - t0 < 30


def test_the_printed_commands_carry_no_key_to_paste(capsys: pytest.CaptureFixture[str]) -> None:
    # the venv line had been `vllm serve ... --api-key '<redacted>'`: pasted, a server whose key was
    # the word <redacted>; like the docker line it leaves the key to VLLM_API_KEY, which vLLM reads
    argv = ["plan", "gemma-3-4b-it", "--machine", "h200", "--", "--api-key", "sk-secret"]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert "sk-secret" not in out and "<redacted>" not in out and "--api-key" not in out
    assert "-e VLLM_API_KEY" in out and "read VLLM_API_KEY from the environment" in out
    code, out, _ = run([*argv[:4], "--json", *argv[4:]], capsys)
    assert code == 0 and "--api-key" not in json.loads(out)["commands"]["vllm_serve"]


def test_the_printed_up_command_quotes_the_spec_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    spec = tmp_path / "my spec's.json"
    code, out, err = run(
        ["plan", "gemma-3-4b-it", "--machine", "h200", "--spec-out", str(spec), "--", "--api-key", "k"],
        capsys,
    )
    assert code == 0
    for text in (out, err):
        shown = " ".join(text.split()).partition("llmdeck up --spec ")[2]
        assert shlex.split(shown.removesuffix(")"))[0] == str(spec), text


def test_the_up_command_in_the_secret_note_is_never_wrapped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """stderr not a terminal is 80 columns for rich: the note's command came out split across lines."""
    spec = tmp_path / ("a-long-folder-name-" * 3) / "spec.json"
    spec.parent.mkdir()
    code, _out, err = run(
        ["plan", "gemma-3-4b-it", "--machine", "h200", "--spec-out", str(spec), "--", "--api-key", "k"],
        capsys,
    )
    assert code == 0
    assert f"pass it when starting: VLLM_API_KEY=... llmdeck up --spec {spec}\n" in err, err
