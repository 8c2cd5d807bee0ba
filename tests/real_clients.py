"""The real clients the e2e tests run, installed into .cache/clients (not in git).

npm packages at the version llmdeck was written against; aider's own argument parser from its PyPI
wheel (unpacked, not installed: its dependency tree is large and only ``aider.args`` is exercised).
A registry that cannot be reached skips the test that needed the client, saying why.

``python3 tests/real_clients.py`` installs every npm client at its recorded version ahead of the tests:
`make test` runs it beside llmdeck's own install, which keeps one of the two cores busy and leaves
the other idle for a minute; the tests then find the clients in place (five npm installs, ~35 s one
after the other with npm's cache warm, had run inside the integration lanes). Standard library only at
the top of this module, so that this runs before the venv exists; what it could not install, the test
that needs the client installs or skips, as before.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NoReturn

from repo_paths import ROOT, SRC

CLIENTS_DIR = ROOT / ".cache" / "clients"
RECORDINGS_DIR = SRC / "llmdeck" / "checks" / "recordings"
AIDER_VERSION = "0.86.2"
# what aider-chat 0.86.2's METADATA pins for the parser (Requires-Dist)
AIDER_PARSER_DEPS = ("configargparse==1.7.1", "shtab==1.8.0")
# client (as llmdeck names it) -> (npm package, its binary); test_real_clients checks llmdeck agrees
NPM: dict[str, tuple[str, str]] = {
    "claude-code": ("@anthropic-ai/claude-code", "claude"),
    "codex": ("@openai/codex", "codex"),
    "opencode": ("opencode-ai", "opencode"),
    "continue": ("@continuedev/cli", "cn"),
    "cline": ("cline", "cline"),
}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.replace("-", ".").split("."))


def recorded_version(client: str) -> str:
    """The client version of its newest recording: what llmdeck.checks.traffic.recordings() picks,
    read with the standard library (test_real_clients checks the two agree)."""
    versions = []
    for path in RECORDINGS_DIR.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("client") == client:
            versions.append(str(data["client_version"]))
    return max(versions, key=_version_key)


def binary_path(client: str) -> Path:
    """Where the client's binary is once installed into .cache/clients."""
    return CLIENTS_DIR / client / "node_modules" / ".bin" / NPM[client][1]


def installed_version(client: str) -> str | None:
    """The version of the client's npm package in .cache/clients (its package.json), None if absent."""
    package_json = CLIENTS_DIR / client / "node_modules" / NPM[client][0] / "package.json"
    try:
        version = json.loads(package_json.read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return None
    return str(version) if binary_path(client).exists() else None


def _npm_install(client: str, version: str) -> subprocess.CompletedProcess[str]:
    package = NPM[client][0]
    argv = ["npm", "install", "--prefix", str(CLIENTS_DIR / client), f"{package}@{version}"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


def npm_client(client: str, version: str) -> Path:
    """The client's npm package at ``version`` in .cache/clients/<client> (installed, or reinstalled
    at another version, when needed); skips the test when npm cannot install it."""
    import pytest

    from llmdeck.util.filelock import exclusive

    exe = binary_path(client)
    # one install at a time per client: `make integration`'s two workers may both want it at once
    with exclusive(CLIENTS_DIR / f"{client}.lock", timeout_s=1800, what=f"install of {client}"):
        if installed_version(client) == version:
            return exe
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed: cannot install the real client")
        res = _npm_install(client, version)
    if res.returncode != 0 or installed_version(client) != version:
        why = f"npm could not install {NPM[client][0]}@{version} (registry unreachable?)"
        pytest.skip(f"{why}: {res.stderr[-400:]}")
    return exe


def npm_recorded(client: str) -> Path:
    """A client at the version its recorded traffic came from (llmdeck.checks.traffic recordings)."""
    return npm_client(client, recorded_version(client))


def npm_pinned(client: str) -> Path:
    """An agent the eval runs (claude-code, codex, opencode) at llmdeck's pinned version."""
    from llmdeck.evals.agents import PINNED

    return npm_client(client, PINNED[client])


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
            _skip(f"pip could not download aider-chat {AIDER_VERSION}: {res.stderr[-400:]}")
        with zipfile.ZipFile(found[0]) as whl:
            whl.extractall(src)
    if not (deps / "configargparse.py").exists():
        res = _pip("install", "--no-deps", "--target", str(deps), *AIDER_PARSER_DEPS)
        if res.returncode != 0:
            _skip(f"pip could not install {' '.join(AIDER_PARSER_DEPS)}: {res.stderr[-400:]}")
    return f"{src}:{deps}"


def _skip(why: str) -> NoReturn:
    import pytest

    pytest.skip(why)


def main() -> int:
    """Install every npm client at its recorded version; say what was done, one line each."""
    if shutil.which("npm") is None:
        print("npm is not installed: the tests that run the real clients will skip")
        return 0
    CLIENTS_DIR.mkdir(parents=True, exist_ok=True)
    for client in NPM:
        version = recorded_version(client)
        if installed_version(client) == version:
            print(f"{client} {version}: already installed")
            continue
        try:
            res = _npm_install(client, version)
            said = "installed" if res.returncode == 0 else f"not installed: {res.stderr[-300:]}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            said = f"not installed: {exc}"
        print(f"{client} {version}: {said}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
