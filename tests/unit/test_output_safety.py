"""What llmdeck prints and stores is data-safe: rich markup in a server's model id is text (no crash,
no hyperlink), control characters and bidi overrides are shown escaped (terminal, `logs`, HTML
reports), secrets are redacted without eating hints, shell suggestions are quoted, stdout JSON is
standard (no NaN)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cli_helpers import run_cli
from repo_paths import ROOT
from security_helpers import FakeHostileModelsServer, fake_model_dir, serve

BENCH_RESULT = ROOT / "evidence" / "tune" / "cpu-confirm" / "bench" / "trial-001.json"
LINK_ID = "[link=https://evil.example/]click[/link] [reverse]B[/reverse]"
CLOSE_ID = "[/] x"
ESC_VERSION = "\x1b[31m0.32.0"
FAST = ["--timeout", "3", "--deadline", "30"]


class FakeMarkupServer(FakeHostileModelsServer):
    """fake_markup_server: the hostile fake, with a rich-markup model id, an ANSI /version and NaN in
    its /metrics."""

    model_id = CLOSE_ID

    def do_GET(self) -> None:
        if self.path == "/version":
            self._json(200, {"version": ESC_VERSION})
        elif self.path == "/metrics":
            body = b'vllm:num_requests_running{model_name="x"} NaN\nvllm:gpu_cache_usage_perc 1e999\n'
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            super().do_GET()


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "250")
    for name in ("LLMDECK_DEBUG", "LLMDECK_API_KEY", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def _fake(model_id: str, key: str | None = None) -> Iterator[str]:
    handler = type("FakeMarkupServerWithId", (FakeMarkupServer,), {"model_id": model_id, "key": key})
    yield from serve(handler)


@pytest.fixture
def fake_close_tag_server() -> Iterator[str]:
    yield from _fake(CLOSE_ID)


@pytest.fixture
def fake_link_server() -> Iterator[str]:
    yield from _fake(LINK_ID)


@pytest.fixture
def fake_keyed_server() -> Iterator[str]:
    yield from _fake("m", key="the-right-key-123")


# --- 1. rich markup in data ---------------------------------------------------------------------------


def test_check_prints_a_closing_tag_in_a_model_id_as_text(
    fake_close_tag_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["check", fake_close_tag_server, *FAST], capsys)
    assert "internal error" not in err and "MarkupError" not in err
    assert code in (0, 1), err
    assert f"model {CLOSE_ID}," in out


def test_check_and_bench_emit_no_hyperlink_or_reverse_video_from_a_model_id(
    fake_link_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal: rich would emit OSC 8 and SGR 7 for that markup
    _code, out, err = run_cli(["check", fake_link_server, *FAST], capsys)
    assert "internal error" not in err, err
    assert "\x1b]8;" not in out + err and "\x1b[7m" not in out + err
    assert LINK_ID in out
    assert "\x1b[1;32mREADY" in out or "\x1b[1;31mNOT READY" in out  # llmdeck's own styles still work
    args = ["bench", fake_link_server, "--num-prompts", "1", "--input-len", "8", "--output-len", "4"]
    _code, out, err = run_cli([*args, "--timeout-probe", "3", "--out", str(tmp_path / "b.json")], capsys)
    assert "internal error" not in err, err
    assert "\x1b]8;" not in out + err and "\x1b[7m" not in out + err
    assert LINK_ID in out


def _result_file(tmp_path: Path, model: str) -> Path:
    data = json.loads(BENCH_RESULT.read_text())
    data["target"]["model"] = model
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    return path


def test_report_of_a_result_with_markup_in_its_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["report", str(_result_file(tmp_path, CLOSE_ID))], capsys)
    assert code == 0, err
    assert f"llmdeck bench: {CLOSE_ID} at" in out


def test_the_console_keeps_its_own_styles_and_neutralises_foreign_tags() -> None:
    from rich.console import Console

    from llmdeck.cli.output import _console_class, esc, neutralize_markup

    console: Console = _console_class()(force_terminal=True, width=200, color_system="standard")
    with console.capture() as cap:
        own_and_foreign = "[bold red]own[/] [link=https://evil.example/]x[/link] [reverse]y[/reverse]"
        console.print(own_and_foreign, highlight=False)
        console.print("a [/] b", highlight=False)  # unbalanced markup that slipped through: printed
    text = cap.get()
    assert "\x1b[1;31mown" in text and "\x1b]8;" not in text and "\x1b[7m" not in text
    assert "[link=https://evil.example/]x[/link]" in text and "a [/] b" in text
    assert neutralize_markup("[dim]a[/dim] [@click]b") == "[dim]a[/dim] \\[@click]b"
    assert esc("[/] \x1b[2J [bold]") == "\\[/] \\x1b[2J \\[bold]"


def test_bench_rendering_escapes_data_next_to_its_own_styles(tmp_path: Path) -> None:
    from llmdeck.bench.result_file import load_result
    from llmdeck.bench.tables import render_result
    from llmdeck.cli.output import _console_class

    result = load_result(_result_file(tmp_path, LINK_ID))
    result = result.model_copy(update={"status": "aborted", "error": "[/] boom [bold]x"})
    console = _console_class()(force_terminal=True, width=250, color_system="standard")
    with console.capture() as cap:
        render_result(result, console)
    text = cap.get()
    assert "\x1b[1;33mrun aborted\x1b[0m: [/] boom [bold]x" in text  # styled, the error as it is
    assert f"llmdeck bench: {LINK_ID} at" in text and "\x1b]8;" not in text


# --- 2. control characters and bidi overrides -----------------------------------------------------------


def test_check_shows_an_ansi_version_escaped(
    fake_close_tag_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _code, out, err = run_cli(["check", fake_close_tag_server, *FAST], capsys)
    assert "\x1b" not in out + err
    assert "\\x1b[31m0.32.0" in out


def test_safe_text_and_shell_quoting_escape_bidi_controls() -> None:
    from llmdeck.cli.output import safe_text
    from llmdeck.util.shellquote import quote

    assert safe_text("abc\u202edef\u2066g\x1b") == "abc\\u202edef\\u2066g\\x1b"
    assert safe_text("plain [text]\n\tok") == "plain [text]\n\tok"
    assert quote("evil\u202etxt.sh") == "$'evil\\u202etxt.sh'"
    assert quote("a b") == "'a b'"


def test_report_html_shows_control_characters_as_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "r.html"
    result = _result_file(tmp_path, "\x1b]0;pwned\x07\x1b[31mRED\u202e")
    code, _out, err = run_cli(["report", str(result), "--html", str(page)], capsys)
    assert code == 0, err
    html = page.read_text()
    assert "\x1b" not in html and "\x07" not in html and "\u202e" not in html
    assert "\\x1b]0;pwned\\x07\\x1b[31mRED\\u202e" in html


LOG = (
    "INFO start\n"
    "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\r\n"
    "INFO non-default args: {'model': 'm', 'api_key': ['sk-LOGSECRET-1234567890'], 'port': 8000}\n"
    "API key sk-LOGSECRET-1234567890 --api-key sk-LOGSECRET-1234567890\n"
    "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456\n"
)


def test_logs_prints_the_log_as_data_with_secrets_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)
    (logs / "evil.log").write_text(LOG)
    code, out, err = run_cli(["logs", "evil"], capsys)
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out
    assert "LOGSECRET" not in out and "hf_abc" not in out
    assert "'api_key': ['<redacted>']" in out and "API key <redacted>" in out and "HF_TOKEN=<redacted>" in out


def test_logs_of_a_server_whose_log_was_deleted_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The logs folder cleaned under a recorded server: an "internal error" (FileNotFoundError) had come."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord, StateStore

    spec = LaunchSpec(name="gone", engine="cpu", model=str(tmp_path), port=18999)
    log = tmp_path / "state" / "logs" / "gone.log"
    StateStore(tmp_path / "state" / "servers").save(
        ServerRecord(name="gone", spec=spec, argv=["x"], pid=None, log_path=log)
    )
    code, _out, err = run_cli(["logs", "gone"], capsys)
    assert code == 1, err
    assert f"There is no log at {log}" in err and "internal error" not in err


def _record(log: Path) -> Any:
    """What `logs -f` follows: a local engine's server whose log is ``log`` (liveness patched)."""
    return SimpleNamespace(spec=SimpleNamespace(engine="cpu"), log_path=log)


def test_logs_follow_redacts_a_secret_split_across_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import llmdeck.cli.server_parts as server_cli
    import llmdeck.engines.logfiles as logfiles
    from llmdeck.engines.base import Engine

    log = tmp_path / "f.log"
    log.write_text("old line\n")
    parts = ["--api-key sk-FOLLOW", "SECRET-987654 \x1b[2J\n", "tail \x1b]0;t\x07"]
    sleeps: list[float] = []

    def fake_sleep(s: float) -> None:
        if len(sleeps) < len(parts):
            with open(log, "a") as fh:
                fh.write(parts[len(sleeps)])
        sleeps.append(s)

    monkeypatch.setattr(logfiles, "time", SimpleNamespace(sleep=fake_sleep))
    monkeypatch.setattr(Engine, "is_alive", lambda self, record: len(sleeps) <= len(parts))
    server_cli.follow_tail(log, _record(log))
    out = capsys.readouterr().out
    assert "old line" not in out  # only what the log gained
    assert "FOLLOW" not in out and "--api-key <redacted> \\x1b[2J\n" in out
    assert "tail \\x1b]0;t\\x07" in out and "\x1b" not in out


def test_logs_follow_waits_for_a_log_moved_away_and_reads_a_rotated_one_from_its_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`logs -f` had been an internal error (FileNotFoundError) when the log was missing or moved while
    followed; a log rotated under it (smaller than what was read) is read from its start."""
    import llmdeck.cli.server_parts as server_cli
    import llmdeck.engines.logfiles as logfiles
    from llmdeck.engines.base import Engine

    log = tmp_path / "f.log"
    steps: list[Any] = []
    sleeps: list[float] = []

    def fake_sleep(s: float) -> None:
        if len(sleeps) < len(steps):
            steps[len(sleeps)]()
        sleeps.append(s)

    monkeypatch.setattr(logfiles, "time", SimpleNamespace(sleep=fake_sleep))
    monkeypatch.setattr(Engine, "is_alive", lambda self, record: len(sleeps) <= len(steps))
    steps[:] = [lambda: log.write_text("new log line\n"), lambda: None]
    server_cli.follow_tail(log, _record(log))  # missing at the start: it waits, then reads it whole
    log.write_text("a long first line of the first log\n")
    sleeps.clear()
    steps[:] = [
        lambda: log.rename(tmp_path / "f.log.1"),  # moved away: nothing to read for a while
        lambda: None,
        lambda: log.write_text("new log line\n"),  # made again, shorter: read from its start
        lambda: None,
    ]
    server_cli.follow_tail(log, _record(log))
    assert capsys.readouterr().out.count("new log line") == 2


def test_logs_follow_reads_a_rotated_longer_log_from_its_start_and_a_huge_jump_in_bounded_pieces(
    tmp_path: Path,
) -> None:
    """Rotation was told by size alone: a new log already longer than the old read position was read
    from the middle of a line; a log that grew by 1 GB was read whole into memory (4.2 GB RSS)."""
    from llmdeck.engines.logfiles import FOLLOW_READ, follow

    log = tmp_path / "f.log"
    log.write_text("")
    gen = follow(log, lambda: False, pause_s=0)
    log.write_text("short\n")
    assert next(gen) == "short\n"
    (tmp_path / "new.log").write_text("C-new-after-rotate-longer-line\n")
    (tmp_path / "new.log").rename(log)  # another inode, longer than 6 bytes
    assert next(gen) == "C-new-after-rotate-longer-line\n"
    with open(log, "ab") as fh:
        fh.truncate(log.stat().st_size + 5 * FOLLOW_READ)  # 5 MiB of NULs, no line end
    pieces = [next(gen) for _ in range(2)]
    assert all(len(p) <= 2 * FOLLOW_READ for p in pieces)  # bounded, whatever the jump


# --- 3. secrets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hint",
    [
        "It needs an API key: pass --api-key or set LLMDECK_API_KEY (the key the server was started with).",
        "Use the key the server was started with (--api-key / VLLM_API_KEY).",
        "api_key: the server answers 401",
        "Pass the key: `llmdeck check --api-key KEY` or set LLMDECK_API_KEY.",
        "llmdeck up --model ./tiny -- --api-key $KEY",
        "The API key header is missing; set --hf-token to read gated models.",
    ],
)
def test_redaction_keeps_hints(hint: str) -> None:
    from llmdeck.util.redact import redact_text

    assert redact_text(hint) == hint


@pytest.mark.parametrize(
    "text",
    [
        "the server rejected API key sk-PROSE-1234567890",
        "api_key: sk-yaml-123456",
        "--api-key token-abc123",
        "--api-key=short",
        "--api-key 'quoted'",
        "--api-key secret",  # a weak key is a key: only listed words of prose are kept
        "api_key: hunter",
        "API key Changeme",
    ],
)
def test_redaction_hides_real_values(text: str) -> None:
    from llmdeck.util.redact import redact_text

    out = redact_text(text)
    assert "<redacted>" in out
    hidden = ("PROSE", "sk-yaml", "abc123", "short", "quoted", "secret", "hunter", "Changeme")
    assert not any(s in out for s in hidden)


def test_check_and_status_hide_a_url_password(
    fake_close_tag_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = fake_close_tag_server.replace("http://", "http://user:sk-PASS-4321@")
    code, out, err = run_cli(["check", url, *FAST], capsys)
    assert "internal error" not in err
    assert "sk-PASS" not in out + err and "checking http://user:<redacted>@" in err
    code, out, err = run_cli(["status", url, "--timeout", "3"], capsys)
    assert code == 0, err
    assert "sk-PASS" not in out + err and out.startswith("http://user:<redacted>@")


def test_a_rejected_key_is_called_rejected_not_missing(
    fake_keyed_server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _out, err = run_cli(["check", fake_keyed_server, "--api-key", "the-wrong-key-999", *FAST], capsys)
    assert code == 1
    message = err.split("error:", 1)[1]
    assert "rejects the given API key" in message and "It needs an API key" not in message
    assert "Use the key the server was started with" in message and "<redacted>" not in message
    monkeypatch.setenv("LLMDECK_API_KEY", "the-wrong-key-999")
    code, _out, err = run_cli(["status", fake_keyed_server, "--timeout", "3"], capsys)
    assert code == 1 and "rejected the API key" in err


def test_connect_print_shows_the_key_in_the_config_only(
    fake_close_tag_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-CONNECT-5555"
    args = ["connect", "openai", "--server", fake_close_tag_server, "--api-key", key, "--print"]
    code, out, err = run_cli([*args, "--timeout", "3"], capsys)
    assert code == 0, err
    assert key in out and key not in err


# --- 4. shell suggestions are quoted --------------------------------------------------------------------


def test_plan_quotes_the_hf_download_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(["plan", "org/$(touch pwn)", "--machine", "dgx-spark"], capsys)
    assert code == 2, err
    assert "hf download 'org/$(touch pwn)' config.json" in err


def test_connect_quotes_the_model_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    for url in _fake("x$(touch PWNED);y"):
        args = ["connect", "opencode", "--server", url, "--model", "foo bar", "--print", "--timeout", "3"]
        code, _out, err = run_cli(args, capsys)
        assert code == 2, err  # a model the server does not serve: bad input
        assert "Use --model 'x$(touch PWNED);y'" in err and "--served-model-name 'foo bar'" in err


# --- 5. standard JSON on stdout --------------------------------------------------------------------------


def _strict(text: str) -> Any:
    def refuse(const: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {const}")

    return json.loads(text, parse_constant=refuse)


def test_print_json_writes_nan_and_inf_as_null(capsys: pytest.CaptureFixture[str]) -> None:
    from llmdeck.cli.output import print_json

    print_json({"a": float("nan"), "b": [float("inf"), 1.5], "c": "\u202e\x9b"})
    out = capsys.readouterr().out
    assert _strict(out) == {"a": None, "b": [None, 1.5], "c": "\u202e\x9b"}
    assert "\u202e" not in out and "\x9b" not in out


def test_json_with_a_path_that_is_not_utf8_is_valid_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path's bytes that are not UTF-8 (``$'caf\\xe9'``) had made every --json document an internal
    error on a strict stdout (and its error object a traceback), or written invalid UTF-8 on a lenient
    one: the lone surrogate is now written as ``\\udce9``, which reads back as the same path."""
    from llmdeck.cli.output import print_json

    path = str(tmp_path / "caf\udce9")
    print_json({"path": path})
    out = capsys.readouterr().out
    assert json.loads(out.encode("utf-8")) == {"path": path} and "\\udce9" in out


def test_a_table_with_a_path_that_is_not_utf8_shows_it_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan of a model folder named in another encoding (``$'caf\\xe9'``) had been an internal error
    (UnicodeEncodeError) on a UTF-8 terminal: the byte is shown as ``\\xe9``, and quoted for a shell
    as ``$'caf\\xe9'``, which pastes back the same path."""
    from llmdeck.util.shellquote import quote

    d = fake_model_dir(tmp_path).rename(tmp_path / "caf\udce9")
    code, out, err = run_cli(["plan", str(d), "--machine", "h200"], capsys)
    assert code == 0, err
    assert "caf\\xe9" in out and "internal error" not in err
    assert quote(str(d)).endswith("/caf\\xe9'") and quote(str(d)).startswith("$'")


def test_status_url_json_is_standard(fake_close_tag_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["status", fake_close_tag_server, "--json", "--timeout", "3"], capsys)
    assert code == 0, err
    assert "NaN" not in out and "Infinity" not in out
    _strict(out)


def test_tune_and_eval_pages_show_control_characters_as_escapes(tmp_path: Path) -> None:
    """The tune page (a trials file's flags) and the eval page (an agent's transcript) are data too."""
    from llmdeck.evals.html import render_eval_html
    from llmdeck.evals.results import load_eval_result
    from llmdeck.tune.html import render_tune_html
    from llmdeck.tune.outputs import best_trial
    from llmdeck.tune.trials import read_trials

    evil = "x\x1b]0;pwned\x07\u202e"
    root = ROOT / "evidence"
    header, recs = read_trials(root / "tune" / "h200" / "s15" / "trials.jsonl")
    recs[2].args = [*recs[2].args, "--served-model-name", evil]
    page = render_tune_html(header, recs, best_trial(recs))
    assert "\x1b" not in page and "\u202e" not in page and "x\\x1b]0;pwned\\x07\\u202e" in page
    res = load_eval_result(root / "eval" / "h200" / "eval-fp8.json")
    res.client_version = evil
    page = render_eval_html([res], ["eval-fp8.json"])
    assert "\x1b" not in page and "\u202e" not in page and "x\\x1b]0;pwned\\x07\\u202e" in page


def test_client_401_says_whether_the_key_sent_was_rejected_or_none_was_sent(fake_keyed_server: str) -> None:
    """bench's, eval's and connect's client: a wrong key is "rejected", a missing one "none was sent"."""
    from llmdeck.client.errors import HTTPStatusError
    from llmdeck.client.sync import get_models

    with pytest.raises(HTTPStatusError) as wrong:
        get_models(fake_keyed_server, api_key="the-wrong-key-999", timeout_s=5)
    assert "rejected the API key sent" in str(wrong.value) and "the key the server was started" in (
        wrong.value.hint or ""
    )
    with pytest.raises(HTTPStatusError) as missing:
        get_models(fake_keyed_server, timeout_s=5)
    assert "none was sent" in str(missing.value) and "pass --api-key" in (missing.value.hint or "")
    assert get_models(fake_keyed_server, api_key="the-right-key-123", timeout_s=5)


def test_gateway_status_shows_an_alias_with_markup_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """An alias (and a backend label) like ``[red]x[/red]`` had been rendered red, misstating the alias
    that /v1/models reports."""
    from llmdeck.cli.gateway import _print_status

    backend = {"backend": "[bold]b[/bold]", "healthy": True, "outstanding": 0, "served_model": "[red]s[/red]"}
    route = {"model": "[red]x[/red]", "requests": 1, "errors": 0, "backends": [backend]}
    _print_status({"state": "running", "url": "http://127.0.0.1:4000", "routes": [route]})
    out = capsys.readouterr().out
    assert "[red]x[/red]" in out and "[bold]b[/bold]" in out and "[red]s[/red]" in out


def test_safe_text_escapes_exactly_what_is_unsafe_says_for_every_code_point() -> None:
    """safe_text checks a string with one regex (a page's SVG charts went through it a character at a
    time in Python: seconds a page); every code point, alone and inside text, is shown as is_unsafe says."""
    from llmdeck.util.safetext import escape_char, is_unsafe, safe_text

    for code in range(0x110000):
        ch = chr(code)
        want = escape_char(ch) if is_unsafe(ch) else ch
        assert safe_text(ch) == want and safe_text(f"a{ch}b") == f"a{want}b", hex(code)
