"""The real clients the e2e tests run, installed on first use into .cache/clients (not in git).

npm packages at the version llmdeck was written against; aider's own argument parser from its PyPI
wheel (unpacked, not installed: its dependency tree is large and only ``aider.args`` is exercised).
A registry that cannot be reached skips the test that needed the client, saying why.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from llmdeck.util.filelock import exclusive
from repo_paths import ROOT

CLIENTS_DIR = ROOT / ".cache" / "clients"
AIDER_VERSION = "0.86.2"
# what aider-chat 0.86.2's METADATA pins for the parser (Requires-Dist)
AIDER_PARSER_DEPS = ("configargparse==1.7.1", "shtab==1.8.0")


def npm_client(package: str, version: str, client: str, binary: str, *, exact: bool = False) -> Path:
    """``package@version`` from npm into .cache/clients/<client>; ``exact`` reinstalls another version."""
    from llmdeck.evals.agents import client_version

    prefix = CLIENTS_DIR / client
    exe = prefix / "node_modules" / ".bin" / binary
    # one install at a time per client: `make integration`'s two workers may both want it at once
    with exclusive(CLIENTS_DIR / f"{client}.lock", timeout_s=1800, what=f"install of {client}"):
        if exe.exists() and (not exact or client_version(exe) == version):
            return exe
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed: cannot install the real client")
        res = subprocess.run(
            ["npm", "install", "--prefix", str(prefix), f"{package}@{version}"],
            capture_output=True,
            text=True,
            timeout=900,
        )
    if res.returncode != 0 or not exe.exists():
        pytest.skip(f"npm could not install {package}@{version} (registry unreachable?): {res.stderr[-400:]}")
    return exe


def npm_recorded(package: str, client: str, binary: str) -> Path:
    """A client at the version its recorded traffic came from (llmdeck.checks.traffic recordings)."""
    from llmdeck.checks.traffic import recordings

    return npm_client(package, recordings()[client].client_version, client, binary, exact=True)


def npm_pinned(client: str) -> Path:
    """An agent the eval runs (claude-code, codex, opencode) at llmdeck's pinned version."""
    from llmdeck.evals.agents import BINARIES, NPM_PACKAGES, PINNED

    return npm_client(NPM_PACKAGES[client], PINNED[client], client, BINARIES[client], exact=True)


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args, "-q", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def aider_parser_path() -> str:
    """A PYTHONPATH under which ``from aider.args import get_parser`` imports: the unpacked wheel
    and the two packages the parser needs (skip when PyPI cannot be reached)."""
    root = CLIENTS_DIR / f"aider-{AIDER_VERSION}"
    src, deps = root / "src", root / "deps"
    if not (src / "aider" / "args.py").exists():
        wheels = root / "wheel"
        res = _pip("download", f"aider-chat=={AIDER_VERSION}", "--no-deps", "-d", str(wheels))
        found = sorted(wheels.glob("aider_chat-*.whl"))
        if res.returncode != 0 or not found:
            pytest.skip(f"pip could not download aider-chat {AIDER_VERSION}: {res.stderr[-400:]}")
        with zipfile.ZipFile(found[0]) as whl:
            whl.extractall(src)
    if not (deps / "configargparse.py").exists():
        res = _pip("install", "--no-deps", "--target", str(deps), *AIDER_PARSER_DEPS)
        if res.returncode != 0:
            pytest.skip(f"pip could not install {' '.join(AIDER_PARSER_DEPS)}: {res.stderr[-400:]}")
    return f"{src}:{deps}"
