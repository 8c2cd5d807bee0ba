"""resolve_target: URL, server name, nothing; and the errors users meet."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdeck.checks.clients import required_probes, suggest_parsers, validate_client
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import EndpointError, UsageError
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.runtime.target import resolve_target
from llmdeck.settings import Settings
from llmdeck.util.net import free_port


def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state", port=8123)


def save(tmp_path: Path, name: str, port: int) -> None:
    spec = LaunchSpec(name=name, model="/models/Qwen3-0.6B", port=port, served_model_name=None)
    rec = ServerRecord(name=name, spec=spec, argv=["vllm", "serve"], log_path=tmp_path / f"{name}.log")
    StateStore(settings(tmp_path).servers_dir).save(rec)


def test_urls_are_normalised(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert resolve_target("http://127.0.0.1:8000/v1/", s).base_url == "http://127.0.0.1:8000"
    assert resolve_target("127.0.0.1:9000", s).base_url == "http://127.0.0.1:9000"
    assert resolve_target("localhost:9000", s).api_base == "http://localhost:9000/v1"


def test_bad_url_and_unknown_name_exit_2(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with pytest.raises(UsageError) as exc:
        resolve_target("ftp://host:21", s)
    assert exc.value.exit_code == 2
    with pytest.raises(UsageError) as exc2:
        resolve_target("no-such-server", s)
    assert exc2.value.exit_code == 2 and "no-such-server" in exc2.value.message


def test_name_and_default_resolution(tmp_path: Path) -> None:
    s = settings(tmp_path)
    none = resolve_target(None, s)
    assert none.base_url == "http://127.0.0.1:8123" and none.source == "default"
    save(tmp_path, "qwen", 8201)
    only = resolve_target(None, s)
    assert only.source == "only-server" and only.base_url == "http://127.0.0.1:8201"
    assert only.model == "Qwen3-0.6B"
    named = resolve_target("qwen", s)
    assert named.source == "name" and named.record is not None and named.record.name == "qwen"
    save(tmp_path, "other", 8202)
    assert resolve_target(None, s).source == "default"  # two servers: no guessing


def test_clients_and_parsers() -> None:
    assert validate_client("OpenCode") == "opencode"
    with pytest.raises(UsageError):
        validate_client("emacs")
    assert "tool_auto" in required_probes("opencode")
    assert "tool_auto" not in required_probes("openai")
    assert "completions" in required_probes("continue")
    assert suggest_parsers("qwen3.6-35b-a3b") == ("qwen3_coder", "qwen3")
    assert suggest_parsers("Qwen3-Coder-30B-A3B-Instruct-FP8") == ("qwen3_coder", None)
    assert suggest_parsers("tiny-qwen3") == ("hermes", "qwen3")
    assert suggest_parsers("my-model") == (None, None)


def test_connection_refused_is_a_clear_error(tmp_path: Path) -> None:
    from llmdeck.checks import run_checks

    port = free_port()
    with pytest.raises(EndpointError) as exc:
        run_checks(
            f"http://127.0.0.1:{port}", client=None, model=None, api_key=None, settings=settings(tmp_path)
        )
    assert exc.value.exit_code == 1
    assert "not reachable" in exc.value.message and "llmdeck up" in (exc.value.hint or "")


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("::1", "http://[::1]:8026"),
        ("[::1]", "http://[::1]:8026"),  # as a URL writes it: the server had been told to bind "[::1]"
        ("0.0.0.0", "http://127.0.0.1:8026"),
        ("127.0.0.1", "http://127.0.0.1:8026"),
    ],
)
def test_a_servers_url_brackets_an_ipv6_host(tmp_path: Path, host: str, url: str) -> None:
    """`up --host ::1` (the help's own example) had crashed after the start: http://::1:8026."""
    spec = LaunchSpec(name="v6", model="/models/Qwen3-0.6B", port=8026, host=host)
    rec = ServerRecord(name="v6", spec=spec, argv=["vllm", "serve"], log_path=tmp_path / "v6.log")
    assert rec.base_url == url and "[" not in spec.host


def test_an_ipv6_host_in_brackets_is_the_address_and_a_lone_bracket_no_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--host '[::1]'` had passed the check and then said '[::1]' is not an address of this machine;
    `::1]` had passed too."""
    import typer

    from llmdeck.cli.validate import host
    from llmdeck.settings import Settings
    from llmdeck.util.net import validate_host

    assert host("[::1]") == "::1" and validate_host("[::1]") == "::1"
    monkeypatch.setenv("LLMDECK_HOST", "[::1]")
    assert Settings().host == "::1"
    for bad in ("::1]", "[::1", "[127.0.0.1]", "[]"):
        with pytest.raises(typer.BadParameter):
            host(bad)
