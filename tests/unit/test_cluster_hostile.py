"""`llmdeck cluster` against broken or hostile peers and records: what a node prints is data, a bad
record or option is an error naming it (never an internal error), nothing is run for nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cli_helpers import run_cli


def _record(state: Path, status: list[str], commands: int = 1) -> None:
    """A remote cluster record whose head answers `ray status` with ``status`` (a fake node)."""
    node = {"host": "h1", "role": "head", "node_ip": "h1", "env": {}, "up": [], "down": [["true"]]}
    node |= {"status": status, "logs": status}
    rec = {"kind": "llmdeck.remote-ray/1", "address": "h1:6379", "commands": [node] * commands}
    (state / "cluster").mkdir(parents=True, exist_ok=True)
    (state / "cluster" / "remote.json").write_text(json.dumps(rec), "utf-8")


def _printing(data: bytes) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.stdout.buffer.write({data!r})"]


def test_a_node_printing_bytes_that_are_not_utf8_is_data_not_an_internal_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ray status` or a Ray log with a byte that is not UTF-8 had raised UnicodeDecodeError (exit 1,
    "internal error ... a bug in llmdeck")."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path))
    _record(tmp_path, _printing(b"\xff\xfe garbage\n"))
    code, _, err = run_cli(["cluster", "status"], capsys)
    assert code == 1 and "did not print Ray's node summary" in err and "internal error" not in err
    code, out, err = run_cli(["cluster", "logs"], capsys)
    assert code == 0 and "garbage" in out and "internal error" not in err


def test_a_node_counting_absurdly_many_nodes_is_refused_not_built_in_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """` 99999999999999 node_b` under Active: had built a list that long (MemoryError, internal error)."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path))
    _record(tmp_path, _printing(b"Node status\nActive:\n 1 node_a\n 99999999999999 node_b\n"))
    code, _, err = run_cli(["cluster", "status"], capsys)
    assert code == 1 and "not Ray's node summary" in err and "internal error" not in err


@pytest.mark.parametrize("command", [["cluster", "status"], ["cluster", "netcheck"], ["cluster", "logs"]])
def test_a_record_of_no_node_is_an_unreadable_record(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote.json with an empty node list (edited, or another tool's) had raised IndexError."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path))
    _record(tmp_path, ["true"], commands=0)
    code, _, err = run_cli(command, capsys)
    assert code == 2 and "remote.json, is unreadable" in err and "internal error" not in err


def test_netcheck_refuses_an_out_it_cannot_write_before_running_the_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--out FOLDER` was found unwritable only after the all-reduce had run (up to --test-timeout):
    the measurement and the verdict were lost, exit 2 at the end."""
    import llmdeck.cluster.netcheck as netcheck

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("the test ran although its --out cannot be written")

    monkeypatch.setattr(netcheck, "run_local", never)
    code, _, err = run_cli(["cluster", "netcheck", "--local", "2", "--out", str(tmp_path)], capsys)
    assert code == 2 and "it is a folder, not a file" in " ".join(err.split())


@pytest.mark.parametrize("image", ["-v/:/host", "--privileged", "img name", "img\nx"])
def test_an_image_docker_would_take_for_an_option_is_refused(
    image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--image -v/:/host` was rendered last before `sleep infinity`: docker run took it for a mount of
    the node's / and ran the image `sleep`."""
    args = ["cluster", "up", "--head", "h1", "--worker", "h2", "--docker", "--image", image, "--dry-run"]
    code, out, err = run_cli(args, capsys)
    assert code == 2 and "is not an image name" in err and "docker run" not in out


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--head", "[fd00::1]", "--worker", "fd00::2"], "--head"),
        (["--head", "fd00::1", "--worker", "u@[fd00::2]"], "--worker"),
        (["--head", "h1", "--head-ip", "fd00::1]", "--worker", "h2"], "--head-ip"),
        (["--head", "h1", "--worker", "h2", "--worker-ip", "[fd00::2]"], "--worker-ip"),
    ],
)
def test_an_ipv6_address_in_brackets_is_refused_with_its_bare_spelling(
    args: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--head [fd00::1]` was rendered as ssh's destination '[fd00::1]', VLLM_HOST_IP=[fd00::1] and
    --node-ip-address [fd00::1]: the nodes failed there, after the dry run had shown it as fine."""
    code, out, err = run_cli(["cluster", "up", *args, "--dry-run"], capsys)
    flat = " ".join(err.split())
    assert code == 2 and f"{flag} " in flat and "without brackets" in flat and "ssh" not in out
    assert "[fd00" not in flat.split("without brackets")[1]


def test_an_hf_cache_docker_would_split_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """`--hf-cache /a:/etc` was rendered as `-v /a:/etc:/root/.cache/huggingface`: docker read /etc as
    the container path and the rest as a mode, and refused it on every node."""
    args = ["cluster", "up", "--head", "h1", "--worker", "h2", "--docker", "--image", "vllm/vllm-openai"]
    code, out, err = run_cli([*args, "--hf-cache", "/a:/etc", "--dry-run"], capsys)
    assert code == 2 and "--hf-cache" in err and "docker run" not in out


def test_a_saved_row_of_another_backend_is_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row whose backend was neither gloo nor nccl ('mpi', '[bold red]X') was judged as NCCL's (its
    fix, exit 1) and its name went into the table's title as markup."""
    from repo_paths import TEST_FIXTURES

    text = (TEST_FIXTURES / "cluster" / "gloo-allreduce-lo-2ranks.jsonl").read_text("utf-8")
    saved = tmp_path / "run.jsonl"
    saved.write_text(text.replace('"backend": "gloo"', '"backend": "[bold red]X"'), "utf-8")
    code, out, err = run_cli(["cluster", "netcheck", "--result", str(saved)], capsys)
    assert code == 2 and "is not an all-reduce row" in err and "backend" in err and out == ""


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("remote.json", b"\xff\xfe{", "not UTF-8 text"),
        ("remote.json", b'{"kind": 5}', "not JSON, or not a cluster record"),
        ("local.json", b"[1, 2]", "not JSON, or not a cluster record"),
    ],
)
def test_a_bad_cluster_record_is_said_in_words_not_a_class_name(
    name: str,
    data: bytes,
    words: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It had said "unreadable (ValidationError)" or "(UnicodeDecodeError)"."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path))
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / name).write_bytes(data)
    code, _, err = run_cli(["cluster", "status"], capsys)
    flat = " ".join(err.split())
    assert code == 2 and f"is unreadable ({words})" in flat and "Error" not in flat, flat
