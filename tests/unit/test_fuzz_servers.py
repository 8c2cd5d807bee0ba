"""Fuzz suite, part 3: misbehaving servers on 127.0.0.1 (tests/fake_servers.py) against every command
that talks to one: bench, check, connect and fetch (its --endpoint pointed at the fake).

Each (fake, command) pair is one case: exit 1 (a failed operation) with a message that says what the
server did and what to do, no traceback, within a bound. Silent and trickling fakes run with short
limits (--timeout...) so the suite stays fast; one case runs check with its defaults and shows a silent
server reported within 30 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_servers import running
from fuzz_helpers import assert_clean_failure, run_main

# What each fake must make the message say (lower-case substrings), for every command.
SAYS: dict[str, tuple[str, ...]] = {
    "fake_401_server": ("api key",),
    "fake_403_server": ("api key",),
    "fake_404_server": ("404",),
    "fake_500_server": ("500",),
    "fake_html_server": ("json",),
    "fake_garbage_server": ("json",),
    "fake_wrong_shape_dict_server": ("data",),
    "fake_wrong_shape_list_server": ("data",),
    "fake_wrong_shape_no_id_server": ("id",),
    "fake_wrong_shape_items_server": ("id",),
    "fake_empty_body_server": ("json",),
    "fake_deep_json_server": ("json",),
    "fake_non_http_server": ("127.0.0.1",),
    "fake_closing_server": ("127.0.0.1",),
    "fake_silent_server": ("not answering",),
    "fake_trickle_server": ("not answering",),
    # a stacked gzip bomb: never inflated (it had taken 8 GB and 18 s for 7 KB of gzip inside gzip)
    "fake_gzip_bomb_server": ("compressed",),
    "fake_bad_context_server": ("max_model_len -5", "whole number of tokens"),
}

COMMANDS = {
    "bench": "bench {url} --num-prompts 2 --timeout-probe 2 --out {tmp}/r.json",
    "check": "check {url} --timeout 3",
    "connect": "connect openai --server {url} --print --timeout 3",
    "status": "status {url} --timeout 2",
}
# check/connect read a reply's shape probe by probe: the words differ from bench's, the facts do not.
CHECK_SAYS = {
    "fake_html_server": ("models",),
    "fake_garbage_server": ("models",),
    "fake_empty_body_server": ("models",),
    "fake_deep_json_server": ("models",),
    "fake_wrong_shape_dict_server": ("models",),
    "fake_wrong_shape_list_server": ("models",),
}

STATUS_SAYS = {
    "fake_404_server": ("not an openai-compatible", "404"),
    "fake_500_server": ("not an openai-compatible", "500"),
    "fake_non_http_server": ("not an openai-compatible", "http"),
    "fake_closing_server": ("not an openai-compatible", "http"),
    "fake_wrong_shape_items_server": ("not an openai-compatible", "model list"),
    "fake_deep_json_server": ("not an openai-compatible", "model list"),
}
PAIRS = [(cmd, fake) for cmd in COMMANDS for fake in SAYS]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("command", "fake"), PAIRS, ids=[f"{c}:{f}" for c, f in PAIRS])
def test_misbehaving_server(
    command: str, fake: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with running(fake) as url:
        argv = COMMANDS[command].format(url=url, tmp=fuzz_env["tmp"]).split()
        code, _out, err, elapsed = run_main(argv, capsys)
    says = {"bench": SAYS, "status": {**SAYS, **CHECK_SAYS, **STATUS_SAYS}}.get(
        command, {**SAYS, **CHECK_SAYS}
    )[fake]
    assert_clean_failure(code, err, elapsed, want=1, needles=says, seconds=45)


FETCH_SAYS = {
    "fake_401_server": (2, "token"),
    "fake_500_server": (1, "500"),
    "fake_html_server": (1, "127.0.0.1"),
    "fake_non_http_server": (1, "127.0.0.1"),
    "fake_closing_server": (1, "127.0.0.1"),
    "fake_silent_server": (1, "not answering"),
    "fake_trickle_server": (1, "not answering"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fake", list(FETCH_SAYS), ids=[f"fetch:{f}" for f in FETCH_SAYS])
def test_fetch_from_a_misbehaving_endpoint(
    fake: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    want, needle = FETCH_SAYS[fake]
    with running(fake) as url:
        argv = ["fetch", "Qwen/Qwen3-0.6B", "--config-only", "--endpoint", url, "--timeout", "2"]
        argv += ["--local-dir", fuzz_env["tmp"] + "/dl"]
        code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=want, needles=(needle,), seconds=45)


@pytest.mark.timeout(120)
def test_check_silent_default_deadline(fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """check:silent-with-defaults — was ~30 min (15 probes x 120 s); now 'not answering' in ~10 s."""
    with running("fake_silent_server") as url:
        code, _out, err, elapsed = run_main(["check", url], capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=("not answering",), seconds=30)


AFTER_MODELS = [
    ("bench:prompts-missing", ["--prompts", "{missing}"], "{missing}"),
    ("bench:prompts-folder", ["--prompts", "{folder}"], "{folder}"),
    ("bench:prompts-binary", ["--prompts", "{binary}"], "{binary}"),
    ("bench:prompts-empty", ["--prompts", "{empty}"], "{empty}"),
    # were sent: the prompt as str(5) == "5"; no message at all (HTTP 400 for every request, exit 1)
    ("bench:prompts-a-number", ["--prompts", "{prompt_number}"], '{prompt_number}:1: "prompt" is 5'),
    ("bench:prompts-no-message", ["--prompts", "{messages_empty}"], '{messages_empty}:1: "messages"'),
    # a user message with no content, or a number for it: vLLM sends the first as empty text, refuses the
    # second (HTTP 400 for every request); both are refused up front naming the line and the message
    (
        "bench:prompts-message-no-content",
        ["--prompts", "{message_no_content}"],
        '{message_no_content}:2: message 1 ("role": "user") has no "content"',
    ),
    (
        "bench:prompts-content-a-number",
        ["--prompts", "{content_number}"],
        '{content_number}:1: message 1 ("role": "user") has 5 for its "content"',
    ),
    ("bench:model-not-served", ["--model", "other"], "other"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("cid", "extra", "needle"), AFTER_MODELS, ids=[a[0] for a in AFTER_MODELS])
def test_bench_input_errors_found_after_the_first_question(
    cid: str, extra: list[str], needle: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with running("fake_models_only_server") as url:
        argv = ["bench", url, "--num-prompts", "2", "--no-metrics", "--out", fuzz_env["tmp"] + "/r.json"]
        argv += [a.format(**fuzz_env) for a in extra]
        code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(needle.format(**fuzz_env),), seconds=45)


def test_hostile_strings_are_data(fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """connect:hostile-strings — a model id with $(...) and terminal escapes: no crash, nothing run."""
    marker = Path("/tmp/llmdeck-pwned")
    with running("fake_hostile_strings_server") as url:
        code, _out, err, elapsed = run_main(["check", url, "--timeout", "3"], capsys)
    assert code == 1 and "Traceback" not in err and "internal error" not in err
    assert elapsed < 25 and not marker.exists()


@pytest.mark.timeout(120)
def test_bench_trickling_stream_is_bounded_by_timeout_total(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A stream that sends a keep-alive every 0.5 s but never a token ends at --timeout-total (it
    used to be unbounded: no read timeout ever fires), recorded as a timeout, and the wait is shown."""
    import json
    import time

    out = Path(fuzz_env["tmp"]) / "r.json"
    with running("fake_trickle_stream_server") as url:
        t0 = time.monotonic()
        argv = ["bench", url, "--num-prompts", "2", "--no-metrics", "--timeout-total", "2", "--out", str(out)]
        code, _stdout, err, _ = run_main([*argv, "--input-len", "8", "--output-len", "4"], capsys)
        elapsed = time.monotonic() - t0
    assert code == 1, err  # every request failed: nothing measured, the first failure named
    assert "Every request failed (2 of them)" in " ".join(err.split())
    assert elapsed < 45 and "asking /v1/models" in " ".join(err.split())
    requests = json.loads(out.read_text())["scenarios"][0]["requests"]
    assert [r["error_kind"] for r in requests] == ["timeout", "timeout"]


def test_check_fails_a_stream_that_stalls_after_its_first_event(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """fake_sse_stall_server: /health and /v1/models answer, a stream sends one event and then nothing.
    An agent reading it would hang, so streaming_usage fails (it was "inconclusive: timed out", exit 0)."""
    with running("fake_sse_stall_server") as url:
        code, _out, err, elapsed = run_main(["check", url, "--timeout", "2", "--deadline", "40"], capsys)
    assert_clean_failure(
        code, err, elapsed, want=1, needles=("streaming_usage", "The stream stalled: 1 chunk(s)"), seconds=40
    )


@pytest.mark.parametrize("client", ["opencode", "claude-code"])
def test_check_fails_a_server_that_never_answers_a_generation_request(
    client: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """fake_models_then_silent_server: /health and /v1/models answer, a chat (or Messages) request gets
    nothing. The client would wait forever, so the check fails at the first probe it needs, and does not
    wait again probe by probe (it was "READY", exit 0, after 49 s of inconclusive probes)."""
    import json

    with running("fake_models_then_silent_server") as url:
        argv = ["check", url, "--timeout", "2", "--client", client, "--json"]
        code, out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=(), seconds=30)
    report = json.loads(out)
    assert report["ready"] is False
    failed = [p for p in report["probes"] if p["status"] == "fail"]
    assert len(failed) == 1 and failed[0]["required"], failed
    assert "gave this request no reply within 2 s" in failed[0]["summary"]
    assert {p["status"] for p in report["probes"][report["probes"].index(failed[0]) + 1 :]} <= {
        "skipped",
        "not_applicable",
    }


def test_connect_writes_nothing_for_a_server_that_never_answers_a_generation_request(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """It had written opencode's configuration after 70 s of timed-out probes, saying nothing of them."""
    target = Path(fuzz_env["tmp"]) / "opencode.json"
    with running("fake_models_then_silent_server") as url:
        argv = ["connect", "opencode", "--server", url, "--file", str(target), "--timeout", "2"]
        code, _out, err, elapsed = run_main(argv, capsys)
    needles = ("gave a reasoning_split request no reply within 2 s", "no configuration was written")
    assert_clean_failure(code, err, elapsed, want=1, needles=needles, seconds=20)
    assert not target.exists()


def test_a_model_the_server_does_not_serve_is_bad_input_for_check_and_connect(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """--model nosuch: exit 2 as in bench, with what the server serves; check had gone on probing the
    server's first model and exited 1 with 'restart the server'."""
    import json

    with running("fake_models_only_server") as url:
        code, out, err, elapsed = run_main(["check", url, "--model", "nosuch", "--json"], capsys)
        assert_clean_failure(code, err, elapsed, want=2, needles=("does not serve 'nosuch'",), seconds=20)
        report = json.loads(out)
        assert report["ready"] is False
        after = report["probes"][[p["id"] for p in report["probes"]].index("models") + 1 :]
        assert after and {p["status"] for p in after} == {"skipped"}
        argv = ["connect", "openai", "--server", url, "--model", "nosuch", "--print"]
        code, out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(
        code, err, elapsed, want=2, needles=("does not serve 'nosuch'", "--model fake"), seconds=20
    )


def test_a_reply_that_is_no_chat_completion_passes_no_probe(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """{"choices": "nope"} with HTTP 200: content_null_trap had passed ("yields content (finish_reason
    None)") and tool_result too ("reply: 0 chars")."""
    import json

    with running("fake_chat_not_a_completion_server") as url:
        code, out, err, elapsed = run_main(["check", url, "--timeout", "5", "--json"], capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=(), seconds=60)
    probes = {p["id"]: p for p in json.loads(out)["probes"]}
    for probe_id in ("content_null_trap", "tool_result"):
        assert probes[probe_id]["status"] in {"fail", "skipped"}, probes[probe_id]
    assert "no chat completion" in probes["content_null_trap"]["summary"]


def test_bench_that_skips_every_scenario_fails(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every scenario needs more context than the server's max_model_len (4096): nothing was measured,
    so exit 1 naming why (it was exit 0 with a table of skips)."""
    out = Path(fuzz_env["tmp"]) / "r.json"
    with running("fake_models_only_server") as url:
        argv = ["bench", url, "--input-len", "8000", "--num-prompts", "2", "--no-metrics", "--out", str(out)]
        code, _out, err, elapsed = run_main(argv, capsys)
    needles = ("Nothing was measured", "1 scenario(s) were skipped", "max_model_len is 4096", str(out))
    assert_clean_failure(code, err, elapsed, want=1, needles=needles, seconds=45)
    assert out.is_file()


def test_check_json_still_prints_a_report_when_the_server_is_unreachable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    code, out, err, elapsed = run_main(["check", "http://127.0.0.1:9", "--json"], capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=("not reachable",), seconds=20)
    report = json.loads(out)
    assert report["kind"] == "llmdeck.check" and report["ready"] is False
    assert "not reachable" in report["error"] and "ConnectError" not in err + out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_https_to_a_plain_http_server_says_use_http(
    command: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The stdlib says "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"; a user needs
    to hear that the server is plain HTTP."""
    import http.server
    import threading

    # a real plain-HTTP server (the stdlib's): it answers a TLS hello with "400 Bad request" at once
    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tls_url = f"https://127.0.0.1:{server.server_address[1]}"
        argv = COMMANDS[command].format(url=tls_url, tmp=fuzz_env["tmp"]).split()
        code, _out, err, elapsed = run_main(argv, capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1 and "answers plain HTTP" in err and "use http://" in err, err
    assert "WRONG_VERSION_NUMBER" not in err and "_ssl.c" not in err and elapsed < 30


@pytest.mark.timeout(120)
def test_connect_refuses_a_model_id_that_is_not_utf8(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """/v1/models lists an id that is not UTF-8: it was decoded with replacement characters and the
    config named a model like 'q��' (exit 0); now exit 1, or the good id when one is listed beside it."""
    argv = ["connect", "openai", "--print", "--timeout", "3", "--server"]
    with running("fake_non_utf8_id_server") as url:
        code, _out, err, elapsed = run_main([*argv, url], capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=("not valid utf-8",), seconds=45)
    with running("fake_some_non_utf8_ids_server") as url:
        code, out, err, _ = run_main([*argv, url], capsys)
    assert code == 0, err
    assert "OPENAI_MODEL=fake\n" in out and "\ufffd" not in out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client", ["openai", "opencode", "claude-code"])
def test_check_reads_tool_arguments_nested_too_deep_as_not_json(
    client: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """fake_deep_tool_args_server: a tool call's arguments nested past the JSON decoder had ended check
    as "internal error: RecursionError ... This is a bug in llmdeck"; they are arguments that do not
    parse, as any other: the tool probes say so."""
    import json

    with running("fake_deep_tool_args_server") as url:
        code, out, err, _ = run_main(["check", url, "--timeout", "3", "--client", client, "--json"], capsys)
    assert code in (0, 1), err
    assert "internal error" not in err.lower() and "RecursionError" not in err + out, err
    probes = {p["id"]: p for p in json.loads(out)["probes"]}
    assert probes["tool_auto"]["status"] == "fail", probes["tool_auto"]


def test_launch_on_a_server_too_small_names_launch_in_its_advice(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A server of 4096 tokens cannot hold claude-code's base prompt: `launch` ended with "then run this
    `llmdeck connect claude-code` command again", a command the user had not run."""
    with running("fake_models_only_server") as url:
        code, _out, err, elapsed = run_main(
            ["launch", "claude-code", url, "--dry-run", "--timeout", "3"], capsys
        )
    needles = ("cannot hold claude-code", "--max-model-len 32768", "`llmdeck launch claude-code`")
    assert_clean_failure(code, err, elapsed, want=1, needles=needles, seconds=30)
