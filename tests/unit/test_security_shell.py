"""Shell injection: every value llmdeck prints for a shell is quoted; a server's strings are data.

The served model id of ``fake_hostile_models_server`` is ``x$(touch PWNED);y`touch PWNED2`'"$HOME``.
Before the fix, ``eval "$(llmdeck connect openai --print)"`` (the help's own example) ran it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmdeck.engines.docker import docker_run_argv, render_shell
from llmdeck.engines.spec import LaunchSpec
from security_helpers import HOSTILE_IDS, FakeHostileModelsServer, llmdeck_cmd, run_llmdeck, serve

# ESC and BEL: `connect --print` had written them as the text \x1b inside single quotes, which an
# eval set as another model id than the one served
CONTROL_ID = "m\x1b[31m$(touch PWNED)\x07"


@pytest.fixture(params=(*HOSTILE_IDS, CONTROL_ID))
def fake_hostile_models_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(URL, the model id it serves), for each hostile id."""
    handler = type("FakeHostileModelsServer", (FakeHostileModelsServer,), {"model_id": request.param})
    for url in serve(handler):
        yield url, request.param


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def _no_pwned(where: Path) -> None:
    assert not (where / "PWNED").exists() and not (where / "PWNED2").exists(), "the model id ran as code"


def test_eval_of_connect_openai_print_runs_nothing(
    fake_hostile_models_server: tuple[str, str], tmp_path: Path
) -> None:
    from security_helpers import cli_env

    url, model_id = fake_hostile_models_server
    env = cli_env(tmp_path)
    cmd = " ".join(shlex.quote(a) for a in llmdeck_cmd("connect", "openai", "--print", "--server"))
    script = f'eval "$({cmd} {url})"; printf %s "$OPENAI_MODEL"'
    proc = _bash(script, tmp_path, env)
    _no_pwned(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == model_id  # the exact string, as data


def test_sourcing_the_env_file_runs_nothing(
    fake_hostile_models_server: tuple[str, str], tmp_path: Path
) -> None:
    from security_helpers import cli_env

    url, model_id = fake_hostile_models_server
    dotenv = tmp_path / "llm.env"
    dotenv.write_text("# mine\nKEEP=1\n")
    proc = run_llmdeck(tmp_path, "connect", "openai", "--server", url, "--file", str(dotenv))
    assert proc.returncode == 0, proc.stderr
    out = _bash(f'. {shlex.quote(str(dotenv))}; printf %s "$OPENAI_MODEL|$KEEP"', tmp_path, cli_env(tmp_path))
    _no_pwned(tmp_path)
    assert out.stdout == f"{model_id}|1"
    assert "# mine" in dotenv.read_text()


def test_rendered_docker_command_and_log_header_are_quoted(tmp_path: Path) -> None:
    from llmdeck.engines.logfiles import header_line

    spec = LaunchSpec(
        name="demo",
        engine="docker",
        model="org/m",
        served_model_name=HOSTILE_IDS[2],
        vllm_args=["--x", "a b;c"],
    )
    argv = docker_run_argv(spec)
    line = render_shell(argv)
    assert shlex.split(line) == argv
    header = header_line(argv)
    assert shlex.split(header.split("starting: ", 1)[1]) == argv
    # pasted into a shell, nothing runs
    proc = _bash(f"set -- {line}; printf '%s\\n' \"$@\"", tmp_path, dict(os.environ))
    _no_pwned(tmp_path)
    assert proc.stdout.splitlines() == argv


def test_ollama_unload_hint_quotes_what_ollama_said() -> None:
    """The model names in preflight's Ollama hints come from Ollama's /api/ps: data, quoted."""
    import json

    from llmdeck.runtime.tenants import ollama_unload_command

    model = HOSTILE_IDS[2]
    tokens = shlex.split(ollama_unload_command(model, "http://127.0.0.1:11434/$(touch PWNED)"))
    assert tokens[:4] == ["curl", "-s", "-X", "POST"]
    assert tokens[4] == "http://127.0.0.1:11434/$(touch PWNED)/api/generate"
    assert json.loads(tokens[6])["model"] == model and len(tokens) == 7
