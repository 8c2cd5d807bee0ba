"""`llmdeck restart NAME -- FLAGS`: the hints that say "restart the server with --max-model-len N"
(connect, check, bench, eval) had no command that did it — `restart` took no vLLM flags and started the
recorded spec as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import UsageError
from llmdeck.plan.changes import changed_spec

ARGS = ["--max-model-len", "4096", "--enable-prefix-caching", "--max-num-seqs=8", "--kv-cache-dtype", "fp8"]
BASE = LaunchSpec(model="/m", engine="cpu", vllm_args=ARGS)


@pytest.mark.parametrize(
    ("changes", "dropped"),
    [
        (["--max-model-len", "32768"], ["--max-model-len", "4096"]),
        (["--no-enable-prefix-caching"], ["--enable-prefix-caching"]),
        (["--max-num-seqs", "16"], ["--max-num-seqs=8"]),
    ],
)
def test_a_change_replaces_the_same_flag_in_any_spelling(changes: list[str], dropped: list[str]) -> None:
    kept = [a for a in ARGS if a not in dropped]
    assert changed_spec(BASE, changes).vllm_args == [*kept, *changes]


def test_the_specs_own_flags_set_its_fields_and_a_new_key_replaces_the_old() -> None:
    spec = BASE.model_copy(update={"env": {"VLLM_API_KEY": "oldkey111", "X": "1"}})
    new = changed_spec(spec, ["--port", "9001", "--served-model-name", "coder", "--api-key", "newkey222"])
    assert (new.port, new.served_model_name) == (9001, "coder")
    assert new.env == {"X": "1"} and new.vllm_args[-2:] == ["--api-key", "newkey222"]


def test_a_bad_change_is_refused_naming_it() -> None:
    with pytest.raises(UsageError, match="--port"):
        changed_spec(BASE, ["--port", "70000"])
    with pytest.raises(UsageError, match="max-model-len"):
        changed_spec(BASE, ["--max-model-len"])


def _loading_engine(tmp: Path) -> Path:
    """fake_loading_engine: stands in for the venv's python; never becomes ready (nothing listens)."""
    path = tmp / "fake_loading_engine.sh"
    path.write_text("#!/bin/sh\necho 'fake engine: loading weights'\nexec sleep 300\n")
    path.chmod(0o755)
    return path


def test_restart_starts_the_changed_flags_and_refuses_a_bad_one_before_stopping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmdeck.errors import StartStopped
    from llmdeck.runtime import service
    from llmdeck.runtime.engine_state import is_alive
    from llmdeck.runtime.state import StateStore
    from llmdeck.settings import Settings
    from llmdeck.util.net import free_port
    from security_helpers import fake_model_dir

    monkeypatch.setattr(service, "wait_memory_settles", lambda: 0)
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    engine, model = str(_loading_engine(tmp_path)), str(fake_model_dir(tmp_path))
    spec = LaunchSpec(
        name="r", engine="venv", python=engine, model=model, port=free_port(), vllm_args=ARGS[:2]
    )
    first = service.start(spec, settings, service.UpOptions.bare())
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(settings.state_dir))
    code, _, err = run_cli(["restart", "r", "--", "--max-model-len"], capsys)
    assert code == 2 and "max-model-len" in err
    assert is_alive(StateStore(settings.servers_dir).load("r"))  # refused before the stop
    options = service.RestartOptions(
        **service.UpOptions.bare().model_dump(exclude={"watchdog"}), watchdog=None
    )
    asked: list[int] = []
    options.stop_when = lambda: bool(asked.append(1)) or len(asked) > 1  # once launched
    with pytest.raises(StartStopped):
        service.restart("r", settings, options, changes=["--max-model-len", "32768"])
    header = (settings.logs_dir / "r.log").read_text().splitlines()[0]
    assert header.endswith("--max-model-len 32768") and "4096" not in header
    assert not is_alive(first)


def test_a_restart_on_unified_memory_sizes_the_kv_cache_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first start sized the KV cache from live memory and recorded the spec with the flag it added
    (--kv-cache-memory-bytes); a restart took that flag as the user's own: no new sizing from live
    memory, and a refusal ("asks for N GiB") once less was free than at the first start."""
    from llmdeck.errors import StartStopped
    from llmdeck.runtime import service
    from llmdeck.settings import Settings
    from llmdeck.util.net import free_port
    from security_helpers import fake_model_dir

    monkeypatch.setattr(service, "wait_memory_settles", lambda: 0)
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    engine, model = str(_loading_engine(tmp_path)), str(fake_model_dir(tmp_path))
    spec = LaunchSpec(
        name="u", engine="cpu", python=engine, model=model, port=free_port(), vllm_args=ARGS[:2]
    )
    options = service.UpOptions(preflight=False, watchdog=None)  # sized by bytes: the CPU engine is unified
    first = service.start(spec, settings, options)
    assert "--kv-cache-memory-bytes" in first.spec.vllm_args
    assert first.sized_from is not None and first.sized_from.vllm_args == ARGS[:2]
    sizings: list[str] = []
    events = lambda e: sizings.append(e.data["sizing"]["requested_how"]) if "sizing" in e.data else None  # noqa: E731
    restart = service.RestartOptions(preflight=False, watchdog=None)
    asked: list[int] = []
    restart.stop_when = lambda: bool(asked.append(1)) or len(asked) > 1  # once launched
    with pytest.raises(StartStopped):
        service.restart("u", settings, restart, events=events)
    assert sizings == ["the CPU engine's KV space (1 GiB)"], sizings


def test_a_restarted_gateway_server_stays_the_gateways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`llmdeck restart NAME` of a server the gateway had started recorded the new start as `up`'s:
    `gateway down` (which stops only its own) left it running, and the budget took it for a user's."""
    from llmdeck.errors import StartStopped
    from llmdeck.runtime import service
    from llmdeck.runtime.state import StateStore
    from llmdeck.settings import Settings
    from llmdeck.util.net import free_port
    from security_helpers import fake_model_dir

    monkeypatch.setattr(service, "wait_memory_settles", lambda: 0)
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    engine, model = str(_loading_engine(tmp_path)), str(fake_model_dir(tmp_path))
    spec = LaunchSpec(name="g", engine="venv", python=engine, model=model, port=free_port())
    first = service.start(spec, settings, service.UpOptions.bare(started_by="gateway"))
    store = StateStore(settings.servers_dir)
    seen: list[str] = []

    def once_launched() -> bool:  # asked before the launch, then at each readiness poll
        seen.append(store.load("g").started_by if store.path("g").exists() else "none")
        return len(seen) > 1

    options = service.RestartOptions(preflight=False, size_by_bytes=False, watchdog=None)
    options.stop_when = once_launched
    with pytest.raises(StartStopped):
        service.restart("g", settings, options)
    assert first.started_by == "gateway"
    assert seen[0] == "none" and seen[-1] == "gateway"  # the new start's record, saved before readiness
