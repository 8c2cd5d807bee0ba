"""Fuzz suite, part 2: bad LLMDECK_* settings, and internal errors with and without LLMDECK_DEBUG.

Settings are read by every command, so each bad value is tried with a different command. Most run
in-process; a few run the real console script end to end (the environment of a real shell).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_helpers import Case, FuzzRun, assert_clean_failure, case, run_main
from repo_paths import ROOT

PLAN = "plan Qwen3-0.6B --machine h200"

CASES = [
    case(
        "status:LLMDECK_PORT-text",
        "status",
        2,
        "LLMDECK_PORT",
        "'abc'",
        "1 to 65535",
        env={"LLMDECK_PORT": "abc"},
    ),
    case("models:LLMDECK_PORT-zero", "models", 2, "LLMDECK_PORT", "'0'", env={"LLMDECK_PORT": "0"}),
    case("plan:LLMDECK_PORT-too-big", PLAN, 2, "LLMDECK_PORT", "'70000'", env={"LLMDECK_PORT": "70000"}),
    case("check:LLMDECK_PORT-negative", "check", 2, "LLMDECK_PORT", "'-1'", env={"LLMDECK_PORT": "-1"}),
    case("up:LLMDECK_PORT-fraction", "up --model ./m", 2, "LLMDECK_PORT", env={"LLMDECK_PORT": "1.5"}),
    case("logs:LLMDECK_PORT-empty", "logs", 2, "LLMDECK_PORT", env={"LLMDECK_PORT": ""}),
    case("down:LLMDECK_PORT-two-numbers", "down", 2, "LLMDECK_PORT", env={"LLMDECK_PORT": "80 80"}),
    case("recommend:LLMDECK_PORT-hex", "recommend", 2, "LLMDECK_PORT", env={"LLMDECK_PORT": "0x50"}),
    case(
        "status:LLMDECK_DEBUG-two", "status", 2, "LLMDECK_DEBUG", "'2'", "1 or 0", env={"LLMDECK_DEBUG": "2"}
    ),
    case("models:LLMDECK_DEBUG-maybe", "models", 2, "LLMDECK_DEBUG", env={"LLMDECK_DEBUG": "maybe"}),
    case(
        "bench:LLMDECK_DEBUG-negative",
        "bench http://127.0.0.1:9",
        2,
        "LLMDECK_DEBUG",
        env={"LLMDECK_DEBUG": "-1"},
    ),
    case(
        "connect:LLMDECK_DEBUG-words",
        "connect openai",
        2,
        "LLMDECK_DEBUG",
        env={"LLMDECK_DEBUG": "yes please"},
    ),
    case(
        "check:LLMDECK_HOST-spaces",
        "check",
        2,
        "LLMDECK_HOST",
        "not a host",
        env={"LLMDECK_HOST": "not a host"},
    ),
    case(
        "up:LLMDECK_HOST-url", "up --model ./m", 2, "LLMDECK_HOST", env={"LLMDECK_HOST": "http://localhost"}
    ),
    case(
        "status:LLMDECK_HOST-with-port", "status", 2, "LLMDECK_HOST", env={"LLMDECK_HOST": "127.0.0.1:8000"}
    ),
    case("plan:LLMDECK_HOST-empty", PLAN, 2, "LLMDECK_HOST", env={"LLMDECK_HOST": ""}),
    case("logs:LLMDECK_HOST-dash", "logs", 2, "LLMDECK_HOST", env={"LLMDECK_HOST": "-bad-"}),
    case(
        "models:LLMDECK_CATALOG_PATHS-missing",
        "models",
        2,
        "LLMDECK_CATALOG_PATHS",
        "does not exist",
        env={"LLMDECK_CATALOG_PATHS": "{missing}"},
    ),
    case(
        "recommend:LLMDECK_CATALOG_PATHS-bad-json",
        "recommend",
        2,
        "LLMDECK_CATALOG_PATHS",
        "JSON",
        env={"LLMDECK_CATALOG_PATHS": "[not json"},
    ),
    # was "Input is not a valid path for <class 'pathlib.Path'>", once per item
    case(
        "recommend:LLMDECK_CATALOG_PATHS-json-numbers",
        "recommend",
        2,
        "LLMDECK_CATALOG_PATHS",
        "non-empty string",
        env={"LLMDECK_CATALOG_PATHS": "[1, 2]"},
    ),
    case(
        "plan:LLMDECK_CATALOG_PATHS-json-missing",
        PLAN,
        2,
        "LLMDECK_CATALOG_PATHS",
        env={"LLMDECK_CATALOG_PATHS": '["{missing}"]'},
    ),
    case(
        "models:LLMDECK_CATALOG_PATHS-one-of-two-missing",
        "models",
        2,
        "does-not-exist",
        env={"LLMDECK_CATALOG_PATHS": "{catalog}" + os.pathsep + "{missing}"},
    ),
    case(
        "up:LLMDECK_READY_TIMEOUT_S-inf",
        "up --model ./m",
        2,
        "LLMDECK_READY_TIMEOUT_S",
        "finite",
        env={"LLMDECK_READY_TIMEOUT_S": "inf"},
    ),
    case(
        "up:LLMDECK_READY_TIMEOUT_S-huge",
        "up --model ./m",
        2,
        "LLMDECK_READY_TIMEOUT_S",
        "2592000",
        env={"LLMDECK_READY_TIMEOUT_S": "1e300"},
    ),
    case(
        "restart:LLMDECK_READY_TIMEOUT_S-nan",
        "restart",
        2,
        "LLMDECK_READY_TIMEOUT_S",
        env={"LLMDECK_READY_TIMEOUT_S": "nan"},
    ),
    case(
        "status:LLMDECK_READY_TIMEOUT_S-negative",
        "status",
        2,
        "LLMDECK_READY_TIMEOUT_S",
        env={"LLMDECK_READY_TIMEOUT_S": "-1"},
    ),
    case(
        "quickstart:LLMDECK_READY_TIMEOUT_S-zero",
        "quickstart",
        2,
        "LLMDECK_READY_TIMEOUT_S",
        env={"LLMDECK_READY_TIMEOUT_S": "0"},
    ),
    case(
        "fetch:LLMDECK_READY_TIMEOUT_S-text",
        "fetch Qwen/Qwen3-0.6B",
        2,
        "LLMDECK_READY_TIMEOUT_S",
        env={"LLMDECK_READY_TIMEOUT_S": "soon"},
    ),
    case(
        "status:LLMDECK_STATE_DIR-a-file",
        "status",
        2,
        "LLMDECK_STATE_DIR",
        "a_file",
        env={"LLMDECK_STATE_DIR": "{a_file}"},
    ),
    case(
        "up:LLMDECK_STATE_DIR-under-a-file",
        "up --model ./m",
        2,
        "LLMDECK_STATE_DIR",
        env={"LLMDECK_STATE_DIR": "{a_file}/state"},
    ),
    case(
        "status:LLMDECK_STATE_DIR-empty",
        "status",
        2,
        "LLMDECK_STATE_DIR=''",
        "empty, which would mean whatever folder the command runs in",
        env={"LLMDECK_STATE_DIR": ""},
    ),
    case(
        "fetch:LLMDECK_MODELS_DIR-blank", "fetch Qwen/Qwen3-0.6B", 2, "empty", env={"LLMDECK_MODELS_DIR": " "}
    ),
    case(
        "bench:LLMDECK_RESULTS_DIR-empty",
        "bench http://127.0.0.1:9",
        2,
        "empty",
        env={"LLMDECK_RESULTS_DIR": ""},
    ),
    case("plan:LLMDECK_CACHE_DIR-empty", PLAN, 2, "LLMDECK_CACHE_DIR", env={"LLMDECK_CACHE_DIR": ""}),
    case(
        "bench:LLMDECK_RESULTS_DIR-a-file",
        "bench http://127.0.0.1:9",
        2,
        "LLMDECK_RESULTS_DIR",
        env={"LLMDECK_RESULTS_DIR": "{a_file}"},
    ),
    case(
        "fetch:LLMDECK_MODELS_DIR-a-file",
        "fetch Qwen/Qwen3-0.6B",
        2,
        "LLMDECK_MODELS_DIR",
        env={"LLMDECK_MODELS_DIR": "{a_file}"},
    ),
    case(
        "quickstart:LLMDECK_CACHE_DIR-under-a-file",
        "quickstart",
        2,
        "LLMDECK_CACHE_DIR",
        env={"LLMDECK_CACHE_DIR": "{a_file}/x/y"},
    ),
    case(
        "report:LLMDECK_PORT-and-DEBUG-both-bad",
        "report x.json",
        2,
        "LLMDECK_PORT",
        "LLMDECK_DEBUG",
        env={"LLMDECK_PORT": "x", "LLMDECK_DEBUG": "x"},
    ),
    # a near miss of a setting's name would be ignored silently (the default port used): exit 2
    case(
        "status:LLMDECK_PROT",
        "status",
        2,
        "LLMDECK_PROT",
        "did you mean LLMDECK_PORT?",
        env={"LLMDECK_PROT": "9"},
    ),
    case(
        "logs:llmdeck_statedir-lowercase",
        "logs",
        2,
        "llmdeck_statedir",
        "LLMDECK_STATE_DIR",
        "unset llmdeck_statedir",
        env={"llmdeck_statedir": "/tmp"},
    ),
]


def test_other_llmdeck_names_are_left_alone(fuzz_env: dict[str, str], fuzz_run: FuzzRun) -> None:
    """A client key ``connect`` names (LLMDECK_<PROVIDER>_API_KEY), the eval agents' and the tests' own
    variables, and a name near no setting are not settings llmdeck refuses."""
    env = {"LLMDECK_OPENCODE_API_KEY": "k", "LLMDECK_EVAL_CACHE_HOME": "/tmp", "LLMDECK_WHATEVER": "1"}
    fuzz_run(case("status:other-names", "status", 0, env=env).values[0], fuzz_env)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("c", CASES)
def test_bad_setting(c: Case, fuzz_env: dict[str, str], fuzz_run: FuzzRun) -> None:
    err = fuzz_run(c, fuzz_env)
    assert "pydantic" not in err and "validation error" not in err  # one paragraph, no dump


def test_a_yaml_catalog_path_is_a_path_not_json(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """LLMDECK_CATALOG_PATHS=a.yaml (was: a JSON parse error dumped by pydantic-settings); a folder
    beside it that holds no catalog file is named (it had been taken in silence)."""
    monkeypatch.setenv("LLMDECK_CATALOG_PATHS", fuzz_env["catalog"])
    code, out, err, _ = run_main(["models", "--json"], capsys)
    assert code == 0, err
    assert "Qwen3" in out
    monkeypatch.setenv("LLMDECK_CATALOG_PATHS", fuzz_env["catalog"] + os.pathsep + fuzz_env["folder"])
    code, out, err, _ = run_main(["models", "--json"], capsys)
    assert code == 2 and "holds no .yaml or .yml file" in err


@pytest.mark.timeout(120)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.text(
        st.characters(blacklist_categories=("Nd", "Cs"), blacklist_characters="\x00"), min_size=1, max_size=12
    )
)
def test_status_hypothesis_any_non_number_port_setting(
    value: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """status:hypothesis — random strings as LLMDECK_PORT: exit 2 naming the variable, never a crash."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LLMDECK_PORT", value)
        code, _out, err, elapsed = run_main(["status"], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=("LLMDECK_PORT",), seconds=15)


# ---- internal errors: the only exit-1 message that says "bug"; LLMDECK_DEBUG=1 shows the traceback ----


def _boom(*args: object, **kwargs: object) -> None:
    raise RuntimeError("injected failure")


def test_internal_error_says_bug_and_how_to_get_the_traceback(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("llmdeck.runtime.state.StateStore.list", _boom)
    code, _out, err, _ = run_main(["status"], capsys)
    assert code == 1
    assert "internal error" in err and "bug" in err and "LLMDECK_DEBUG=1" in err
    assert "Traceback" not in err


def test_internal_error_under_json_is_a_json_error_on_stdout(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scripts read stdout: a bug under --json had left it empty (the error on stderr only)."""
    monkeypatch.setattr("llmdeck.runtime.state.StateStore.list", _boom)
    code, out, err, _ = run_main(["status", "--json"], capsys)
    error = json.loads(out)["error"]
    assert code == 1 and error["kind"] == "InternalError" and error["exit_code"] == 1
    assert "injected failure" in error["message"] and "LLMDECK_DEBUG=1" in error["message"]
    assert "internal error" in err and "Traceback" not in err


def test_internal_error_with_debug_shows_the_traceback(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("llmdeck.runtime.state.StateStore.list", _boom)
    monkeypatch.setenv("LLMDECK_DEBUG", "1")
    from llmdeck.cli.app import main

    with pytest.raises(RuntimeError, match="injected failure"):
        main(["status"])


# ---- end to end: the real console script, a real environment -----------------------------------

E2E = [
    ("status:e2e-LLMDECK_PORT-abc", ["status"], {"LLMDECK_PORT": "abc"}, "LLMDECK_PORT"),
    ("plan:e2e-LLMDECK_DEBUG-2", ["plan", "Qwen3-0.6B"], {"LLMDECK_DEBUG": "2"}, "LLMDECK_DEBUG"),
    (
        "models:e2e-LLMDECK_CATALOG_PATHS-missing-yaml",
        ["models"],
        {"LLMDECK_CATALOG_PATHS": "/nonexistent/catalog.yaml"},
        "/nonexistent/catalog.yaml",
    ),
    ("up:e2e-LLMDECK_HOST-bad", ["up", "--model", "x"], {"LLMDECK_HOST": "not a host"}, "LLMDECK_HOST"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("cid", "argv", "env", "needle"), E2E, ids=[e[0] for e in E2E])
def test_setting_end_to_end(
    cid: str, argv: list[str], env: dict[str, str], needle: str, tmp_path: Path
) -> None:
    full = {k: v for k, v in os.environ.items() if not k.startswith("LLMDECK_")}
    full.update(env, PYTHONPATH=str(ROOT / "src"), LLMDECK_STATE_DIR=str(tmp_path / "state"))
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "llmdeck", *argv], env=full, capture_output=True, text=True, timeout=30
    )
    assert_clean_failure(
        proc.returncode, proc.stderr, time.monotonic() - t0, want=2, needles=(needle,), seconds=30
    )
    assert proc.stdout == ""


@pytest.mark.parametrize("argv", [["status"], ["keys", "list"], ["down", "--all"], ["keys", "create", "x"]])
def test_a_state_dir_that_is_a_symlink_loop_is_named(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It had read as an empty, healthy state (status, keys list, down --all: exit 0), and `keys create`
    had called the loop a file to move away."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "a"))
    code, _out, err, _ = run_main(argv, capsys)
    assert code == 2 and "is a symlink that leads to no folder" in err


def test_folders_from_settings_are_expanded_and_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LLMDECK_STATE_DIR=~/x` (quoted, or from a .env file) had made a folder named `~` in the working
    directory, and a relative one moved with it: a server started in one folder was not seen from another."""
    from llmdeck.settings import Settings

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLMDECK_STATE_DIR", "~/state")
    monkeypatch.setenv("LLMDECK_CACHE_DIR", "rel/cache")
    monkeypatch.setenv("LLMDECK_RESULTS_DIR", "~/runs")
    s = Settings()
    assert s.state_dir == tmp_path / "home" / "state"
    assert s.cache_dir == tmp_path / "rel" / "cache"
    assert s.results_dir == tmp_path / "home" / "runs"


@pytest.mark.parametrize(
    "argv",
    [["plan", "--help"], ["keys", "create", "-h"], ["up", "--help", "--", "-h"]],
    ids=["plan:help", "keys:help", "up:help"],
)
def test_a_commands_help_is_printed_whatever_the_settings_hold(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The root callback checks the settings before a command parses its options: a bad LLMDECK_*
    variable (or a misspelt one) had made `llmdeck CMD --help` exit 2 with the settings error instead of
    the help. The command itself still refuses them."""
    from cli_helpers import run_cli

    monkeypatch.setenv("LLMDECK_PORT", "0")
    monkeypatch.setenv("LLMDECK_PROT", "8000")
    code, out, err = run_cli(argv, capsys)
    assert code == 0 and "Usage: llmdeck" in out and "LLMDECK_PORT" not in err
    code, _, err = run_cli(["plan", "Qwen3-0.6B", "--machine", "h200", "--", "--help"], capsys)
    assert code == 2 and "LLMDECK_PORT" in err
