"""tests/real_clients.py, the installer of the real clients: it agrees with llmdeck on what each client
is and which version was recorded, and its pre-install (`make test` runs it before the venv exists)
needs nothing beyond the standard library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from llmdeck.checks.traffic import recordings
from llmdeck.evals.agents import BINARIES, NPM_PACKAGES
from real_clients import NPM, recorded_version
from repo_paths import TESTS


def test_the_npm_table_and_the_recorded_versions_agree_with_llmdeck() -> None:
    for client, package in NPM_PACKAGES.items():
        assert NPM[client] == (package, BINARIES[client])
    for client in NPM:
        assert recorded_version(client) == recordings()[client].client_version


def test_the_pre_install_runs_on_the_standard_library_alone_and_says_when_npm_is_missing(
    tmp_path: Path,
) -> None:
    # -S: no site-packages (no pytest, pydantic or llmdeck); a PATH without npm: nothing is installed
    env = {**os.environ, "PATH": str(tmp_path)}
    argv = [sys.executable, "-S", str(TESTS / "real_clients.py")]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "npm is not installed" in res.stdout and not res.stderr
