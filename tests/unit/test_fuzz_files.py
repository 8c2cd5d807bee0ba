"""Fuzz suite, part 4: random bytes and random JSON as the files llmdeck reads (hypothesis), the
YAML limits for user catalogs, and the client's errors (constructible from any raise site).

Every generated input must end in exit 2 naming the file, never a traceback or an internal error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_helpers import assert_clean_failure, run_main
from repo_paths import ROOT

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _write(tmp: Path, name: str, data: bytes) -> str:
    path = tmp / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.timeout(120)
@FAST
@given(data=st.binary(max_size=300))
def test_report_hypothesis_random_bytes_as_a_result_file(
    data: bytes, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(Path(fuzz_env["tmp"]), "result.json", data)
    code, _out, err, elapsed = run_main(["report", path], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(path,), seconds=15)


@pytest.mark.timeout(120)
@FAST
@given(value=JSON_VALUES)
def test_report_hypothesis_random_json_as_a_result_file(
    value: object, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(Path(fuzz_env["tmp"]), "result.json", json.dumps(value).encode())
    code, _out, err, elapsed = run_main(["report", path], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(path,), seconds=15)


@pytest.mark.timeout(120)
@FAST
@given(data=st.binary(max_size=300))
def test_up_hypothesis_random_bytes_as_a_spec_file(
    data: bytes, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(Path(fuzz_env["tmp"]), "spec.json", data)
    code, _out, err, elapsed = run_main(["up", "--spec", path], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(path,), seconds=15)


@pytest.mark.timeout(120)
@FAST
@given(value=JSON_VALUES.filter(lambda v: not (isinstance(v, dict) and "model" in v)))
def test_up_hypothesis_random_json_as_a_spec_file(
    value: object, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(Path(fuzz_env["tmp"]), "spec.json", json.dumps(value).encode())
    code, _out, err, elapsed = run_main(["up", "--spec", path], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(path,), seconds=15)


@pytest.mark.timeout(120)
@FAST
@given(host=st.text(max_size=20).filter(lambda s: "\x00" not in s))
def test_plan_hypothesis_random_strings_as_host(
    host: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever --host is, plan either accepts a real host or says it is not one (never a crash)."""
    from llmdeck.util.net import is_valid_host

    code, _out, err, elapsed = run_main(["plan", "Qwen3-0.6B", "--machine", "h200", "--host", host], capsys)
    if is_valid_host(host):
        assert code in (0, 1) and "Traceback" not in err
    else:
        assert_clean_failure(code, err, elapsed, want=2, needles=("--host",), seconds=15)


@pytest.mark.timeout(120)
@FAST
@given(target=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=16))
def test_check_hypothesis_random_strings_as_target(
    target: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A random TARGET is a bad URL or an unknown name (exit 2), or a URL nothing answers (exit 1)."""
    if not target.isalpha() or target.lower().startswith("localhost"):
        target = "ghost-" + target.encode("ascii", "ignore").hex()  # no DNS look-ups of random names
    code, _out, err, elapsed = run_main(["check", target, "--timeout", "2"], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(), seconds=10)


# ---- YAML limits for user catalogs (llmdeck.util.safeyaml) -------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (BOMB, "aliases"),
        ("[" * 200 + "]" * 200, "nesting"),
        ("x" * (2 << 20), "limit"),
        (b"\xff\xfe\x00models", "UTF-8"),
        ("models: [\n", "not acceptable YAML"),
        # were internal errors: ValueError out of PyYAML's int() and date constructors
        ("models:\n  - name: a\n    size: " + "1" * 5000 + "\n", "more than 4,300 digits"),
        ("models:\n  - name: a\n    size: 2024-13-45\n", "month must be in 1..12"),
    ],
    ids=[
        f"models:catalog-{k}"
        for k in ("alias-bomb", "deep-nesting", "too-big", "not-utf8", "broken", "huge-int", "no-such-date")
    ],
)
def test_catalog_yaml_limits(text: str | bytes, says: str) -> None:
    from llmdeck.errors import ConfigError
    from llmdeck.util.safeyaml import load_limited

    with pytest.raises(ConfigError) as info:
        load_limited(text, "user.yaml")
    assert says in info.value.render() and "user.yaml" in info.value.render()


def test_catalog_yaml_plain_file_loads() -> None:
    from llmdeck.util.safeyaml import load_limited

    assert load_limited("models:\n  - name: a\n", "user.yaml") == {"models": [{"name": "a"}]}


def test_settings_refuse_a_catalog_over_one_mib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.errors import ConfigError
    from llmdeck.settings import load_settings

    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * ((1 << 20) + 1))
    monkeypatch.setenv("LLMDECK_CATALOG_PATHS", str(big))
    with pytest.raises(ConfigError, match="over the 1 MiB limit"):
        load_settings()


# ---- the client's errors: every raise site can build them (was: TypeError on 401/500 and timeouts) --


def test_client_errors_are_constructible_and_rewordable() -> None:
    import copy

    from llmdeck.client.errors import HTTPStatusError, StreamTimeoutError, http_status_error

    plain = HTTPStatusError("x answered HTTP 500")  # what bench's re-raise did: no status, no body
    assert plain.status == 0 and plain.exit_code == 1
    assert StreamTimeoutError("slow").which == "total"
    e = http_status_error("http://h/v1/models", 401, '{"error": "Unauthorized"}')
    again = e.reworded("Cannot bench http://h: " + e.message)
    assert isinstance(again, HTTPStatusError) and again.status == 401 and "API key" in again.render()
    assert copy.copy(e).status == 401


@pytest.mark.timeout(120)
@FAST
@given(value=JSON_VALUES, cut=st.integers(min_value=0, max_value=400))
def test_report_hypothesis_a_tune_trials_file_with_a_random_line(
    value: object, cut: int, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`report DIR` of a tune folder: the real H200 header, then random JSON as a trial line, or the
    header cut short — exit 2 naming the file (a torn last line alone is dropped, as the tune does)."""
    header = (ROOT / "evidence/tune/h200/trials.jsonl").read_text().split("\n")[0]
    folder = Path(fuzz_env["tmp"]) / "tune"
    folder.mkdir(exist_ok=True)
    text = f"{header}\n{json.dumps(value)}\n{header[:cut]}\n"
    (folder / "trials.jsonl").write_text(text)
    code, _out, err, elapsed = run_main(["report", str(folder)], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=("trials.jsonl",), seconds=15)


def test_report_of_a_tune_with_no_trial_says_it_may_have_been_interrupted(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A tune interrupted in its first trial (the header alone) had read "every candidate was rejected or
    failed"."""
    header = (ROOT / "evidence/tune/h200/trials.jsonl").read_text().split("\n")[0]
    folder = Path(fuzz_env["tmp"]) / "tune"
    folder.mkdir()
    (folder / "trials.jsonl").write_text(header + "\n")
    code, out, err, _ = run_main(["report", str(folder)], capsys)
    assert code == 0 and "No trial finished (an interrupted tune?)" in out, err
