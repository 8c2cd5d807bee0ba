"""What every fuzz case asserts: the exit code, a message naming what is wrong and what to do, no
traceback, no "internal error"/"bug", and a time bound. Cases run in-process through the real entry
point (``llmdeck.cli.app.main``), so the suite stays fast on two cores."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from llmdeck.cli.app import main

# Words of a message that says what to do (llmdeck's hints, click's "Try 'llmdeck x -h' for help.").
ADVICE = re.compile(
    r"\b(use|pass|give|check|set|unset|run|fix|try|see|start|pick|raise|point|write|upgrade|wait|free|"
    r"regenerate|re-render|add|delete|install|accept|name|drop|compare|must be|should be|accepts|"
    r"for example|e\.g\.)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Case:
    """One bad input: ``argv`` (placeholders filled by :func:`fill`), expected exit code, and the
    words stderr must contain (what is wrong). ``env`` sets LLMDECK_* (or other) variables."""

    id: str
    argv: tuple[str, ...]
    code: int
    needles: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    seconds: float = 20.0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        return self.id.split(":", 1)[0]


def case(
    cid: str,
    argv: str | list[str],
    code: int,
    *needles: str,
    env: dict[str, str] | None = None,
    seconds: float = 20.0,
) -> pytest.ParameterSet:
    args = tuple(argv.split()) if isinstance(argv, str) else tuple(argv)
    c = Case(cid, args, code, tuple(needles), tuple((env or {}).items()), seconds)
    return pytest.param(c, id=cid)


def make_inputs(tmp: Path) -> dict[str, str]:
    """Bad files and folders the cases point at."""
    (tmp / "folder").mkdir(exist_ok=True)
    (tmp / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (tmp / "empty.json").write_bytes(b"")
    (tmp / "truncated.json").write_text('{"kind": "llmdeck.bench", "schema_vers')
    (tmp / "list.json").write_text("[1, 2, 3]")
    (tmp / "string.json").write_text('"just a string"')
    (tmp / "wrong_kind.json").write_text(json.dumps({"kind": "something.else", "schema_version": 1}))
    (tmp / "newer.json").write_text(
        json.dumps({"kind": "llmdeck.bench.result", "schema_version": 999, "model": "m", "name": "x"})
    )
    (tmp / "spec_newer.json").write_text(json.dumps({"schema_version": 999, "model": "m"}))
    (tmp / "eval_newer.json").write_text(json.dumps({"kind": "llmdeck.eval.result", "schema_version": 999}))
    (tmp / "spec_bad_port.json").write_text(json.dumps({"model": "m", "port": "eighty"}))
    (tmp / "spec_bad_host.json").write_text(json.dumps({"model": "m", "host": "not a host"}))
    (tmp / "spec_no_model.json").write_text(json.dumps({"name": "x"}))
    (tmp / "spec_empty_model.json").write_text(json.dumps({"model": ""}))
    (tmp / "null.json").write_text("null")
    (tmp / "a_file").write_text("I am a file, not a folder\n")
    (tmp / "catalog.yaml").write_text("models: []\n")
    (tmp / "prompt_number.jsonl").write_text('{"prompt": 5}\n')
    (tmp / "messages_empty.jsonl").write_text('{"messages": []}\n')
    (tmp / "message_no_content.jsonl").write_text('{"prompt": "hi"}\n{"messages": [{"role": "user"}]}\n')
    (tmp / "content_number.jsonl").write_text('{"messages": [{"role": "user", "content": 5}]}\n')
    return {
        "tmp": str(tmp),
        "folder": str(tmp / "folder"),
        "binary": str(tmp / "binary.bin"),
        "empty": str(tmp / "empty.json"),
        "truncated": str(tmp / "truncated.json"),
        "list": str(tmp / "list.json"),
        "string": str(tmp / "string.json"),
        "wrong_kind": str(tmp / "wrong_kind.json"),
        "newer": str(tmp / "newer.json"),
        "spec_newer": str(tmp / "spec_newer.json"),
        "eval_newer": str(tmp / "eval_newer.json"),
        "spec_bad_port": str(tmp / "spec_bad_port.json"),
        "spec_bad_host": str(tmp / "spec_bad_host.json"),
        "spec_no_model": str(tmp / "spec_no_model.json"),
        "spec_empty_model": str(tmp / "spec_empty_model.json"),
        "null": str(tmp / "null.json"),
        "missing": str(tmp / "does-not-exist.json"),
        "blocked": str(tmp / "a_file" / "out.json"),  # a file is in the way of the parent folder
        "a_file": str(tmp / "a_file"),
        "catalog": str(tmp / "catalog.yaml"),
        "prompt_number": str(tmp / "prompt_number.jsonl"),
        "messages_empty": str(tmp / "messages_empty.jsonl"),
        "message_no_content": str(tmp / "message_no_content.jsonl"),
        "content_number": str(tmp / "content_number.jsonl"),
    }


def fill(value: str, names: dict[str, str]) -> str:
    return value.format(**names) if "{" in value else value


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as info:
        main(argv)
    elapsed = time.monotonic() - t0
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 1), out, err, elapsed


def assert_clean_failure(
    code: int, err: str, elapsed: float, *, want: int, needles: tuple[str, ...], seconds: float
) -> None:
    """The promise: exit code, what is wrong (needles), what to do (advice), no traceback/bug, in time."""
    flat = " ".join(err.split())
    assert code == want, f"exit {code}, wanted {want}; stderr: {flat[:800]}"
    assert "Traceback" not in err, err
    assert "internal error" not in err.lower() and " bug" not in err.lower(), err
    for needle in needles:
        assert needle.lower() in flat.lower(), f"{needle!r} not in stderr: {flat[:800]}"
    assert ADVICE.search(flat), f"no advice in stderr: {flat[:800]}"
    assert elapsed < seconds, f"took {elapsed:.1f} s (bound {seconds} s)"


def run_case(
    c: Case,
    tmp: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    names: dict[str, str] | None = None,
) -> str:
    names = names or make_inputs(tmp)
    for key, value in c.env:
        monkeypatch.setenv(key, fill(value, names))
    argv = [fill(a, names) for a in c.argv]
    code, _out, err, elapsed = run_main(argv, capsys)
    needles = tuple(fill(n, names) for n in c.needles)
    assert_clean_failure(code, err, elapsed, want=c.code, needles=needles, seconds=c.seconds)
    return err


FuzzRun = Callable[[Case, dict[str, str]], str]


@pytest.fixture
def fuzz_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> FuzzRun:
    """:func:`run_case` bound to this test's tmp_path, capsys and monkeypatch: ``fuzz_run(case, names)``."""

    def run(c: Case, names: dict[str, str]) -> str:
        return run_case(c, tmp_path, capsys, monkeypatch, names)

    return run


@pytest.fixture
def fuzz_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A clean environment: no LLMDECK_* from outside, state/results/models under tmp_path, no
    network for the hub (a fetch that gets past its checks hits a refused local port)."""
    import os

    for key in list(os.environ):
        if key.startswith("LLMDECK_") or key in {"HF_ENDPOINT", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"}:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_RESULTS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("LLMDECK_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    return make_inputs(tmp_path)
