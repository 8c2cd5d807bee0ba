"""Values from a systematic bad-input sweep of every option: bytes that are no UTF-8, empty values,
huge values, local files given with a server. Each must end in exit 2 and one paragraph naming what is
wrong, never an internal error, and never after the network was asked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from cli_helpers import run_cli
from llmdeck.errors import UsageError
from llmdeck.util.atomic import atomic_write_json

CLOSED = "http://127.0.0.1:9"  # nothing listens: a question to it would fail with "Cannot connect"
NOT_UTF8 = b"\xff".decode("utf-8", "surrogateescape")  # what Python makes of argv byte 0xff


def test_a_keys_models_value_that_is_no_utf8_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys.json"
    code, _, err = run_cli(
        ["keys", "create", "alice", "--models", NOT_UTF8, "--keys-file", str(keys)], capsys
    )
    assert code == 2 and "internal error" not in err
    assert "--models" in err and "not UTF-8" in err
    assert not keys.exists()


def test_a_forwarded_argument_that_is_no_utf8_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    args = ["plan", "Qwen3-0.6B", "--machine", "h200", "--spec-out", str(spec), "--"]
    code, _, err = run_cli([*args, "--served-model-name", NOT_UTF8], capsys)
    assert code == 2 and "internal error" not in err
    assert "after `--`" in err and "not UTF-8" in err
    assert not spec.exists()


class _Record(BaseModel):
    name: str


@pytest.mark.parametrize("data", [{"model": NOT_UTF8}, "plain " + NOT_UTF8, _Record(name=NOT_UTF8)])
def test_a_json_write_of_no_utf8_is_a_usage_error(tmp_path: Path, data: object) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(UsageError, match="not UTF-8"):
        atomic_write_json(target, data)
    assert not target.exists()


def _local_inputs(tmp_path: Path) -> dict[str, str]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "notes.txt").write_text("no tokenizer\n")
    return {
        "device": "/dev/zero",
        "fifo": str(fifo),
        "folder": str(tmp_path),
        "missing": str(tmp_path / "missing"),
        "file": str(tmp_path / "notes.txt"),
    }


@pytest.mark.parametrize("kind", ["device", "fifo", "folder", "missing"])
def test_bench_refuses_a_bad_prompts_file_before_asking_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    value = _local_inputs(tmp_path)[kind]
    code, _, err = run_cli(["bench", CLOSED, "--timeout-probe", "3", "--prompts", value], capsys)
    assert code == 2, err
    assert "--prompts" in err and "Cannot connect" not in err and "asking" not in err


@pytest.mark.parametrize("kind", ["device", "fifo", "missing", "file"])
def test_bench_refuses_a_bad_tokenizer_path_before_asking_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    value = _local_inputs(tmp_path)[kind]
    code, _, err = run_cli(["bench", CLOSED, "--timeout-probe", "3", "--tokenizer", value], capsys)
    assert code == 2, err
    assert "tokenizer" in err and "Cannot connect" not in err and "asking" not in err


HUGE = "a" * 100_000
CLUSTER_UP = ["cluster", "up", "--head", "10.0.0.1", "--worker", "10.0.0.2", "--dry-run"]


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "Qwen3-0.6B", "--machine", HUGE],  # an llmdeck error
        ["plan", "Qwen3-0.6B", "--machine", "h200", "--host", HUGE],  # click's BadParameter
        ["check", CLOSED, "--client", HUGE],
    ],
)
def test_a_huge_value_is_shown_cut_in_the_message(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli([*args, "--json"] if args[0] == "plan" else args, capsys)
    assert code == 2
    assert len(err) < 1000 and len(out) < 1000
    assert "…(100000 characters)'" in err


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["plan", "Qwen3-0.6B", "--machine", "h200", "--engine", ""], "--engine"),
        (["plan", "Qwen3-0.6B", "--machine", "h200", "--python", " "], "--python"),
        (["doctor", "--python", ""], "--python"),
        (["check", ""], "target"),
        (["check", "\n"], "target"),
        (["launch", "opencode", ""], "target"),
        (["bench", ""], "TARGET"),
        (["eval", "verify", "--suite", ""], "--suite"),
        (["bench", CLOSED, "--model", ""], "--model"),
        (["check", CLOSED, "--model", " "], "--model"),
        (["tune", "/nonexistent/m", "--image", ""], "--image"),
        # cluster up had started (here: printed) the cluster without them, or said --image was missing
        ([*CLUSTER_UP, "--head-ip", ""], "--head-ip"),
        ([*CLUSTER_UP, "--docker", "--image", ""], "--image': an empty value"),
        ([*CLUSTER_UP, "--docker", "--image", "vllm/vllm-openai:v0.22.0", "--hf-cache", ""], "--hf-cache"),
    ],
)
def test_an_explicitly_empty_value_is_refused_not_taken_as_the_default(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(args, capsys)
    assert code == 2, err
    assert named in err and out == ""


def test_plan_bounds_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "Qwen3-0.6B", "--machine", "h200", "--concurrency"]
    code, out, err = run_cli([*args, "99999999999999999999"], capsys)
    assert code == 2 and "--concurrency" in err and out == ""
    code, out, err = run_cli([*args, "1000000"], capsys)
    assert code == 0, err


FOLDER_OPTIONS = {
    "tune --out": ["tune", "Qwen3-0.6B", "--machine", "h200", "--slo", "ttft_p99=2s", "-w", "agent", "--out"],
    "eval --keep": [
        "eval",
        "-c",
        "aider",
        "--agent-bin",
        "/bin/true",
        "-t",
        "fix-intervals",
        "-s",
        CLOSED,
        "--keep",
    ],
}


@pytest.mark.parametrize("option", list(FOLDER_OPTIONS))
@pytest.mark.parametrize(
    ("kind", "said"), [("device", "is a device"), ("fifo", "is a named pipe (FIFO)"), ("file", "is a file")]
)
def test_a_folder_option_given_no_folder_says_what_the_path_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, kind: str, said: str
) -> None:
    """/dev/zero or a FIFO given for a folder had been called "a file"."""
    value = _local_inputs(tmp_path)[kind]
    code, _, err = run_cli([*FOLDER_OPTIONS[option], value], capsys)
    assert code == 2, err
    assert f"{value} {said}, not a folder" in " ".join(err.split()), err


@pytest.mark.parametrize(
    "argv",
    [
        ["up", "--model", "Qwen/Qwen3-0.6B", "--engine", "venv", "--served-model-name", "a\nb"],
        ["up", "--model", "Qwen/Qwen3-0.6B", "--engine", "venv", "--", "--served-model-name", "a\x1b[2Jb"],
        ["plan", "Qwen3-0.6B", "--machine", "h200", "--", "--served-model-name", "a\nb"],
        ["plan", "Qwen3-0.6B", "--machine", "h200", "--", "--served-model-name", " "],
    ],
    ids=["up-newline", "up-escape-after-dashes", "plan-newline", "plan-blank"],
)
def test_a_served_model_name_with_a_line_break_or_escape_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A served name is what clients send as "model": `up --served-model-name $'a\\nb'` had started a
    server whose name split every later line that showed it; `plan -- --served-model-name ...` with an
    escape code was an internal error (the spec's check had no message)."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    code, _out, err = run_cli(argv, capsys)
    assert code == 2, err
    assert "no model name" in err and "internal error" not in err and "\x1b" not in err
    assert not (tmp_path / "state" / "servers").exists() or not list(
        (tmp_path / "state" / "servers").glob("*.json")
    )
