"""Gateway parts without a network: config validation (with line numbers), request rewriting, keys,
rpm limits, the bind policy, and the keys CLI."""

from __future__ import annotations

import hmac
import json
import os
import stat
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import ConfigError, UsageError
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.keys import KeyRing, KeyStore, parse_models, verify
from llmdeck.gateway.limits import RateLimiter
from llmdeck.gateway.merge import rewrite_request
from llmdeck.gateway.service import check_bind
from llmdeck.runtime.state import ServerRecord, StateStore
from llmdeck.settings import Settings
from repo_paths import ROOT


@pytest.fixture()
def settings(tmp_path: Path) -> Settings:
    return Settings(state_dir=tmp_path / "state")


def parse(text: str, settings: Settings, tmp_path: Path) -> object:
    return parse_config(text, source=tmp_path / "gw.yaml", settings=settings)


GOOD = """\
routes:
  - model: fast
    backends:
      - http://127.0.0.1:8001/v1
      - {url: "http://127.0.0.1:8002", model: qwen}
    defaults:
      chat_template_kwargs: {enable_thinking: false}
limits:
  alice: {rpm: 5, models: [fast]}
"""


def test_good_config_resolves_urls_and_server_names(settings: Settings, tmp_path: Path) -> None:
    loaded = parse(GOOD, settings, tmp_path)
    route = loaded.route("fast")  # type: ignore[attr-defined]
    assert [b.url for b in route.backends] == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    assert route.backends[1].served_model == "qwen"
    assert loaded.keys_file == settings.state_dir / "gateway" / "keys.json"  # type: ignore[attr-defined]
    # an llmdeck server name resolves through the runtime records, as check/bench do
    spec = LaunchSpec(name="coder", model="/m/Qwen3-Coder", served_model_name="qwen3-coder", port=8123)
    StateStore(settings.servers_dir).save(
        ServerRecord(name="coder", spec=spec, argv=[], log_path=tmp_path / "l")
    )
    loaded = parse("routes:\n  - model: c\n    backends: [coder]\n", settings, tmp_path)
    backend = loaded.route("c").backends[0]  # type: ignore[attr-defined]
    assert (backend.url, backend.served_model, backend.label) == (
        "http://127.0.0.1:8123",
        "qwen3-coder",
        "coder",
    )


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("routes:\n  - model: a\n    backends: [http://h:1]\n    defualts: {}\n", 4, "defualts"),
        ("routes:\n  - model: a\n    backends: []\n", 3, "at least 1"),
        (
            "routes:\n  - model: a\n    backends: [http://h:1]\ntimeouts:\n  connect_s: -1\n",
            5,
            "greater than 0",
        ),
        (
            "routes:\n  - model: a\n\n    backends: [http://h:1]\n  - model: a\n    backends: [http://h:2]\n",
            5,
            "already",
        ),
        (
            "routes:\n  - model: a\n    backends:\n      - http://h:1\n      - nosuchserver\n",
            5,
            "nosuchserver",
        ),
        ("routes:\n  - model: a\n    backends: [http://h:1]\nlimits:\n  bob: {models: [a, b]}\n", 5, "'b'"),
        ("routes:\n  - model: a\n    backends: [http://h:1\n", 4, "YAML"),
        ("routes:\n  - backends: [http://h:1]\n", 2, "model"),
    ],
)
def test_config_errors_name_the_line(
    settings: Settings, tmp_path: Path, text: str, line: int, words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text, settings, tmp_path)
    message = info.value.render()
    assert f"gw.yaml:{line}:" in message and words in message
    assert info.value.exit_code == 2


def test_backend_api_key_env_must_be_set(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "routes:\n  - model: a\n    backends:\n      - {url: 'http://h:1', api_key_env: GW_TEST_KEY}\n"
    monkeypatch.delenv("GW_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"gw.yaml:4: .*GW_TEST_KEY"):
        parse(text, settings, tmp_path)
    monkeypatch.setenv("GW_TEST_KEY", "secret-upstream")
    backend = parse(text, settings, tmp_path).route("a").backends[0]  # type: ignore[attr-defined]
    assert backend.api_key == "secret-upstream" and "secret-upstream" not in repr(backend)
    monkeypatch.setenv("GW_TEST_KEY", "secret-upstream\nTAIL")  # a pasted line break: refused, not quoted
    with pytest.raises(ConfigError, match=r"gw.yaml:4: the key in GW_TEST_KEY cannot be sent") as info:
        parse(text, settings, tmp_path)
    assert "TAIL" not in info.value.render()


def test_defaults_fill_override_replaces() -> None:
    body = {
        "model": "alias",
        "max_tokens": None,
        "chat_template_kwargs": {"custom": 1},
        "temperature": 0.9,
        "top_p": 1,
    }
    out = rewrite_request(
        body,
        defaults={
            "max_tokens": 256,
            "chat_template_kwargs": {"enable_thinking": False, "custom": 2},
            "seed": 7,
        },
        override={"temperature": 0, "top_p": None, "extra_body": {"x": [1]}},
        served_model="served",
    )
    assert out == {
        "model": "served",
        "max_tokens": 256,  # null counts as absent
        "chat_template_kwargs": {"custom": 1, "enable_thinking": False},  # the client's own value kept
        "temperature": 0,
        "seed": 7,
        "extra_body": {"x": [1]},
    }
    # the client's explicit choice wins over a default
    body = rewrite_request(
        {"chat_template_kwargs": {"enable_thinking": True}},
        defaults={"chat_template_kwargs": {"enable_thinking": False}},
        override={},
        served_model=None,
    )
    assert body["chat_template_kwargs"]["enable_thinking"] is True
    # override merges objects key by key
    body = rewrite_request(
        {"chat_template_kwargs": {"a": 1, "enable_thinking": True}},
        defaults={},
        override={"chat_template_kwargs": {"enable_thinking": False}},
        served_model=None,
    )
    assert body["chat_template_kwargs"] == {"a": 1, "enable_thinking": False}


def test_keys_are_stored_hashed_0600_and_checked_in_constant_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = KeyStore(tmp_path / "gw" / "keys.json")
    secret = store.create("alice", models=["a"], rpm=3)
    other = store.create("bob")
    assert secret.startswith("sk-llmdeck-") and len(secret) > 40 and secret != other
    text = store.path.read_text()
    assert secret not in text and secret[12:] not in text  # only a salted digest and the first characters
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    records = store.load().keys
    salts = {r.salt for r in records}
    assert len(salts) == 2  # a salt per key
    calls: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr("llmdeck.gateway.keys.hmac.compare_digest", spy)
    assert verify(secret, records).name == "alice"  # type: ignore[union-attr]
    assert len(calls) == 2  # every stored key compared, even after the match
    assert verify(secret[:-1] + "x", records) is None
    assert "salt" not in json.dumps(records[0].public()) and secret not in repr(records[0])
    with pytest.raises(UsageError):
        store.create("alice")
    store.revoke("alice")
    assert verify(secret, store.load().keys) is None


def test_an_empty_model_list_never_means_every_model(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    for models in ([], [" ", ""]):
        with pytest.raises(UsageError, match="names no model"):
            store.create("alice", models=models)
    assert not store.exists()
    assert parse_models(None) is None and parse_models(" a, ,b ") == ["a", "b"]
    store.create("alice", models=[" a "])
    assert store.load().keys[0].models == ["a"]


def test_a_keys_file_others_can_read_is_refused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    store.create("alice")
    os.chmod(store.path, 0o644)
    with pytest.raises(ConfigError) as info:
        store.load()
    assert "chmod 600" in info.value.render()


def test_a_file_that_is_no_keys_file_is_named_so_before_its_mode(tmp_path: Path) -> None:
    """keys_file: /etc/passwd had been told to `chmod 600 /etc/passwd`; a 0600 `{"hello": 1}` had been
    read as a keys file with no key (every request refused, the input error never named)."""
    for text in ("root:x:0:0:root:/root:/bin/bash\n", '{"hello": 1}'):
        path = tmp_path / "k.json"
        path.write_text(text)
        os.chmod(path, 0o644 if text.startswith("root") else 0o600)
        with pytest.raises(ConfigError) as info:
            KeyStore(path).load()
        assert "is not a llmdeck keys file" in info.value.render()
        assert "chmod" not in info.value.render()


def test_key_ring_never_falls_open(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    assert KeyRing(store).enabled is False  # no file: the gateway is open (and loopback-only)
    secret = store.create("alice")
    ring = KeyRing(store)
    assert ring.enabled and ring.lookup(secret) is not None
    store.path.unlink()
    ring.refresh(force=True)
    assert ring.enabled and ring.lookup(secret) is None


def test_the_first_key_made_while_the_gateway_runs_open_closes_it(tmp_path: Path) -> None:
    """`keys create` on an open gateway ("no restart needed", said its help) had left it answering
    requests without a key till a restart, while nothing said so."""
    store = KeyStore(tmp_path / "keys.json")
    ring = KeyRing(store)
    now = [ring._checked]
    ring._clock = lambda: now[0]
    assert ring.enabled is False
    secret = store.create("alice")
    now[0] += 1.1  # the gateway's next request, a second on: asking whether keys are on looks again
    assert ring.enabled and ring.lookup(secret) is not None and ring.lookup("sk-other") is None
    store.revoke("alice")
    ring.refresh(force=True)
    assert ring.enabled and ring.lookup(secret) is None  # no key left: still closed


def test_a_revoke_within_one_mtime_tick_is_seen(tmp_path: Path) -> None:
    """The ring re-read the keys file only when its mtime changed: a revoke written within the same
    tick as the read (a script, or a coarse file system) left the revoked key working until the next
    change. The whole stamp (inode, mtime, size) is compared now; the file is replaced on each write."""
    store = KeyStore(tmp_path / "keys.json")
    secret = store.create("alice")
    ring = KeyRing(store)
    now = [ring._checked]
    ring._clock = lambda: now[0]
    before = store.path.stat().st_mtime_ns
    store.revoke("alice")
    os.utime(store.path, ns=(before, before))  # the same tick
    now[0] += 2.0
    assert ring.lookup(secret) is None


def test_rpm_limiter_sliding_window() -> None:
    now = [100.0]
    limiter = RateLimiter(clock=lambda: now[0])
    assert [limiter.check("a", 2) for _ in range(2)] == [None, None]
    assert limiter.check("a", 2) == 60
    assert limiter.check("b", 2) is None and limiter.check("a", None) is None
    now[0] += 45.2
    assert limiter.check("a", 2) == 15
    now[0] += 15
    assert limiter.check("a", 2) is None


def test_bind_policy() -> None:
    check_bind("127.0.0.1", keys_on=False, insecure=False)
    check_bind("::1", keys_on=False, insecure=False)
    check_bind("0.0.0.0", keys_on=True, insecure=False)
    check_bind("0.0.0.0", keys_on=False, insecure=True)
    with pytest.raises(UsageError) as info:
        check_bind("0.0.0.0", keys_on=False, insecure=False)
    assert "--insecure" in info.value.render() and "keys create" in info.value.render()


def test_keys_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    code, out, err = run_cli(["keys", "create", "ci-bot", "--models", "a,b", "--rpm", "10"], capsys)
    assert code == 0 and out.strip().startswith("sk-llmdeck-") and "shown only now" in err
    secret = out.strip()
    code, out, _ = run_cli(["keys", "list", "--json"], capsys)
    rows = json.loads(out)
    assert (
        code == 0 and rows[0]["name"] == "ci-bot" and rows[0]["models"] == ["a", "b"] and rows[0]["rpm"] == 10
    )
    assert secret not in out and "digest" not in out
    code, out, _ = run_cli(["keys", "list"], capsys)
    assert code == 0 and "ci-bot" in out and secret not in out
    assert run_cli(["keys", "create", "ci-bot"], capsys)[0] == 2
    # --json shows the key too (once: only its digest is kept), and redacts nothing else's shape
    code, out, _ = run_cli(["keys", "create", "json-bot", "--json"], capsys)
    made = json.loads(out)
    assert code == 0 and made["key"].startswith("sk-llmdeck-") and "redacted" not in out
    assert run_cli(["keys", "revoke", "ci-bot"], capsys)[0] == 0
    assert run_cli(["keys", "revoke", "ci-bot"], capsys)[0] == 2


@pytest.mark.parametrize(("salt", "digest"), [("zz", "d" * 64), ("ab" * 16, "d"), ("ab" * 16, "g" * 64)])
def test_a_keys_file_whose_salt_or_digest_is_no_hex_is_refused(
    tmp_path: Path, salt: str, digest: str
) -> None:
    """It had been read, and every request carrying a key then answered 500 (``bytes.fromhex``)."""
    path = tmp_path / "keys.json"
    record = {"name": "x", "salt": salt, "digest": digest, "hint": "h"}
    path.write_text(json.dumps({"schema_version": 1, "keys": [record]}))
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="not the hex digits `llmdeck keys create` writes"):
        KeyStore(path).load()


@pytest.mark.parametrize("rpm", ["0", "-3", "100000000000000000000"])
def test_keys_create_refuses_a_rate_no_gateway_keeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, rpm: str
) -> None:
    """--rpm 1e20 written out had been stored as a limit (and a keys file holding one was read)."""
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    code, out, err = run_cli(["keys", "create", "bot", "--rpm", rpm], capsys)
    assert code == 2 and out == "" and "1 to 1,000,000 requests a minute" in err
    assert not (tmp_path / "state" / "gateway" / "keys.json").exists()


def test_gateway_up_refuses_bad_config_and_open_lan_bind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    cfg = tmp_path / "gw.yaml"
    cfg.write_text("routes:\n  - model: a\n    backends: [http://127.0.0.1:9]\n    bogus: 1\n")
    code, _, err = run_cli(["gateway", "up", "--config", str(cfg)], capsys)
    assert code == 2 and "gw.yaml:4" in err and "bogus" in err
    cfg.write_text("routes:\n  - model: a\n    backends: [http://127.0.0.1:9]\n")
    code, _, err = run_cli(["gateway", "up", "--config", str(cfg), "--host", "0.0.0.0"], capsys)
    assert code == 2 and "without API keys" in err
    code, _, err = run_cli(["gateway", "up", "--config", str(cfg), "--host", "bad host"], capsys)
    assert code == 2 and "--host 'bad host' is not a host" in err  # a typo, not a LAN bind
    args = ["--host", "10.254.254.254", "--insecure", "--port", "18931"]  # not this machine's address
    code, _, err = run_cli(["gateway", "up", "--config", str(cfg), *args], capsys)
    assert code == 2 and "not this machine's address" in err and "in use" not in err
    code, out, _ = run_cli(["gateway", "status", "--json"], capsys)
    assert code == 0 and json.loads(out) == {"state": "stopped"}
    assert run_cli(["gateway", "down"], capsys)[0] == 2


def test_gateway_overhead_results_follow_from_their_runs() -> None:
    """The committed benchmark summaries are what the script's arithmetic gives from the runs kept."""
    import importlib.util

    bench = ROOT / "benchmarks"
    spec = importlib.util.spec_from_file_location("gateway_overhead", bench / "gateway_overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name in ("fake-c16", "fake-c64", "cpu-vllm-c8"):
        doc = json.loads((bench / "results" / f"gateway_overhead_{name}.json").read_text())
        again = module.summarize(doc["runs"])
        for target in ("direct", "llmdeck", "litellm"):
            for key in ("ttft_p50_ms", "events_per_s", "proxy_cpu_s_per_1000_requests", "added_ttft_p50_ms"):
                assert again[target][key] == pytest.approx(doc["summary"][target][key])
        assert doc["summary"]["llmdeck"]["failed"] == 0
        cpu = doc["summary"]
        assert (
            cpu["litellm"]["proxy_cpu_s_per_1000_requests"]
            > 10 * cpu["llmdeck"]["proxy_cpu_s_per_1000_requests"]
        )


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_keys_file_that_is_not_a_file_is_refused_at_once(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named pipe used to hang `keys list`/`keys create` (and the gateway) on its open; a folder got the
    advice to chmod it (for /tmp, harmful)."""
    import os
    import time

    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "keys.json"
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.mkdir(mode=0o700)
    for args in (["keys", "list"], ["keys", "create", "bob"]):
        t0 = time.monotonic()
        code, _out, err = run_cli([*args, "--keys-file", str(path)], capsys)
        assert code == 2 and "not a regular file" in err and "chmod" not in err, err
        assert time.monotonic() - t0 < 5


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x00\xff\xfe binary", "it is not UTF-8 text"),
        (b"[", "it is not JSON"),
        (b'{"keys": 5}', "keys: Input should be a valid array"),
        (
            b'{"keys": ['
            + b", ".join([b'{"name": "a", "salt": "00", "digest": "' + b"d" * 64 + b'", "hint": "h"}'] * 2)
            + b"]}",
            "it names 'a' more than once",
        ),
    ],
)
def test_a_keys_file_that_is_not_one_says_why(tmp_path: Path, content: bytes, why: str) -> None:
    """Not UTF-8 had been an internal error (UnicodeDecodeError); a wrong shape named 'ValidationError'."""
    from llmdeck.gateway.keys import KeyStore

    path = tmp_path / "keys.json"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(ConfigError, match="is not a llmdeck keys file: " + why):
        KeyStore(path).load()


def test_gateway_down_stops_the_models_its_shutdown_did_not_get_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after its 10 s grace while a model took longer to stop (each gets 20 s), the gateway had
    left that engine running, recorded; `gateway down` now gives it 40 s, then stops what it recorded."""
    from llmdeck.gateway import lifecycle, service

    settings = Settings(state_dir=tmp_path / "state")
    record = service.GatewayRecord(
        pid=None,
        host="127.0.0.1",
        port=4000,
        config=tmp_path / "g.yaml",
        log_path=tmp_path / "g.log",
        managed=["a", "b"],
    )
    service.record_path(settings).parent.mkdir(parents=True)
    service.record_path(settings).write_text(record.model_dump_json())
    stopped: list[str] = []
    monkeypatch.setattr(lifecycle, "stop", lambda name, _settings: stopped.append(name) or "stopped")
    assert service.stop(settings) == "gone" and stopped == ["a", "b"]
    assert service.STOP_GRACE_S > 20 + 15  # the models stop in parallel (20 s each), then memory settles (15)
    assert not service.record_path(settings).exists()


def test_the_chmod_hint_runs_as_printed_on_a_path_with_a_space(tmp_path: Path) -> None:
    import shlex
    import subprocess

    store = KeyStore(tmp_path / "my keys's.json")
    store.create("alice")
    os.chmod(store.path, 0o644)
    with pytest.raises(ConfigError) as info:
        store.load()
    command = info.value.render().partition("`chmod")[2].partition("`")[0]
    subprocess.run(["chmod", *shlex.split(command)], check=True)  # the hint, as printed
    assert store.load().keys[0].name == "alice"


def test_a_server_backend_started_with_a_key_is_sent_its_key(tmp_path: Path) -> None:
    """`server: NAME` names a server llmdeck started with `-- --api-key K`: the gateway had sent no key
    (every request and health probe a 401) unless `api_key_env` named the key once more."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.gateway.config import parse_config
    from llmdeck.runtime.state import ServerRecord, StateStore
    from llmdeck.settings import Settings

    settings = Settings(state_dir=tmp_path / "state")
    store = StateStore(settings.servers_dir)
    spec = LaunchSpec(name="keyed", engine="cpu", model=str(tmp_path), port=18555)
    store.save(ServerRecord(name="keyed", spec=spec, argv=["x"], pid=None, log_path=tmp_path / "k.log"))
    store.save_secrets("keyed", {"VLLM_API_KEY": "sk-the-servers-own"})
    text = "routes:\n  - model: a\n    backends:\n      - server: keyed\n"
    loaded = parse_config(text, source=tmp_path / "gateway.yaml", settings=settings)
    assert loaded.routes[0].backends[0].api_key == "sk-the-servers-own"
