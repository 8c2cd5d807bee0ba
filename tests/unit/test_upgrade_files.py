"""Files an older llmdeck wrote (tests/fixtures/upgrade/, made by those versions, secrets replaced) read
by this one: they work, or a message says what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.gateway.keys import MAX_RPM, KeyStore, verify
from repo_paths import ROOT

UPGRADE = ROOT / "tests" / "fixtures" / "upgrade"


def _copy(name: str, tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / name
    shutil.copyfile(UPGRADE / name, path)
    path.chmod(mode)
    return path


def test_a_keys_file_with_an_rpm_an_older_keys_create_took_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`keys create --rpm 100000000` (llmdeck bfeaed4: any rpm >= 1): the whole file had been refused as
    "not a llmdeck keys file" (`keys list`, `keys create/revoke`, `gateway up`), its advice to move it
    away; the key now keeps the highest limit this llmdeck keeps, and every other key works as before."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    path = _copy("keys-bfeaed4-rpm-100000000.json", tmp_path)
    code, out, err = run_cli(["keys", "list", "--json", "--keys-file", str(path)], capsys)
    assert code == 0, err
    assert [(r["name"], r["rpm"]) for r in json.loads(out)] == [("big4", MAX_RPM), ("plain", None)]
    keys = KeyStore(path).load().keys
    assert verify("sk-llmdeck-fixture-big-rpm-key", keys) is keys[0]
    assert verify("sk-llmdeck-fixture-no-limit-key", keys) is keys[1]
    code, _, err = run_cli(["keys", "revoke", "plain", "--keys-file", str(path)], capsys)
    assert code == 0, err
    assert [k.name for k in KeyStore(path).load().keys] == ["big4"]


def test_a_keys_file_of_a_newer_llmdeck_says_to_upgrade_and_keep_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Back to an older llmdeck after a newer one rewrote the keys file: still refused (a newer llmdeck's
    file had been listed, added to and revoked from as this one's), but it had been "not a llmdeck keys
    file ... or move this one away"; it is named as a newer llmdeck's, the file kept as it is."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    path = _copy("keys-bfeaed4-rpm-100000000.json", tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": 2}))
    before = path.read_bytes()
    for args in (["keys", "list"], ["keys", "create", "new"], ["keys", "revoke", "plain"]):
        code, out, err = run_cli([*args, "--keys-file", str(path)], capsys)
        assert code == 2 and out == "", err
        assert "schema_version 2: a newer llmdeck wrote it" in err and "Upgrade llmdeck" in err, err
        assert "move this one away" not in err and "Traceback" not in err
    assert path.read_bytes() == before


def test_a_running_gateway_holds_every_module_it_may_import_later() -> None:
    """An in-place upgrade (`pip install -U llmdeck`) under a running gateway: its first on-demand start
    imported the new gateway.ondemand beside the old gateway.proxy already loaded (ImportError, a bare
    500 on every request until a restart). The gateway reads what it may import at its start."""
    import subprocess
    import sys

    code = (
        "import sys; from llmdeck.gateway.serve import preload; preload(); "
        "names = ('llmdeck.gateway.ondemand', 'llmdeck.runtime.service', 'llmdeck.engines.docker.engine'); "
        "print(all(n in sys.modules for n in names), 'typer' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["True", "False", "False"], out.stderr
