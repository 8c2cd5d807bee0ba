"""Fuzz suite, trust round 2 (issue 38): the kinds of bad input that still broke a promise, generated.

* files that are not UTF-8, in every role a user file plays (catalogs, model configs, specs, results,
  tune trials): exit 2 naming the file, never "a bug";
* JSON nested past Python's decoder wherever llmdeck parses JSON it did not write: exit 2;
* hostile config.json shapes for `plan` (huge lists, strings, objects; sizes at their limits): an
  answer within 10 s;
* peers that accept and then trickle their headers, or send a status line and go silent, against
  bench, check, connect, fetch and status: exit 1 within the command's own limit, naming the peer;
* LLMDECK_*_DIR settings where llmdeck cannot keep files (/proc, /sys): exit 2 for every command;
* bench results with a number they cannot hold (negative, NaN, a boolean): exit 2, never accepted;
* a missing model folder: its message says it is not a folder.

Signals (`up` under SIGINT/SIGTERM) are in tests/unit/test_fuzz_signals.py. What every case asserts is in
tests/fuzz_helpers.py (exit code, what is wrong, what to do, no traceback or "bug", a time bound).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_servers import running
from fuzz_helpers import assert_clean_failure, run_main
from repo_paths import ROOT

FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
PLAN = ["--machine", "h200"]
QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 1024,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 3072,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": True,
}


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


NOT_UTF8 = st.binary(min_size=1, max_size=200).filter(_not_utf8)


def _model(tmp: Path, name: str = "m", config: dict[str, Any] | None = None) -> Path:
    d = tmp / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(config or QWEN3))
    return d


# ---- files that are not UTF-8 -------------------------------------------------------------------------


def _role(tmp: Path, role: str, data: bytes) -> tuple[list[str], dict[str, str], str]:
    """(argv, env, the path the message must name) for one file role holding ``data``."""
    if role == "catalog-file":
        (tmp / "user.yaml").write_bytes(data)
        return ["models"], {"LLMDECK_CATALOG_PATHS": str(tmp / "user.yaml")}, str(tmp / "user.yaml")
    if role == "catalog-folder":
        (tmp / "cats").mkdir(exist_ok=True)
        (tmp / "cats" / "x.yaml").write_bytes(data)
        return PLAN_ARGV, {"LLMDECK_CATALOG_PATHS": str(tmp / "cats")}, str(tmp / "cats" / "x.yaml")
    if role == "catalog-entry-config":
        (tmp / "bad-config.json").write_bytes(data)
        entry = {"name": "Mine", "repo_id": "me/mine", "config": str(tmp / "bad-config.json")}
        (tmp / "cat.yaml").write_text(json.dumps({"schema_version": 1, "models": [entry]}))
        env = {"LLMDECK_CATALOG_PATHS": str(tmp / "cat.yaml")}
        return ["plan", "Mine", *PLAN], env, str(tmp / "bad-config.json")
    if role == "model-config":
        d = _model(tmp)
        (d / "config.json").write_bytes(data)
        return ["plan", str(d), *PLAN], {}, str(d / "config.json")
    if role == "spec":
        (tmp / "spec.json").write_bytes(data)
        return ["up", "--spec", str(tmp / "spec.json")], {}, str(tmp / "spec.json")
    if role == "tune-spec":
        (tmp / "spec.json").write_bytes(data)
        argv = ["tune", "--spec", str(tmp / "spec.json"), "--workload", "agent", "--slo", "ttft_p99=2s"]
        return argv, {}, str(tmp / "spec.json")
    if role == "result":
        (tmp / "r.json").write_bytes(data)
        return ["report", str(tmp / "r.json")], {}, str(tmp / "r.json")
    if role == "against":
        result = next((ROOT / "evidence" / "tune" / "cpu-confirm" / "bench").glob("trial-*.json"))
        (tmp / "v.json").write_bytes(data)
        return ["report", str(result), "--against", str(tmp / "v.json")], {}, str(tmp / "v.json")
    raise AssertionError(role)


PLAN_ARGV = ["plan", "Qwen3-0.6B", *PLAN]
ROLES = ["catalog-file", "catalog-folder", "catalog-entry-config", "model-config", "spec", "tune-spec"]
ROLES += ["result", "against"]
COMMAND = {
    "catalog-file": "models",
    "tune-spec": "tune",
    "result": "report",
    "against": "report",
    "spec": "up",
}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("role", ROLES, ids=[f"{COMMAND.get(r, 'plan')}:not-utf8-{r}" for r in ROLES])
@FAST
@given(data=NOT_UTF8)
def test_a_file_that_is_not_utf8_is_bad_input_naming_it(
    role: str,
    data: bytes,
    fuzz_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv, env, path = _role(Path(fuzz_env["tmp"]), role, data)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(path,), seconds=20)


@pytest.mark.timeout(300)
@FAST
@given(data=NOT_UTF8)
def test_plan_a_safetensors_index_that_is_not_utf8_is_no_crash(
    data: bytes, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """plan:not-utf8-index — the index only gives the checkpoint's size: without it plan still plans."""
    d = _model(Path(fuzz_env["tmp"]))
    (d / "model.safetensors.index.json").write_bytes(data)
    code, _out, err, _elapsed = run_main(["plan", str(d), *PLAN], capsys)
    assert code == 0, err


# ---- JSON nested past the decoder ---------------------------------------------------------------------

DEPTHS = st.integers(min_value=2_000, max_value=60_000)


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _deep_case(tmp: Path, where: str, n: int) -> tuple[list[str], dict[str, str], str]:
    if where == "hf-overrides":
        return ["plan", str(_model(tmp)), *PLAN, "--", "--hf-overrides", _deep(n)], {}, "--hf-overrides"
    if where == "catalog-paths":
        return ["models"], {"LLMDECK_CATALOG_PATHS": _deep(n)}, "LLMDECK_CATALOG_PATHS"
    if where == "config":
        d = _model(tmp)
        (d / "config.json").write_text('{"a": ' + _deep(n) + "}")
        return ["plan", str(d), *PLAN], {}, str(d / "config.json")
    if where == "result":
        (tmp / "r.json").write_text(_deep(n))
        return ["report", str(tmp / "r.json")], {}, str(tmp / "r.json")
    if where == "trials":
        header = (ROOT / "evidence/tune/h200/trials.jsonl").read_text().split("\n")[0]
        (tmp / "tune").mkdir(exist_ok=True)
        (tmp / "tune" / "trials.jsonl").write_text(f"{header}\n{_deep(n)}\n")
        return ["report", str(tmp / "tune")], {}, "trials.jsonl"
    if where == "spec":
        (tmp / "spec.json").write_text('{"model": ' + _deep(n) + "}")
        return ["up", "--spec", str(tmp / "spec.json")], {}, str(tmp / "spec.json")
    raise AssertionError(where)


DEEP = ["hf-overrides", "catalog-paths", "config", "result", "trials", "spec"]
DEEP_CMD = {"catalog-paths": "models", "result": "report", "trials": "report", "spec": "up"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", DEEP, ids=[f"{DEEP_CMD.get(w, 'plan')}:json-too-deep-{w}" for w in DEEP])
@FAST
@given(depth=DEPTHS)
def test_json_nested_past_the_decoder_is_bad_input(
    where: str,
    depth: int,
    fuzz_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv, env, needle = _deep_case(Path(fuzz_env["tmp"]), where, depth)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(needle,), seconds=20)


# ---- plan on hostile config shapes: an answer within 10 s -----------------------------------------------

JUNK = st.one_of(
    st.integers(1, 1_500_000).map(lambda n: [[1]] * n),  # up to ~7 MB of JSON each: past the 4 MiB cap
    st.integers(1, 800_000).map(lambda n: "x" * (n * 10)),
    st.integers(1, 500_000).map(lambda n: {str(i): i for i in range(n)}),
    st.integers(1, 1_000_000).map(lambda n: {"rope_type": "longrope", "long_factor": [1.0] * n}),
)
SHAPES = st.fixed_dictionaries(
    {},
    optional={
        "num_hidden_layers": st.sampled_from([1, 2, 4096, 99_999, 100_000]),
        "num_experts": st.sampled_from([0, 8, 1 << 16, 1 << 24]),
        "num_experts_per_tok": st.sampled_from([1, 8, 1 << 16]),
        "moe_intermediate_size": st.sampled_from([1, 768, 1 << 24]),
        "sliding_window": st.sampled_from([1, 128, 4096, 1 << 32]),
        "max_position_embeddings": st.sampled_from([1, 4096, 1 << 32]),
        "tie_word_embeddings": st.sampled_from([None, True]),
    },
)


@pytest.mark.timeout(600)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=SHAPES, junk=st.none() | JUNK)
def test_plan_hypothesis_hostile_config_shapes_end_within_20_s(
    shape: dict[str, Any], junk: Any, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    config = {**QWEN3, **{k: v for k, v in shape.items() if v is not None}}
    if shape.get("tie_word_embeddings", 1) is None:
        config.pop("tie_word_embeddings")  # transformers is asked for the default: its import counts
    if "sliding_window" in shape:
        config["layer_types"] = ["sliding_attention", "full_attention"] * (config["num_hidden_layers"] // 2)
    if junk is not None:
        config["rope_scaling" if isinstance(junk, dict) and "rope_type" in junk else "junk"] = junk
    d = _model(Path(fuzz_env["tmp"]), config=config)
    from llmdeck.plan.configread import _transformers_defaults

    _transformers_defaults(dict(QWEN3))  # transformers' one-time import (7 s idle, 15 s loaded) untimed
    code, _out, err, elapsed = run_main(["plan", str(d), *PLAN], capsys)
    assert code in (0, 1, 2) and "Traceback" not in err and " bug" not in err.lower(), err[-800:]
    assert elapsed < 20, f"plan took {elapsed:.1f} s on {sorted(config)}"


# ---- peers that accept, then trickle or go silent -----------------------------------------------------

PEER_COMMANDS = {
    "bench": "bench {url} --num-prompts 2 --timeout-probe 3 --out {tmp}/r.json",
    "check": "check {url} --timeout 3",
    "connect": "connect openai --server {url} --print --timeout 3",
    "status": "status {url} --timeout 3",
    "fetch": "fetch Qwen/Qwen3-0.6B --config-only --endpoint {url} --timeout 3 --local-dir {tmp}/dl",
}
PEERS = ["fake_trickle_headers_server", "fake_status_line_only_server"]
PEER_CASES = [(c, f) for c in PEER_COMMANDS for f in PEERS]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("command", "fake"), PEER_CASES, ids=[f"{c}:{f}" for c, f in PEER_CASES])
def test_a_peer_that_trickles_its_headers_is_bounded_as_a_whole(
    command: str, fake: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Each read returns within httpx's timeout (a byte every 0.5 s, ~100 s of headers): the command
    ends by its own limit (3 s here) all the same, saying which peer does not answer."""
    with running(fake) as url:
        argv = PEER_COMMANDS[command].format(url=url, tmp=fuzz_env["tmp"]).split()
        code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=("127.0.0.1", "not answering"), seconds=15)


@pytest.mark.timeout(120)
def test_bench_requests_to_a_peer_that_trickles_headers_end_and_are_kept(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """bench:requests-trickled-headers — /v1/models answers, then each request's headers trickle:
    each request ends at --timeout-total, recorded as a timeout in the result file (kept)."""
    out = Path(fuzz_env["tmp"]) / "r.json"
    with running("fake_models_then_trickle_headers_server") as url:
        argv = ["bench", url, "--num-prompts", "2", "--no-metrics", "--timeout-total", "2", "--out", str(out)]
        code, _stdout, err, elapsed = run_main([*argv, "--input-len", "8", "--output-len", "4"], capsys)
    assert code == 1 and elapsed < 30, err
    assert "Every request failed (2 of them)" in " ".join(err.split())
    requests = json.loads(out.read_text())["scenarios"][0]["requests"]
    assert [r["error_kind"] for r in requests] == ["timeout", "timeout"]


# ---- settings where llmdeck cannot keep files ---------------------------------------------------------

DIR_VARS = ["LLMDECK_STATE_DIR", "LLMDECK_CACHE_DIR", "LLMDECK_MODELS_DIR", "LLMDECK_RESULTS_DIR"]
EVERY = ["doctor", "models", "plan Qwen3-0.6B --machine h200", "status", "keys create bob", "down", "bench x"]


DIR_CASES = [(v, p, c) for v in DIR_VARS for p in ("/proc/llmdeck-x", "/sys/x") for c in EVERY[:4]]
DIR_CASES += [("LLMDECK_STATE_DIR", "/proc/self", c) for c in EVERY[4:]]


@pytest.mark.parametrize(
    ("var", "value", "command"), DIR_CASES, ids=[f"{c.split()[0]}:{v}={p}" for v, p, c in DIR_CASES]
)
def test_a_dir_setting_on_a_virtual_file_system_is_bad_input(
    var: str,
    value: str,
    command: str,
    fuzz_env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(var, value)
    code, _out, err, elapsed = run_main(command.split(), capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(var, "virtual file system"), seconds=20)


# ---- bench results with numbers they cannot hold ------------------------------------------------------

RESULT = ROOT / "evidence" / "tune" / "cpu-confirm" / "bench" / "trial-001.json"


def _number_paths(obj: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _number_paths(v, (*at, k))]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj[:3]) for p in _number_paths(v, (*at, i))]
    signed = {"server_t", "host_t", "top_k"} & {str(x) for x in at}
    return [at] if isinstance(obj, int | float) and not isinstance(obj, bool) and not signed else []


DOC = json.loads(RESULT.read_text())
NUMBERS = [p for p in _number_paths(DOC) if p[0] != "schema_version"]


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(NUMBERS), bad=st.sampled_from([-1, -0.5, math.nan, math.inf, True, "12"]))
def test_report_hypothesis_a_number_a_result_cannot_hold_is_bad_input(
    where: tuple[Any, ...], bad: Any, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Any measurement negative, NaN or infinite; a typed one a boolean or a string. (``request`` is the
    bench's own request, kept as given: free-form, so only its sign and finiteness are checked.)"""
    if where[0] == "request" and isinstance(bad, bool | str):
        bad = -1
    doc = json.loads(RESULT.read_text())
    node = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = bad
    path = Path(fuzz_env["tmp"]) / "r.json"
    path.write_text(json.dumps(doc))
    code, _out, err, elapsed = run_main(["report", str(path)], capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(str(path),), seconds=20)


# ---- a missing model folder ---------------------------------------------------------------------------

MISSING = [
    ("up:missing-model-folder", "up --model {tmp}/no-such-model --engine cpu"),
    ("up:missing-model-folder-venv", "up --model {tmp}/no-such-model --engine venv --python /bin/true"),
    ("plan:missing-model-folder", "plan {tmp}/no-such-model/ --machine h200"),
]


@pytest.mark.parametrize(("cid", "argv"), MISSING, ids=[m[0] for m in MISSING])
def test_a_missing_model_folder_says_it_is_not_a_folder(
    cid: str, argv: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err, elapsed = run_main(argv.format(**fuzz_env).split(), capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=("no-such-model", "not a"), seconds=20)
    assert "folder" in err
