"""An API key no HTTP header can carry (non-ASCII, a space, a pasted line break) is bad input: exit 2
with what is wrong, the key never quoted — it had ended in an internal error (UnicodeEncodeError) or
printed the key's tail from the HTTP library's `Illegal header value` message."""

from __future__ import annotations

import json

import pytest

from cli_helpers import run_cli
from llmdeck.engines.secrets import split_secrets
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import UsageError
from llmdeck.util.redact import api_key_problem

BAD = ["sk-é", "ключ", "sk-abc\nTOPSECRETTAIL", "sk-abc ", " sk-abc", "sk\tabc", "sk-\x7f"]


def test_what_a_header_cannot_carry_is_named() -> None:
    assert api_key_problem("sk-llmdeck-AbC_123.~+/=") is None
    assert "outside ASCII" in (api_key_problem("sk-é") or "")
    assert "line break" in (api_key_problem("a\nb") or "")
    assert all(api_key_problem(k) for k in BAD)


@pytest.mark.parametrize("key", BAD)
@pytest.mark.parametrize("command", [["check"], ["bench"], ["connect", "openai", "--print", "--server"]])
def test_a_bad_key_flag_is_exit_2_with_a_json_error(
    key: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli([*command, "http://127.0.0.1:9", "--api-key", key, "--json"], capsys)
    assert code == 2, (out, err)
    error = json.loads(out)["error"]
    assert error["exit_code"] == 2 and "--api-key" in error["message"]
    assert "cannot be sent" in error["message"]
    for text in (out, err):
        assert "TOPSECRETTAIL" not in text and "ключ" not in text and "Traceback" not in text


def test_a_bad_key_in_the_environment_is_named_without_quoting_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMDECK_API_KEY", "sk-abc\nTOPSECRETTAIL")
    code, out, err = run_cli(["status", "http://127.0.0.1:9", "--json"], capsys)
    assert code == 2
    message = json.loads(out)["error"]["message"]
    assert message.startswith("LLMDECK_API_KEY='<redacted>' is not valid (the key cannot be sent")
    assert "TOPSECRETTAIL" not in out + err and "sk-abc" not in out + err


def test_a_server_key_no_client_could_send_stops_up_before_the_start() -> None:
    spec = LaunchSpec(model="m", engine="cpu", vllm_args=["--api-key", "sk-é"])
    with pytest.raises(UsageError, match="given to the server cannot be used: it has a character outside"):
        split_secrets(spec)
    assert split_secrets(spec.model_copy(update={"vllm_args": ["--api-key", "sk-ok"]}))[1] == {
        "VLLM_API_KEY": "sk-ok"
    }
