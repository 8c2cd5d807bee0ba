"""Secrets (``-- --api-key X``, ``HF_TOKEN``, Authorization headers, passwords in URLs) appear in no
log header, server record, ``status --json``, bench result, spec file, ``connect --json`` or
``docker run`` line; the engine gets the key through its environment (``VLLM_API_KEY``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from llmdeck.engines.spec import LaunchSpec
from llmdeck.settings import Settings
from llmdeck.util.net import free_port
from security_helpers import SECRET, FakeHostileModelsServer, fake_engine, fake_model_dir, serve


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LLMDECK_DEBUG", raising=False)
    monkeypatch.delenv("LLMDECK_API_KEY", raising=False)


def _settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")


def _all_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


@pytest.fixture()
def dead_keyed_server(tmp_path: Path) -> Iterator[Any]:
    """A server started by llmdeck with `-- --api-key SECRET` whose engine (fake_dying_engine) printed
    its input and died: the record, the log and the status of a dead server are all there."""
    from llmdeck.runtime.service import UpOptions, start

    settings = _settings(tmp_path)
    spec = LaunchSpec(
        name="keyed",
        engine="venv",
        python=str(fake_engine(tmp_path)),
        model=str(fake_model_dir(tmp_path)),
        port=free_port(),
        vllm_args=["--max-model-len", "2048", "--api-key", SECRET],
        env={"HF_TOKEN": "hf_" + "a" * 30},
    )
    record = start(spec, settings, UpOptions.bare())  # started, not awaited: the engine dies
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "key length" not in record.log_path.read_text():
        time.sleep(0.1)
    time.sleep(0.3)
    yield record, settings


def test_no_secret_in_header_record_or_status(
    dead_keyed_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    record, settings = dead_keyed_server
    log = record.log_path.read_text()
    header = log.splitlines()[0]
    assert header.startswith("# llmdeck:") and SECRET not in header and "hf_aaaa" not in header
    assert f"key length {len(SECRET)}" in log  # the engine got the key, through VLLM_API_KEY
    assert "--api-key" not in log.split("fake engine argv:", 1)[1].splitlines()[0]  # not through argv
    record_text = (settings.servers_dir / "keyed.json").read_text()
    assert SECRET not in record_text and "hf_aaaa" not in record_text
    code, out, err = run_cli(["status", "keyed", "--json"], capsys)
    assert code == 0, err
    status = json.loads(out)[0]
    assert status["state"] == "dead" and "fake engine" in status["log_tail"]
    assert SECRET not in out and "hf_aaaa" not in out
    assert SECRET not in err


def test_files_that_hold_secrets_are_0600(dead_keyed_server: Any) -> None:
    record, settings = dead_keyed_server
    secrets = settings.servers_dir / "keyed.secrets"
    assert json.loads(secrets.read_text())["VLLM_API_KEY"] == SECRET
    for path in (secrets, settings.servers_dir / "keyed.json", record.log_path):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    assert stat.S_IMODE(os.stat(settings.servers_dir).st_mode) == 0o700


def test_bench_result_and_report_json_hold_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmdeck.bench.result_schema import ScenarioSpec, TargetInfo
    from llmdeck.bench.runner import BenchOptions, new_result
    from llmdeck.util.atomic import atomic_write_json

    target = TargetInfo(
        base_url="http://user:hunter2pw@127.0.0.1:8000",
        model="m",
        server_args=["python", "-m", "vllm", "--api-key", SECRET, f"--hf-token={SECRET}"],
    )
    result = new_result(
        target, [ScenarioSpec(name="s", input_len=8, output_len=8, num_prompts=1)], BenchOptions(), None
    )
    out = tmp_path / "r.json"
    atomic_write_json(out, result)
    text = out.read_text()
    assert SECRET not in text and "hunter2pw" not in text
    # an older result file that still holds the key: report --json does not show it
    data = json.loads(text)
    data["target"]["server_args"] = ["vllm", "serve", "--api-key", SECRET]
    out.write_text(json.dumps(data))
    code, shown, err = run_cli(["report", str(out), "--json"], capsys)
    assert code == 0, err
    assert SECRET not in shown and "<redacted>" in shown


def test_plan_spec_out_and_json_hold_no_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_out = tmp_path / "spec.json"
    args = ["plan", "Qwen3-0.6B", "--machine", "dgx-spark", "--spec-out", str(spec_out), "--json"]
    code, out, err = run_cli([*args, "--", "--api-key", SECRET], capsys)
    assert code in (0, 1), err
    assert SECRET not in spec_out.read_text() and SECRET not in out and SECRET not in err
    assert "VLLM_API_KEY" in err  # the note says how to pass the key at start time
    assert "--api-key" not in json.loads(spec_out.read_text())["vllm_args"]


@pytest.mark.parametrize("flag", ["--api-ke", "--api-k", "--api"])
def test_an_abbreviated_key_flag_is_a_key_flag(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's argparse reads --api-ke as --api-key: plan --json had printed its value in clear."""
    spec_out = tmp_path / "spec.json"
    args = ["plan", "Qwen3-0.6B", "--machine", "dgx-spark", "--spec-out", str(spec_out), "--json"]
    _code, out, err = run_cli([*args, "--", flag, "weakkey4242"], capsys)
    assert "weakkey4242" not in out + err + (spec_out.read_text() if spec_out.exists() else "")


def test_argv_written_as_a_list_or_a_url_token_is_redacted_in_text() -> None:
    """Log lines `logs` and `status` show: a Python repr of an argv, a JSON argv, a URL's query token."""
    from llmdeck.engines.secrets import split_secrets
    from llmdeck.util.redact import redact_text

    for line in [
        "argv: ['vllm', 'serve', '/m', '--api-key', 'weakkey4242']",
        '["vllm","serve","--api-key","weakkey4242"]',
        "GET http://h:1/v1/models?token=weakkey4242&x=1",
        "vllm serve --api-ke weakkey4242 --port 8000",
    ]:
        assert "weakkey4242" not in redact_text(line), line
    spec = LaunchSpec(model="m", engine="cpu", vllm_args=["--api-ke", "weakkey4242", "--port", "1"])
    clean, secrets = split_secrets(spec)  # off the command line, as --api-key is
    assert secrets == {"VLLM_API_KEY": "weakkey4242"} and "weakkey4242" not in clean.vllm_args


@pytest.fixture()
def fake_key_models_server() -> Iterator[str]:
    handler = type("FakeKeyModelsServer", (FakeHostileModelsServer,), {"model_id": "tiny", "key": SECRET})
    yield from serve(handler)


def test_connect_json_holds_no_secret(
    fake_key_models_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for client in ("openai", "opencode", "continue", "cline", "openclaw"):
        code, out, err = run_cli(
            ["connect", client, "--server", fake_key_models_server, "--api-key", SECRET, "--print", "--json"],
            capsys,
        )
        assert code == 0, err
        assert SECRET not in out and SECRET not in err, client
        assert "<redacted>" in out


@pytest.mark.parametrize("key", ["null", "0", "vllm"])
def test_connect_json_with_a_short_key_is_json_and_hides_the_key_only(key: str) -> None:
    """The key had been replaced in the JSON text: `null` or `0` then failed to parse (an internal error
    after the config was written) and `vllm` turned the provider and model names into <redacted>."""
    from llmdeck.util.redact import hide_key

    data = {
        "provider": {"vllm": {"options": {"apiKey": key, "headers": {"Authorization": f"Bearer {key}"}}}},
        "model": "vllm/tiny",
        "env": f"OPENAI_API_KEY={key}",
        "argv": ["cline", "auth", "--apikey", key],
        "count": 0,
        "none": None,
    }
    shown = hide_key(data, key)
    options = shown["provider"]["vllm"]["options"]
    assert options == {"apiKey": "<redacted>", "headers": {"Authorization": "Bearer <redacted>"}}
    assert shown["model"] == "vllm/tiny" and shown["env"] == "OPENAI_API_KEY=<redacted>"
    assert shown["argv"][-1] == "<redacted>" and shown["count"] == 0 and shown["none"] is None


def test_docker_run_line_holds_no_secret(tmp_path: Path) -> None:
    from llmdeck.engines.docker import DockerCLI, docker_run_argv

    spec = LaunchSpec(
        name="d",
        engine="docker",
        model="org/m",
        vllm_args=["--api-key", SECRET],
        env={"HF_TOKEN": SECRET, "A": "1"},
    )
    argv = docker_run_argv(spec)
    assert SECRET not in " ".join(argv)
    assert argv[argv.index("VLLM_API_KEY") - 1 : argv.index("VLLM_API_KEY") + 1] == ["-e", "VLLM_API_KEY"]
    assert "HF_TOKEN" in argv and "A=1" in argv and "--api-key" not in argv
    seen: dict[str, Any] = {}

    def runner(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        seen["argv"], seen["env"] = argv, env
        return subprocess.CompletedProcess(argv, 0, "abc123\n", "")

    DockerCLI(run=runner).run_container(spec)
    assert SECRET not in " ".join(seen["argv"])
    assert seen["env"]["VLLM_API_KEY"] == SECRET and seen["env"]["HF_TOKEN"] == SECRET


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("starting: vllm serve m --api-key sk-1234 --port 8", "sk-1234"),
        ("starting: vllm serve m --api-key=sk-1234", "sk-1234"),
        ("non-default args: {'api_key': ['sk-1234'], 'model': 'm'}", "sk-1234"),
        ("Authorization: Bearer sk-1234", "sk-1234"),
        ("curl -H 'Authorization: Bearer sk-1234' http://h", "sk-1234"),
        ("GET http://bob:pw-1234@host:8000/v1/models", "pw-1234"),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz01", "hf_abcdefghijklmnopqrstuvwxyz01"),
        ('{"apiKey": "sk-1234"}', "sk-1234"),
        ("export OPENAI_API_KEY='sk-1234'", "sk-1234"),
        ("token hf_abcdefghijklmnopqrstuvwxyz01 in a message", "hf_abcdefghijklmnopqrstuvwxyz01"),
        ('experimental_bearer_token = "weakkey1"', "weakkey1"),  # Codex's config.toml
        ("cline auth -p openai -k sk-llmdeck-abcdefghijklmnop -b http://h", "sk-llmdeck-abcdefghijklmnop"),
        ("x-api-key sk-ant-api03-abcdefghijklmnop", "sk-ant-api03-abcdefghijklmnop"),
    ],
)
def test_redact_text(text: str, hidden: str) -> None:
    from llmdeck.util.redact import redact_text

    out = redact_text(text)
    assert hidden not in out and "<redacted>" in out


def test_cloud_credentials_in_a_specs_env_are_secrets() -> None:
    """AWS_SECRET_ACCESS_KEY had been printed by `up --json` and stored in the record in clear."""
    from llmdeck.util.redact import is_secret_name, redact_data

    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GITHUB_TOKEN", "SSH_PRIVATE_KEY"):
        assert is_secret_name(name), name
    for name in ("AWS_ACCESS_KEY_ID", "eos_token", "pad_token", "max_tokens"):
        assert not is_secret_name(name), name
    assert redact_data({"env": {"AWS_SECRET_ACCESS_KEY": "awsSECRETxyz123"}}) == {
        "env": {"AWS_SECRET_ACCESS_KEY": "<redacted>"}
    }


def test_redaction_keeps_what_is_not_secret() -> None:
    from llmdeck.util.redact import redact_argv, redact_data, redact_text

    argv = ["vllm", "--max-num-batched-tokens", "2048", "--tokenizer", "t", "--max-model-len", "4096"]
    assert redact_argv(argv) == argv
    assert redact_text("max_tokens: 512, prompt_tokens=3") == "max_tokens: 512, prompt_tokens=3"
    assert redact_text("llmdeck keys create prints sk-llmdeck-…") == "llmdeck keys create prints sk-llmdeck-…"
    assert redact_text("curl -k https://h") == "curl -k https://h"
    assert redact_data({"apiKey": "EMPTY", "max_tokens": 5, "openAiApiKey": "none"}) == {
        "apiKey": "EMPTY",
        "max_tokens": 5,
        "openAiApiKey": "none",
    }


def test_wait_ready_sends_the_key_the_server_was_started_with(
    fake_key_models_server: str, tmp_path: Path
) -> None:
    """`up -- --api-key X`: /v1/models answers 401 without the key, so readiness must send it."""
    from llmdeck.engines.process import identify
    from llmdeck.runtime.launcher import wait_ready
    from llmdeck.runtime.state import ServerRecord, StateStore

    settings = _settings(tmp_path)
    port = int(fake_key_models_server.rsplit(":", 1)[1])
    log = tmp_path / "k.log"
    log.write_text("# llmdeck: header\n")
    record = ServerRecord(
        name="k",
        spec=LaunchSpec(name="k", engine="venv", model="m", port=port),
        argv=["vllm", "serve", "m"],
        pid=os.getpid(),  # the test process stands in for the engine: alive and "ours"
        process=identify(os.getpid()),
        log_path=log,
    )
    store = StateStore(settings.servers_dir)
    store.save(record)
    store.save_secrets("k", {"VLLM_API_KEY": SECRET})
    ready = wait_ready(record, settings, timeout_s=10, poll_s=0.1)
    assert ready.ready_at is not None


def test_a_password_in_a_url_is_not_echoed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nothing listens there: the error names the URL, without the password
    code, out, err = run_cli(["bench", f"http://bob:pw-9876@127.0.0.1:{port}", "--num-prompts", "1"], capsys)
    assert code == 1, err
    assert "pw-9876" not in out + err and "127.0.0.1" in err


def test_several_api_keys_are_refused_rather_than_one_left_on_the_command_line() -> None:
    """vLLM's --api-key takes several keys; the environment carries one: a second would stay in argv."""
    from llmdeck.engines.secrets import split_secrets
    from llmdeck.errors import UsageError

    spec = LaunchSpec(model="/m", vllm_args=["--api-key", SECRET, "second-key", "--max-model-len", "8"])
    with pytest.raises(UsageError, match="several values"):
        split_secrets(spec)
    clean, secrets = split_secrets(
        spec.model_copy(update={"vllm_args": ["--api-key", SECRET, "--enforce-eager"]})
    )
    assert secrets == {"VLLM_API_KEY": SECRET} and clean.vllm_args == ["--enforce-eager"]


def test_a_bench_results_request_keeps_no_url_password() -> None:
    """The request is written into every result file (bench/request.py): a target URL with a password
    used to be stored as typed, where the result's own target.base_url was redacted."""
    from llmdeck.bench.request import BenchRequest

    req = BenchRequest(target="http://u:pw123secret@127.0.0.1:8000")
    assert "pw123secret" not in req.model_dump_json()
    assert "pw123secret" not in str(req.model_dump(mode="json"))
    assert req.target.endswith("@127.0.0.1:8000")  # the run itself still has it


def _with_secrets(src: Path, out: Path) -> Path:
    """A committed result file as one edited by hand (or written by an older llmdeck) would hold secrets."""
    data = json.loads(src.read_text())
    url = "http://user:hunter2pw@127.0.0.1:8931"
    if "target" in data:  # a bench or eval result
        data["target"]["base_url"] = url
        data["target"]["server_args"] = ["vllm", "serve", "--api-key", SECRET, "--api-key", "weakpw1"]
    else:  # `bench --compare`: two sides
        data["a"]["url"] = data["b"]["url"] = url
    out.write_text(json.dumps(data))
    return out


@pytest.mark.parametrize(
    "src",
    ["evidence/report/results/cmp-seqs16.json", "evidence/eval/cpu/opencode-tiny.json"],
    ids=["bench", "eval"],
)
def test_report_html_and_table_hide_the_secrets_report_json_hides(
    src: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report --json` redacted them; the HTML page and the terminal table showed them as written."""
    from repo_paths import ROOT

    res = _with_secrets(ROOT / src, tmp_path / "r.json")
    code, out, err = run_cli(["report", str(res), "--html", str(tmp_path / "r.html")], capsys)
    assert code == 0, err
    for shown in ((tmp_path / "r.html").read_text(), out + err):
        assert SECRET not in shown and "hunter2pw" not in shown and "weakpw1" not in shown
        assert "user:" in shown and "redacted" in shown  # the URL and the flags are still shown


def test_report_of_a_bench_comparison_hides_url_passwords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from repo_paths import ROOT

    res = _with_secrets(ROOT / "evidence/device/ollama/compare-h200.json", tmp_path / "v.json")
    code, out, err = run_cli(["report", str(res)], capsys)
    assert code == 0, err
    assert "hunter2pw" not in out + err and "user:<redacted>@127.0.0.1:8931" in out


def test_a_bench_comparison_never_writes_a_url_password() -> None:
    from llmdeck.bench.versus import VersusResult
    from repo_paths import ROOT

    data = json.loads((ROOT / "evidence/device/ollama/compare-h200.json").read_text())
    data["a"]["url"] = "http://user:hunter2pw@127.0.0.1:8931"
    written = VersusResult.model_validate(data).model_dump_json()
    assert "hunter2pw" not in written and "user:<redacted>@127.0.0.1:8931" in written


def test_doctor_and_tune_reports_hide_what_redaction_hides_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """doctor's table printed HF_ENDPOINT's password (its --json did not); `report TUNE` printed a
    trial's --api-key in the chosen line and the page its VLLM_API_KEY (a trials file edited by hand or
    from elsewhere: llmdeck writes none there)."""
    import shutil

    from repo_paths import ROOT

    monkeypatch.setenv("HF_ENDPOINT", "https://u:endpoint-pw-55@mirror.example")
    code, out, err = run_cli(["doctor"], capsys)
    assert "endpoint-pw-55" not in out + err and "mirror.example" in out + err
    tune = tmp_path / "tune"
    shutil.copytree(ROOT / "evidence" / "tune" / "cpu", tune)
    lines = (tune / "trials.jsonl").read_text().splitlines()
    for i, line in enumerate(lines[1:], 1):
        trial = json.loads(line)
        trial["args"] += ["--api-key", "sk-tune-secret-999"]
        trial["env"]["VLLM_API_KEY"] = "vkey-secret-123"
        lines[i] = json.dumps(trial)
    (tune / "trials.jsonl").write_text("\n".join(lines) + "\n")
    code, out, err = run_cli(["report", str(tune)], capsys)
    assert code == 0 and "chosen:" in out, err
    page = tmp_path / "t.html"
    assert run_cli(["report", str(tune), "--html", str(page)], capsys)[0] == 0
    shown = out + err + page.read_text()
    assert "sk-tune-secret-999" not in shown and "vkey-secret-123" not in shown and "<redacted>" in shown


def test_a_url_password_in_the_specs_environment_is_kept_out_of_the_record(tmp_path: Path) -> None:
    """`--env HTTPS_PROXY=http://user:pw@proxy:3128` (a company proxy) was stored as it is in the server
    record; it moves with the other secrets (their 0600 file, the engine's environment), the record keeps
    the spec without it."""
    from llmdeck.engines.secrets import split_secrets

    env = {"HTTPS_PROXY": "http://user:proxypw42@proxy:3128", "NO_PROXY": "localhost", "P": "u:pw9@h:1"}
    spec = LaunchSpec(model="m", engine="cpu", env=env)
    clean, secrets = split_secrets(spec)
    assert clean.env == {"NO_PROXY": "localhost"}
    assert secrets == {"HTTPS_PROXY": env["HTTPS_PROXY"], "P": env["P"]}
    assert "proxypw42" not in clean.model_dump_json() and "pw9" not in clean.model_dump_json()
