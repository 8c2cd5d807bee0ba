"""Fuzz suite, part 5: bad gateway configs for the models on demand (issue 21) through
`llmdeck gateway up --config FILE`: every one exit 2 before anything starts, naming the file and the
line, saying what to do (tests/fuzz_helpers.py); a keys_file that does not exist; `keys create --models`
naming no model. Ids start with the command (counted by conftest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzz_helpers import Case, FuzzRun, case

HEAD = "routes:\n  - model: a\n"


def _cfg(backend: str, budget: str = "") -> str:
    """A route whose backend is ``backend`` (line 3); ``budget`` lines follow from line 4."""
    return HEAD + f"    backends: [{backend}]\n" + (f"budget:\n{budget}" if budget else "")


CONFIGS: dict[str, tuple[str, int, str]] = {
    "spec-missing": (_cfg("{spec: missing.json}"), 3, "does not exist"),
    "spec-folder": (_cfg("{spec: folder}"), 3, "folder"),
    "spec-not-json": (_cfg("{spec: binary.json}"), 3, "spec"),
    "spec-a-list": (_cfg("{spec: list.json}"), 3, "not a JSON object"),
    "spec-no-model": (_cfg("{spec: no_model.json}"), 3, "model"),
    "spec-empty-string": (_cfg("{spec: ''}"), 3, "spec"),
    "sleep-level-3": (_cfg("{spec: a.json, sleep_level: 3}"), 3, "sleep_level"),
    "sleep-level-cpu": (_cfg("{spec: a.json, sleep_level: 1}"), 3, "CPU engine"),
    "ttl-negative": (_cfg("{spec: a.json, ttl_s: -1}"), 3, "ttl_s"),
    "ttl-text": (_cfg("{spec: a.json, ttl_s: soon}"), 3, "ttl_s"),
    "backend-memory-zero": (_cfg("{spec: a.json, memory_gib: 0}"), 3, "memory_gib"),
    "min-resident-negative": (_cfg("{spec: a.json, min_resident_s: -1}"), 3, "min_resident_s"),
    "group-empty": (_cfg("{spec: a.json, group: ''}"), 3, "group"),
    "keep-text": (_cfg("{spec: a.json, keep: perhaps}"), 3, "keep"),
    "backend-unknown-key": (_cfg("{spec: a.json, tll_s: 5}"), 3, "tll_s"),
    # were "Input should be a valid dictionary or instance of BackendSpec" (a Python class named)
    "backend-a-number": (
        _cfg("5"),
        3,
        "backends[0]: Input should be a valid string or Input should be a valid dictionary.",
    ),
    "timeouts-a-list": (
        _cfg("{spec: a.json}") + "timeouts: [1]\n",
        4,
        "timeouts: Input should be a valid dictionary.",
    ),
    "lifecycle-on-a-url": (_cfg("{url: 'http://127.0.0.1:9', min_resident_s: 5}"), 3, "min_resident_s"),
    "budget-negative": (_cfg("{spec: a.json}", "  memory_gib: -1\n"), 5, "budget.memory_gib"),
    "budget-text": (_cfg("{spec: a.json}", "  memory_gib: lots\n"), 5, "budget.memory_gib"),
    "budget-inf": (_cfg("{spec: a.json}", "  memory_gib: .inf\n"), 5, "budget.memory_gib"),
    "budget-nan": (_cfg("{spec: a.json}", "  memory_gib: .nan\n"), 5, "finite number"),
    "budget-reserve-negative": (_cfg("{spec: a.json}", "  reserve_gib: -2\n"), 5, "reserve_gib"),
    "budget-kind-unknown": (_cfg("{spec: a.json}", "  kind: tpu\n"), 5, "kind"),
    "budget-unknown-key": (_cfg("{spec: a.json}", "  memory: 5\n"), 5, "memory"),
    "budget-a-list": (_cfg("{spec: a.json}", "  - 5\n"), 5, "budget"),
    "queue-max-waiting-zero": (_cfg("{spec: a.json}", "  queue: {max_waiting: 0}\n"), 5, "max_waiting"),
    "queue-wait-zero": (_cfg("{spec: a.json}", "  queue: {wait_s: 0}\n"), 5, "wait_s"),
    "queue-unknown-key": (_cfg("{spec: a.json}", "  queue: {max_wait: 3}\n"), 5, "max_wait"),
}
# a keys file the config names must exist: else the gateway would serve with no keys (line 4: keys_file)
CONFIGS |= {
    "keys-file-missing": (_cfg("'http://127.0.0.1:9'") + "keys_file: nokeys.json\n", 4, "keys create"),
    "keys-file-no-folder": (_cfg("'http://127.0.0.1:9'") + "keys_file: no/such/keys.json\n", 4, "no/such"),
}
CASES = [
    case(
        f"gateway:config-{name}",
        "gateway up --config {tmp}/" + f"{name}.yaml",
        2,
        f"{name}.yaml:{line}",
        word,
    )
    for name, (_text, line, word) in CONFIGS.items()
]
# nested past Python's stack (PyYAML composes recursively): was "internal error: RecursionError"
CASES.append(
    case(
        "gateway:config-nested-too-deep", "gateway up --config {tmp}/deep.yaml", 2, "deep.yaml", "too deeply"
    )
)
# `keys revoke` of a name not there: what to do was missing (a file that does not exist read "known: none")
CASES += [
    case(
        "keys:revoke-unknown-name",
        "keys revoke nobody --keys-file {tmp}/keys.json",
        2,
        "'nobody'",
        "does not exist",
    ),
]
# values PyYAML resolves but cannot build (ValueError, no YAMLError): were internal errors
CASES += [
    case("gateway:config-int-of-5000-digits", "gateway up --config {tmp}/bigint.yaml", 2, "4,300 digits"),
    case("gateway:config-date-that-is-none", "gateway up --config {tmp}/baddate.yaml", 2, "month must be"),
]
# `keys create --models` with no alias in it: refused, never stored as "every model"; an alias no route
# could have (an escape sequence, over 200 characters): the config's rule, refused
KEY_MODELS = {
    "empty": ("", "names no model", "--models out"),
    "blank": ("  ", "names no model", "--models out"),
    "commas": (" , ", "names no model", "--models out"),
    "comma": (",", "names no model", "--models out"),
    "escape": ("qwen,\x1b[2Jx", "is no name", "printable"),
    "bell": ("a\x07", "is no name", "printable"),
    "long": ("q" * 201, "is no name", "printable"),
}
CASES += [
    case(
        f"keys:create-models-{name}",
        ["keys", "create", "alice", "--models", value, "--keys-file", "{tmp}/keys.json"],
        2,
        *words,
    )
    for name, (value, *words) in KEY_MODELS.items()
]


@pytest.fixture
def gateway_inputs(fuzz_env: dict[str, str]) -> dict[str, str]:
    tmp = Path(fuzz_env["tmp"])
    spec = {"name": "a", "engine": "cpu", "model": str(tmp / "m"), "port": 9301}
    (tmp / "a.json").write_text(json.dumps(spec))
    (tmp / "binary.json").write_bytes(bytes(range(256)))
    (tmp / "list.json").write_text("[1, 2]")
    (tmp / "no_model.json").write_text(json.dumps({"name": "a"}))
    (tmp / "bigint.yaml").write_text(_cfg("{spec: a.json, ttl_s: " + "1" * 5000 + "}"))
    (tmp / "baddate.yaml").write_text(_cfg("{spec: a.json, ttl_s: 2024-13-45}"))
    (tmp / "deep.yaml").write_text(HEAD + "    backends: " + "[" * 50_000 + "]" * 50_000 + "\n")
    for name, (text, _line, _word) in CONFIGS.items():
        (tmp / f"{name}.yaml").write_text(text)
    return fuzz_env


@pytest.mark.timeout(60)
@pytest.mark.parametrize("c", CASES)
def test_bad_gateway_config(c: Case, gateway_inputs: dict[str, str], fuzz_run: FuzzRun) -> None:
    fuzz_run(c, gateway_inputs)
    assert not (Path(gateway_inputs["tmp"]) / "keys.json").exists()  # a refused key writes no file


# a gateway record (<state>/gateway/gateway.json) that is no record: exit 2 in words (it named
# ValidationError/UnicodeDecodeError, a folder was an internal error, a named pipe hung)
RECORDS = {
    "folder": ("a folder", "folder"),
    "fifo": ("a named pipe", "named pipe"),
    "binary": (bytes(range(256)), "not UTF-8"),
    "not-json": ("{nope", "not a gateway record"),
    "pid-negative": (
        '{"pid": -5, "host": "127.0.0.1", "port": 4000, "config": "x", "log_path": "y"}',
        "not a",
    ),
    "pid-huge": (
        '{"pid": 4294967296, "host": "127.0.0.1", "port": 4000, "config": "x", "log_path": "y"}',
        "not a",
    ),
    # shown as "dead at http://[::1]:-5" before
    "port-negative": ('{"pid": 5, "host": "::1", "port": -5, "config": "x", "log_path": "y"}', "not a"),
    "host-markup": ('{"pid": 5, "host": "[red]h", "port": 4000, "config": "x", "log_path": "y"}', "not a"),
    # pydantic's lax mode had read true as pid 1 (init) and "4000" as a port
    "pid-true": ('{"pid": true, "host": "127.0.0.1", "port": 4000, "config": "x", "log_path": "y"}', "not a"),
    "port-string": (
        '{"pid": 5, "host": "127.0.0.1", "port": "4000", "config": "x", "log_path": "y"}',
        "not a",
    ),
}
RECORD_CASES = [
    case(f"gateway:record-{name}-{cmd}", ["gateway", cmd], 2, "gateway record", word, "Delete")
    for name, (_content, word) in RECORDS.items()
    for cmd in ("status", "down")
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("c", RECORD_CASES)
def test_bad_gateway_record(c: Case, fuzz_env: dict[str, str], tmp_path: Path, fuzz_run: FuzzRun) -> None:
    import os

    name = c.id.split(":", 1)[1].removeprefix("record-").rsplit("-", 1)[0]
    record = tmp_path / "state" / "gateway" / "gateway.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    content = RECORDS[name][0]
    if name == "folder":
        record.mkdir()
    elif name == "fifo":
        os.mkfifo(record)
    else:
        record.write_bytes(content if isinstance(content, bytes) else content.encode())
    err = fuzz_run(c, fuzz_env)
    assert "Error" not in err  # no exception class names


def test_a_config_whose_aliases_expand_past_any_config_is_refused(tmp_path: Path) -> None:
    """gateway:config-billion-laughs — 1 KB of aliases inside aliases in a route's defaults had loaded
    (exit 0, the gateway up): its first request then serialized 10^9 values into the backend's body."""
    from llmdeck.errors import ConfigError
    from llmdeck.gateway.config import parse_config
    from llmdeck.settings import Settings

    lines = [
        HEAD + "    backends: ['http://127.0.0.1:9']\n    defaults:",
        "      l0: &a0 [x, x, x, x, x, x, x, x, x, x]",
    ]
    lines += [f"      l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(ConfigError) as info:
        parse_config(
            "\n".join(lines) + "\n", source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path)
        )
    assert "g.yaml: the YAML expands to more than 100,000 values" in info.value.render()
    # a shared block used a few times is fine
    text = HEAD + "    backends: ['http://127.0.0.1:9']\n    defaults: &d {max_tokens: 5}\n"
    text += "  - model: b\n    backends: ['http://127.0.0.1:9']\n    defaults: *d\n"
    assert (
        len(parse_config(text, source=tmp_path / "g.yaml", settings=Settings(state_dir=tmp_path)).routes) == 2
    )
