"""The CLI foundation: fast help, one error mapping, exit codes 0/1/2, bad input without tracebacks."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.cli.app import main
from repo_paths import ROOT

# the public Qwen3-0.6B config.json that llmdeck bundles (same bytes as shared/fixtures/configs)
BUNDLED_CONFIGS = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs"


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LLMDECK_DEBUG", raising=False)
    return tmp_path


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    """`llmdeck --help` in a fresh interpreter uses under 0.5 s of CPU (best of 3).

    The machines are shared and 2-core, so the bound is on the CPU time the process uses (what it
    takes on an idle machine); wall time gets a looser bound that still catches heavy imports.
    """
    cmd = [sys.executable, "-m", "llmdeck", "--help"]
    env = {**os.environ, "COLUMNS": "120"}
    subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm the OS file cache
    runs = [_timed(cmd, env) for _ in range(3)]
    cpu = min(c for _, c in runs)
    wall = min(w for w, _ in runs)
    assert cpu < 0.5, f"llmdeck --help used {cpu:.2f} s of CPU"
    assert wall < 5, f"llmdeck --help took {wall:.2f} s"  # the CPU bound above is the fast-help proof
    probe = (
        "import sys; from llmdeck.cli.app import build_app; build_app(); "
        "heavy = [m for m in ('httpx', 'numpy', 'torch', 'transformers', 'vllm', 'pydantic_settings') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"heavy modules imported at start-up: {result.stdout.strip()}"


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stderr
    assert "up" in result.stdout and "status" in result.stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def test_help_lists_every_command_group(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--help"], capsys)
    assert code == 0
    for command in ("quickstart", "up", "down", "status", "logs", "restart"):
        assert command in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--version"], capsys)
    assert code == 0 and out.startswith("llmdeck ")


def test_unknown_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["frobnicate"], capsys)
    assert code == 2
    assert "frobnicate" in err


def test_up_nonexistent_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["up", "--model", "/nonexistent", "--engine", "cpu"], capsys)
    assert code == 2
    assert "/nonexistent" in err and "does not exist" in err
    assert "Traceback" not in err and out == ""


def test_up_model_dir_without_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "empty-model"
    model.mkdir()
    (model / "README.md").write_text("not a model\n")
    code, _, err = run_cli(["up", "--model", str(model), "--engine", "cpu"], capsys)
    assert code == 2
    assert "config.json" in err
    assert "Traceback" not in err


def test_up_model_dir_with_broken_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "broken"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"],,}')
    code, _, err = run_cli(["up", "--model", str(model), "--engine", "cpu"], capsys)
    assert code == 2
    assert "config.json" in err and "Traceback" not in err


def test_up_port_in_use(tiny_config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code, _, err = run_cli(
            ["up", "--model", str(tiny_config_dir), "--engine", "cpu", "--port", str(port)], capsys
        )
    assert code == 2
    assert f"Port {port}" in err and "in use" in err


def test_up_bad_port_and_engine(tiny_config_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["up", "--model", str(tiny_config_dir), "--port", "70000"], capsys)
    assert code == 2 and "port" in err.lower()
    code, _, err = run_cli(["up", "--model", str(tiny_config_dir), "--engine", "podman"], capsys)
    assert code == 2 and "podman" in err


def test_up_bad_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"engine": "cpu"}))
    code, _, err = run_cli(["up", "--spec", str(spec)], capsys)
    assert code == 2 and "spec" in err.lower() and "model" in err
    code, _, err = run_cli(["up", "--spec", str(tmp_path / "missing.json")], capsys)
    assert code == 2 and "does not exist" in err


def test_down_with_nothing_running(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["down"], capsys)
    assert code == 2
    assert "No llmdeck server is running" in err
    code, _, err = run_cli(["down", "ghost"], capsys)
    assert code == 2 and "ghost" in err


def test_status_empty_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["status", "--json"], capsys)
    assert code == 0
    assert json.loads(out) == []


def test_debug_shows_traceback(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The traceback, then the message with its hint, the --json error and the exit code as without it
    (a bad input had become exit 1, with no hint and no --json error)."""
    monkeypatch.setenv("LLMDECK_DEBUG", "1")
    with pytest.raises(SystemExit) as info:
        main(["plan", "/nonexistent", "--json"])
    out, err = capsys.readouterr()
    assert info.value.code == 2
    assert "Traceback (most recent call last)" in err and "llmdeck.errors.ModelPathError" in err
    assert "error: /nonexistent does not exist, so it is not a folder. Pass a model folder" in err
    assert json.loads(out)["error"]["exit_code"] == 2


@pytest.fixture
def tiny_config_dir(tmp_path: Path) -> Path:
    """A model folder with a real Qwen3 config.json (no weights): enough to pass validation."""
    src = BUNDLED_CONFIGS / "Qwen3-0.6B.config.json"
    model = tmp_path / "qwen3-0.6b"
    model.mkdir()
    (model / "config.json").write_text(src.read_text())
    return model


def test_help_prose_is_reflowed_but_examples_keep_their_lines() -> None:
    from llmdeck.cli.app import build_app, reflow_help

    text = (
        "First line\nstill first.\n\nProse wrapped\nat 100 columns.\n\nExamples:\n\n  llmdeck a\n  llmdeck b"
    )
    assert reflow_help(text) == (
        "First line still first.\n\nProse wrapped at 100 columns.\n\nExamples:\n\n  llmdeck a\n  llmdeck b"
    )
    helps = {c.name: c.help or "" for c in build_app().registered_commands}
    bench = helps["bench"].split("\n\n")
    prose = next(p for p in bench if p.startswith("Besides the table"))
    assert "\n" not in prose  # rich wraps it to the terminal, not at the docstring's breaks
    assert any(p.startswith("  llmdeck bench mysrv --suite seeds") for p in bench)  # examples kept


@pytest.mark.parametrize(
    "command", ["report", "fetch", "down", "status", "logs", "restart", "models", "recommend"]
)
def test_help_examples_stay_indented(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    # typer dedents everything after the first paragraph, skipping its first line: a help text whose
    # second paragraph is a lone "Examples:" used to print its examples flush left, like prose
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0
    examples = [line for line in out.splitlines() if line.lstrip().startswith(f"llmdeck {command}")]
    assert examples, out
    assert all(line.startswith("   llmdeck") for line in examples), examples


def _float_options(command: object, path: str = "") -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for name, sub in getattr(command, "commands", {}).items():
        found += _float_options(sub, f"{path} {name}".strip())
    for param in getattr(command, "params", []):
        annotation = param.type_descriptor.annotation
        if annotation is float or "float" in str(annotation):
            found.append((f"{path} {param.opts[0]}", param))
    return found


def test_every_float_option_is_checked_finite_and_bounded_by_one_callback() -> None:
    """Typer's min=/max= let nan and inf through (``nan < 0`` is false: `cluster down --grace inf` had
    been taken) and word a bad value as pydantic does; every float option goes through validate.number."""
    import typer

    from llmdeck.cli.app import build_app

    options = _float_options(typer.main.get_command(build_app()))
    assert len(options) > 20
    unchecked = [name for name, p in options if p.callback is None]  # type: ignore[attr-defined]
    ranged = [name for name, p in options if p.min is not None or p.max is not None]  # type: ignore[attr-defined]
    assert unchecked == [] and ranged == []


def test_a_groups_own_help_is_reflowed_in_the_root_help() -> None:
    """`gateway` and `cluster` (a Typer group's help, not a command's) had kept the docstring's line
    breaks: the root --help printed them ragged at any width ('per-model' then 'defaults' below)."""
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-m", "llmdeck", "--help"], env=env, capture_output=True, text=True, timeout=60
    ).stdout
    assert "aliases, API keys, per-model defaults, replicas" in out, out
    assert "(tensor/pipeline parallel), with the NCCL/Gloo" in out, out
