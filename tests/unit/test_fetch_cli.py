"""`llmdeck fetch`: argument checks, offline/proxy warnings, hub error mapping, download + verify.

No network: `huggingface_hub.snapshot_download` is replaced by `FakeSnapshotDownload`, which either
raises huggingface_hub's own exception classes or writes real files into the local dir; the hub
endpoint points at a closed port on 127.0.0.1, so the size look-up fails fast and is skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx2
import huggingface_hub
import pytest
from huggingface_hub import errors as hub_errors

from cli_helpers import run_cli
from llmdeck.fetch.hub import environment_warnings, validate_repo_id
from repo_paths import ROOT

CLOSED = "http://127.0.0.1:9"


def write_sharded_model(folder: Path) -> None:
    """A two-shard model with its index and config, as the hub lays it out (real safetensors)."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    shards = {
        "model-00001-of-00002.safetensors": {"model.embed_tokens.weight": np.ones((64, 16), np.float32)},
        "model-00002-of-00002.safetensors": {"model.norm.weight": np.ones((16,), np.float16)},
    }
    weight_map = {}
    for name, tensors in shards.items():
        save_file(tensors, str(folder / name))
        weight_map.update(dict.fromkeys(tensors, name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))


class FakeSnapshotDownload:
    """Stands in for huggingface_hub.snapshot_download: records its call, then raises or writes."""

    def __init__(self, raises: BaseException | None = None, truncate: bool = False) -> None:
        self.raises = raises
        self.truncate = truncate
        self.calls: list[dict[str, Any]] = []

    def __call__(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append({"repo_id": repo_id, **kwargs})
        if self.raises is not None:
            raise self.raises
        local_dir = Path(kwargs["local_dir"])
        write_sharded_model(local_dir)
        if self.truncate:
            shard = local_dir / "model-00001-of-00002.safetensors"
            shard.write_bytes(shard.read_bytes()[:50])
        return str(local_dir)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_ENDPOINT", CLOSED)
    for var in ("LLMDECK_DEBUG", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    for var in ("ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def install_fake(monkeypatch: pytest.MonkeyPatch, fake: FakeSnapshotDownload) -> FakeSnapshotDownload:
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    return fake


def http_error(cls: type[hub_errors.HfHubHTTPError], status: int, message: str) -> BaseException:
    request = httpx2.Request("GET", "https://huggingface.co/api/models/acme/thing/revision/main")
    return cls(message, response=httpx2.Response(status, request=request))


@pytest.mark.parametrize("repo_id", ["Qwen/Qwen3-0.6B", "gpt2", "unsloth/Qwen3.5-35B-A3B-GGUF", "a_b/c.d-e"])
def test_valid_repo_ids(repo_id: str) -> None:
    assert validate_repo_id(repo_id) == repo_id


@pytest.mark.parametrize(
    "repo_id,needle",
    [
        ("Qwen/Qwen3/0.6B", "not a valid"),
        ("Qwen//x", "not a valid"),
        ("_bad/x", "not a valid"),
        ("bad./x", "not a valid"),
        ("x--y/z", "not a valid"),
        ("has space/x", "not a valid"),
        ("https://huggingface.co/Qwen/Qwen3-0.6B", "is a URL"),
        ("./models/qwen", "local path"),
    ],
)
def test_bad_repo_ids_exit_2(
    repo_id: str, needle: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    code, _, err = run_cli(["fetch", repo_id], capsys)
    assert code == 2, err
    assert needle in err and "Traceback" not in err
    assert fake.calls == []  # nothing was attempted


def test_url_hint_names_the_repo_id(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["fetch", "https://hf-mirror.com/Qwen/Qwen3-0.6B/tree/main"], capsys)
    assert code == 2 and "llmdeck fetch Qwen/Qwen3-0.6B" in err


def test_bad_endpoint_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    code, _, err = run_cli(["fetch", "Qwen/Qwen3-0.6B", "--endpoint", "hf-mirror.com"], capsys)
    assert code == 2 and "--endpoint" in err and fake.calls == []


def test_missing_hub_extra_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    code, _, err = run_cli(["fetch", "Qwen/Qwen3-0.6B"], capsys)
    assert code == 2 and "huggingface_hub" in err and "pip install 'llmdeck" in err


def test_environment_warnings() -> None:
    assert environment_warnings({}) == []
    assert environment_warnings({"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": ""}) == []
    (offline,) = environment_warnings({"HF_HUB_OFFLINE": "1"})
    assert "HF_HUB_OFFLINE" in offline and "unset HF_HUB_OFFLINE TRANSFORMERS_OFFLINE" in offline
    both = environment_warnings({"TRANSFORMERS_OFFLINE": "yes", "https_proxy": "http://user:pw@proxy:3128"})
    assert len(both) == 2
    assert "TRANSFORMERS_OFFLINE" in both[0]
    assert "https_proxy" in both[1] and "pw" not in both[1]  # never echo proxy credentials


def test_offline_mode_warns_and_maps_to_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the message huggingface_hub's snapshot_download raises in offline mode
    install_fake(
        monkeypatch,
        FakeSnapshotDownload(
            raises=hub_errors.LocalEntryNotFoundError(
                "Cannot find an appropriate cached snapshot folder for the specified revision on the local "
                "disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, "
                "set 'HF_HUB_OFFLINE=0' as environment variable."
            )
        ),
    )
    code, _, err = run_cli(["fetch", "Qwen/Qwen3-0.6B"], capsys)
    assert code == 2
    assert "warning:" in err and "HF_HUB_OFFLINE" in err
    assert "offline mode is on" in err and "unset HF_HUB_OFFLINE TRANSFORMERS_OFFLINE" in err


def test_offline_mode_with_a_folder_of_other_files_is_named_as_offline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """huggingface_hub, offline, hands back a non-empty --local-dir as it is: that had been reported as
    the network's fault ("Cannot reach ... Check the network"), exit 1."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(kw["local_dir"]))
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "f.txt").write_text("mine")
    code, _, err = run_cli(["fetch", "Qwen/Qwen3-0.6B", "--config-only", "--local-dir", str(folder)], capsys)
    assert code == 2 and "offline mode is on" in err and "Check the network" not in err
    assert (folder / "f.txt").read_text() == "mine"


def test_a_local_dir_that_is_a_symlink_loop_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It had been downloaded into, and failed as a network error ("Symlink loop ... Check the network")."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    code, _, err = run_cli(["fetch", "Qwen/Qwen3-0.6B", "--local-dir", str(tmp_path / "a")], capsys)
    assert code == 2 and "is a symlink that leads to no folder" in err


def test_proxy_warning_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    install_fake(monkeypatch, FakeSnapshotDownload())
    code, out, err = run_cli(["fetch", "acme/thing", "--json"], capsys)
    assert code == 0, err
    assert "HTTPS_PROXY" in err
    assert json.loads(out)["warnings"][0].startswith("Proxy variables are set")


@pytest.mark.parametrize(
    "make_exc,code_want,needle",
    [
        (
            lambda: http_error(hub_errors.RepositoryNotFoundError, 404, "404 Repository Not Found"),
            2,
            "not found",
        ),
        (lambda: http_error(hub_errors.GatedRepoError, 403, "403 gated"), 2, "gated"),
        (lambda: http_error(hub_errors.RevisionNotFoundError, 404, "404 Revision Not Found"), 2, "revision"),
        (lambda: http_error(hub_errors.HfHubHTTPError, 401, "401 Unauthorized"), 2, "token"),
        (lambda: http_error(hub_errors.HfHubHTTPError, 503, "503 Service Unavailable"), 1, "hf-mirror.com"),
        (
            lambda: hub_errors.LocalEntryNotFoundError(
                "Got: ConnectError: [Errno -3] Temporary failure in name resolution\nAn error happened "
                "while trying to locate the files on the Hub ... check your internet connection"
            ),
            1,
            "HF_ENDPOINT=https://hf-mirror.com",
        ),
        (lambda: httpx2.ConnectError("[Errno 111] Connection refused"), 1, "whole files are kept"),
    ],
)
def test_hub_errors_are_mapped(
    make_exc: Any,
    code_want: int,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    install_fake(monkeypatch, FakeSnapshotDownload(raises=make_exc()))
    code, out, err = run_cli(["fetch", "acme/thing", "--revision", "v9"], capsys)
    assert code == code_want, err
    assert needle in err
    assert "Traceback" not in err and out == ""


def test_download_then_verify_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    code, out, err = run_cli(["fetch", "acme/thing", "--json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert data["schema_version"] == 1 and data["repo_id"] == "acme/thing"
    assert data["local_dir"] == str((tmp_path / "models" / "thing").resolve())  # models_dir / NAME
    assert data["endpoint"] == CLOSED  # from HF_ENDPOINT
    assert data["verify"]["ok"] is True and data["verify"]["sizes_checked"] is False
    assert data["architecture"] == "Qwen3ForCausalLM"
    assert data["files"] == 4
    (call,) = fake.calls
    assert call["allow_patterns"] is None and call["endpoint"] == CLOSED and call["revision"] is None


def test_a_password_in_the_endpoint_is_used_but_never_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The progress line ("asking URL about REPO") and the summary ("from URL") showed HF_ENDPOINT's
    password; the download itself still gets it."""
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    monkeypatch.setenv("HF_ENDPOINT", "http://bob:pw-9876@127.0.0.1:9")
    code, out, err = run_cli(["fetch", "acme/thing"], capsys)
    assert code == 0, err
    assert "pw-9876" not in out + err and "asking http://bob:<redacted>@127.0.0.1:9 about" in err
    assert "from http://bob:<redacted>@127.0.0.1:9" in out
    assert fake.calls[0]["endpoint"] == "http://bob:pw-9876@127.0.0.1:9"
    code, out, _ = run_cli(["fetch", "acme/thing", "--json"], capsys)
    assert code == 0 and json.loads(out)["endpoint"] == "http://bob:<redacted>@127.0.0.1:9"


def test_an_endpoint_that_answers_a_web_page_is_not_a_hub(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A router's login page (HTTP 200, HTML) ended in "failed: JSONDecodeError: Expecting value"."""
    from fake_servers import running

    with running("fake_html_server") as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        code, out, err = run_cli(["fetch", "acme/thing", "--config-only", "--timeout", "5"], capsys)
    assert code == 1 and out == "" and "Traceback" not in err, err
    assert f"{url} did not answer like a Hugging Face hub" in err
    assert "HTTP 200 with an HTML page ('<html><body>router login" in err and "HF_ENDPOINT" in err
    assert "JSONDecode" not in err and "Expecting value" not in err


def test_a_later_reply_that_is_not_json_is_not_a_hub() -> None:
    """huggingface_hub's own questions after the first: its JSONDecodeError said in the same words."""
    from llmdeck.errors import DownloadError
    from llmdeck.fetch.hub import map_hub_error

    exc = json.JSONDecodeError("Expecting value", "<!DOCTYPE html><title>Sign in</title>", 0)
    err = map_hub_error(exc, "acme/thing", "http://mirror.local", None)
    assert isinstance(err, DownloadError) and "JSONDecode" not in err.render()
    assert "http://mirror.local did not answer like a Hugging Face hub" in err.message
    assert "an HTML page ('<!DOCTYPE html>" in err.message and "HF_ENDPOINT" in err.render()


def test_endpoint_local_dir_revision_are_passed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    target = tmp_path / "here"
    args = ["fetch", "acme/thing", "--local-dir", str(target), "--revision", "abc123"]
    code, out, err = run_cli([*args, "--endpoint", "http://127.0.0.1:7/"], capsys)
    assert code == 0, err
    (call,) = fake.calls
    assert call["local_dir"] == str(target) and call["revision"] == "abc123"
    assert call["endpoint"] == "http://127.0.0.1:7"
    assert "thing" in out and "llmdeck up --model" in out


def test_config_only_patterns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    code, out, err = run_cli(["fetch", "acme/thing", "--config-only", "--json"], capsys)
    assert code == 0, err
    patterns = fake.calls[0]["allow_patterns"]
    for needed in ("config.json", "tokenizer.json", "tokenizer_config.json", "*.safetensors.index.json"):
        assert needed in patterns
    assert not any(p.endswith(".safetensors") for p in patterns)
    assert json.loads(out)["config_only"] is True


def test_include_patterns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    code, _, err = run_cli(["fetch", "acme/thing", "--include", "*.json", "--include", "*.txt"], capsys)
    assert code == 0, err
    assert fake.calls[0]["allow_patterns"] == ["*.json", "*.txt"]


def test_broken_download_fails_verification_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_fake(monkeypatch, FakeSnapshotDownload(truncate=True))
    code, out, err = run_cli(["fetch", "acme/thing"], capsys)
    assert code == 1
    assert "did not verify" in err and "model-00001-of-00002.safetensors" in err
    assert out == ""


def _run_real(args: list[str], env_extra: dict[str, str], tmp_path: Path) -> Any:
    import os
    import subprocess

    src = str(ROOT / "src")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(
        {
            "PYTHONPATH": src + os.pathsep + env.get("PYTHONPATH", ""),
            "LLMDECK_MODELS_DIR": str(tmp_path / "models"),
            "HF_HOME": str(tmp_path / "hf-home"),
            **env_extra,
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "llmdeck", "fetch", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_real_hub_client_unreachable_endpoint_exit_1(tmp_path: Path) -> None:
    """The real snapshot_download against a closed port on 127.0.0.1: a network failure, exit 1."""
    result = _run_real(["acme/thing", "--endpoint", CLOSED], {}, tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Cannot reach http://127.0.0.1:9" in result.stderr and "hf-mirror.com" in result.stderr
    assert "Traceback" not in result.stderr


def test_real_hub_client_unreachable_with_a_folder_that_is_no_model_exit_1(tmp_path: Path) -> None:
    """huggingface_hub hands back any non-empty --local-dir when the hub is unreachable: that folder
    (here: notes, no weights) is not reported as a download of the repo."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("not a model\n")
    result = _run_real(["acme/thing", "--endpoint", CLOSED, "--local-dir", str(folder)], {}, tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"{folder} holds no model weights" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == "" and (folder / "todo.txt").is_file()


def test_real_hub_client_unreachable_config_only_with_a_folder_that_is_no_model_exit_1(
    tmp_path: Path,
) -> None:
    """The same with --config-only: a folder without config.json had been "fetched", exit 0."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("not a model\n")
    args = ["acme/thing", "--config-only", "--endpoint", CLOSED, "--local-dir", str(folder)]
    result = _run_real(args, {}, tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"{folder} holds no config.json" in result.stderr and result.stdout == ""


def test_an_empty_local_dir_is_refused_not_the_current_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    code, _, err = run_cli(["fetch", "acme/thing", "--local-dir", ""], capsys)
    assert code == 2 and "--local-dir" in err and "empty" in err
    assert fake.calls == []


@pytest.mark.parametrize("revision", ["", "\udcff", "a" * 100_000, "main\n"])
def test_a_bad_revision_is_exit_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], revision: str
) -> None:
    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    code, _, err = run_cli(["fetch", "acme/thing", "--revision", revision], capsys)
    assert code == 2 and "--revision" in err and len(err) < 1000
    assert fake.calls == []


def test_real_hub_client_unreachable_with_a_complete_copy_exit_0(tmp_path: Path) -> None:
    """A complete copy already on disk still serves when the hub is unreachable (the resume case)."""
    folder = tmp_path / "thing"
    write_sharded_model(folder)
    result = _run_real(
        ["acme/thing", "--endpoint", CLOSED, "--local-dir", str(folder), "--json"], {}, tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["verify"]["ok"] is True


def test_real_hub_client_offline_mode_exit_2(tmp_path: Path) -> None:
    result = _run_real(["acme/thing"], {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": CLOSED}, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "warning:" in result.stderr and "offline mode is on" in result.stderr


@pytest.mark.parametrize("keep", [False, True])
def test_fetch_leaves_no_page_cache_of_what_it_downloaded_unless_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, keep: bool
) -> None:
    from llmdeck.util.pagecache import resident_bytes

    install_fake(monkeypatch, FakeSnapshotDownload())
    code, out, err = run_cli(
        ["fetch", "acme/thing", "--json", *(["--keep-page-cache"] if keep else [])], capsys
    )
    assert code == 0, err
    files = [p for p in (tmp_path / "models" / "thing").rglob("*") if p.is_file()]
    resident = sum(resident_bytes(p) for p in files)  # mincore: the kernel's own answer
    data = json.loads(out)
    if keep:
        assert resident > 0 and data["page_cache_dropped_bytes"] == 0
    else:
        assert resident == 0 and data["page_cache_dropped_bytes"] > 0


def test_a_file_of_the_users_in_the_local_dir_is_not_overwritten(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """hf's download had replaced an edited config.json and weights of the user's own, "verified"."""
    import llmdeck.fetch.hub as hub
    from llmdeck.fetch.guards import HubFiles

    fake = install_fake(monkeypatch, FakeSnapshotDownload())
    files = HubFiles(sizes={"config.json": 10, "model.safetensors": 99})
    monkeypatch.setattr(hub, "hub_files", lambda *a, **k: files)
    target = tmp_path / "userdir"
    target.mkdir()
    (target / "config.json").write_text('{"my": "precious edited config"}')
    (target / "notes.txt").write_text("not in the repo: no matter")
    code, _out, err = run_cli(["fetch", "acme/thing", "--local-dir", str(target)], capsys)
    assert code == 2 and "config.json" in err and "notes.txt" not in err and not fake.calls
    assert (target / "config.json").read_text() == '{"my": "precious edited config"}'
    meta = target / ".cache" / "huggingface" / "download"  # one hf downloaded itself: replaced, as before
    meta.mkdir(parents=True)
    (meta / "config.json.metadata").write_text("x")
    run_cli(["fetch", "acme/thing", "--local-dir", str(target)], capsys)
    assert fake.calls  # not refused (the fake's files then fail the fake sizes: no matter here)


def test_an_include_that_matches_nothing_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """0 files had been "verified" and `llmdeck up --model <empty folder>` suggested."""

    def writes_nothing(repo_id: str, **kwargs: Any) -> str:
        Path(kwargs["local_dir"]).mkdir(parents=True, exist_ok=True)
        return str(kwargs["local_dir"])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", writes_nothing)
    code, out, err = run_cli(["fetch", "acme/thing", "--include", "*.xyz"], capsys)
    assert code == 2 and "matched no file" in err and "llmdeck up" not in out


def test_a_rate_limit_asking_a_long_wait_is_an_error_not_a_sleep() -> None:
    """Retry-After: 100000 had been slept out by huggingface_hub, SIGTERM unheard."""
    from types import SimpleNamespace

    from llmdeck.errors import DownloadError
    from llmdeck.fetch.hubcap import _refuse_long_waits

    def reply(status: int, after: str) -> Any:
        request = SimpleNamespace(url=SimpleNamespace(host="hub.example"))
        return SimpleNamespace(status_code=status, headers={"retry-after": after}, request=request)

    with pytest.raises(DownloadError, match="asks to wait 100000 s"):
        _refuse_long_waits(reply(429, "100000"))
    _refuse_long_waits(reply(429, "5"))  # a short wait: hf waits it out
    _refuse_long_waits(reply(200, "100000"))


def test_a_control_character_in_the_endpoint_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["fetch", "acme/thing", "--endpoint", "http://127.0.0.1:7/\x1b[31mx"], capsys)
    assert code == 2 and "--endpoint" in err


def test_the_serve_command_quotes_the_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`serve it: llmdeck up --model /tmp/a b;$(id)` had been printed as is, for a shell to run."""
    install_fake(monkeypatch, FakeSnapshotDownload())
    target = tmp_path / "a b;$(id)"
    code, out, err = run_cli(["fetch", "acme/thing", "--local-dir", str(target)], capsys)
    assert code == 0, err
    assert f"llmdeck up --model '{target.resolve()}'" in out


def _hub_of_the_fake(tmp_path: Path, *, corrupt: str | None = None) -> Any:
    """The hub's metadata of the fake's files: their sizes and sha256 (one hash wrong with ``corrupt``)."""
    from llmdeck.fetch.guards import HubFiles
    from llmdeck.fetch.verify import file_sha256

    ref = tmp_path / "reference"
    write_sharded_model(ref)
    shards = sorted(p.name for p in ref.glob("*.safetensors"))
    sha = {n: ("0" * 64 if n == corrupt else file_sha256(ref / n)) for n in shards}
    return HubFiles(sizes={p.name: p.stat().st_size for p in ref.iterdir()}, sha256=sha)


@pytest.mark.parametrize("corrupt", [None, "model-00002-of-00002.safetensors"])
def test_checksum_compares_each_hashed_file_with_the_hub(
    corrupt: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--checksum`: a copy whose bytes differ from the hub's (same size, headers whole) had verified."""
    import llmdeck.fetch.hub as hub

    install_fake(monkeypatch, FakeSnapshotDownload())
    files = _hub_of_the_fake(tmp_path, corrupt=corrupt)
    monkeypatch.setattr(hub, "hub_files", lambda *a, **k: files)
    monkeypatch.setattr(hub, "check_answers", lambda *a, **k: None)
    plain = ["fetch", "acme/thing", "--local-dir", str(tmp_path / "plain"), "--json"]
    code, out, err = run_cli(plain, capsys)  # not asked: not read
    assert code == 0, err
    assert json.loads(out)["verify"]["sha256_checked"] == 0
    code, out, err = run_cli(["fetch", "acme/thing", "--checksum"], capsys)
    if corrupt is None:
        assert code == 0 and "sha256 of 2 files match" in out, err
    else:
        flat = " ".join(err.split())
        assert code == 1 and f"{corrupt}: sha256" in flat and "a corrupt copy" in flat, flat
        assert "Delete the broken" in flat


def test_checksum_without_the_hubs_metadata_says_nothing_was_compared(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    install_fake(monkeypatch, FakeSnapshotDownload())
    code, out, err = run_cli(["fetch", "acme/thing", "--checksum", "--json"], capsys)
    assert code == 0, err
    assert "--checksum: no sha256 compared (the hub's metadata was not available)" in " ".join(err.split())
    assert json.loads(out)["verify"]["sha256_checked"] == 0


def test_hub_files_reads_sizes_and_the_lfs_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub's model_info (files_metadata) as huggingface_hub parses the API's reply."""
    from huggingface_hub.hf_api import ModelInfo

    from llmdeck.fetch.guards import hub_files

    lfs = {"size": 10, "sha256": "AB" * 32, "pointerSize": 130}
    siblings = [
        {"rfilename": "model.safetensors", "size": 10, "lfs": lfs},
        {"rfilename": "config.json", "size": 5},
    ]
    info = ModelInfo(id="acme/thing", siblings=siblings)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda *a, **k: info)
    files = hub_files(CLOSED, "acme/thing", None)
    assert files is not None
    assert files.sizes == {"model.safetensors": 10, "config.json": 5}
    assert files.sha256 == {"model.safetensors": "ab" * 32}  # lower-cased, as hashlib writes it


def test_other_download_failures_are_said_in_words_not_python_classes() -> None:
    """The last case of map_hub_error had read "failed: ReadError: ..." (and "failed: ReadError: ." for
    one with no text); a full disk had said to check the network."""
    import errno

    import httpx

    from llmdeck.fetch.hub import map_hub_error

    err = map_hub_error(httpx.ReadError(""), "acme/thing", "http://mirror.local", None)
    assert err.message == (
        "Downloading acme/thing from http://mirror.local failed: "
        "the connection failed while the reply was read."
    )
    full = OSError(errno.ENOSPC, "No space left on device")
    err = map_hub_error(full, "acme/thing", "http://mirror.local", None)
    assert "failed: the disk is full" in err.message and "Free some disk space" in err.render()
    assert "OSError" not in err.render() and "network" not in err.render()
