"""The memory budget and the model manager's lifecycle, without an engine (issue 21).

The budget's decisions are pure functions (tested directly); the manager is driven with its blocking
steps (``gateway.lifecycle``) replaced by fakes that record what they were asked to do — named
``fake_*``. The real engine runs in tests/integration/test_gateway_models_integration.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import ConfigError
from llmdeck.gateway.budget import GIB, Tenant, capacity_bytes, decide
from llmdeck.gateway.config import parse_config
from llmdeck.gateway.managed import Footprint
from llmdeck.settings import Settings

# ---- the budget's decision --------------------------------------------------------------------


def test_fits_without_evicting() -> None:
    d = decide("b", 3 * GIB, 10 * GIB, [Tenant("a", 4 * GIB)])
    assert d.fits and d.evict == [] and d.free_after == 3 * GIB


def test_evicts_least_recently_used_idle_first() -> None:
    tenants = [
        Tenant("old", 3 * GIB, last_used=100.0),
        Tenant("new", 3 * GIB, last_used=200.0),
        Tenant("busy-oldest", 3 * GIB, busy=True, last_used=1.0),
    ]
    d = decide("x", 6 * GIB, 10 * GIB, tenants)
    assert d.fits and [t.name for t in d.evict] == ["old", "new"]
    assert [t.name for t in decide("x", 4 * GIB, 10 * GIB, tenants).evict] == ["old"]  # no more than needed


def test_an_ollama_keep_alive_orders_eviction_as_ollama_does() -> None:
    """Ollama's scheduler unloads the shortest keep_alive first and a negative one last
    (findRunnerToUnload); models no Ollama client gave one go first, least recently used first."""
    inf = float("inf")
    tenants = [
        Tenant("pinned", 2 * GIB, last_used=1.0, keep_s=inf),  # keep_alive -1, the least recently used
        Tenant("hour", 2 * GIB, last_used=2.0, keep_s=3600.0),
        Tenant("minute", 2 * GIB, last_used=900.0, keep_s=60.0),
        Tenant("plain", 2 * GIB, last_used=950.0),
        Tenant("busy", 2 * GIB, busy=True, last_used=3.0),
    ]
    d = decide("x", 10 * GIB, 10 * GIB, tenants)
    assert [t.name for t in d.evict] == ["plain", "minute", "hour", "pinned", "busy"]
    assert [t.name for t in decide("x", 4 * GIB, 10 * GIB, tenants).evict] == ["plain", "minute"]


def test_busy_models_go_after_idle_ones_and_ollama_after_ours() -> None:
    tenants = [
        Tenant("ollama:llama3", 2 * GIB, kind="ollama"),
        Tenant("busy", 2 * GIB, busy=True, last_used=1.0),
        Tenant("idle", 2 * GIB, last_used=500.0),
    ]
    d = decide("x", 8 * GIB, 8 * GIB, tenants)
    assert [t.name for t in d.evict] == ["idle", "ollama:llama3", "busy"]


def test_keep_group_and_ollama_without_permission_are_never_evicted() -> None:
    tenants = [
        Tenant("coder", 5 * GIB, blocked="keep: true"),
        Tenant("ollama:qwen", 2 * GIB, kind="ollama", blocked="Ollama's; budget.allow_unload_ollama is off"),
        Tenant("chat", 2 * GIB),
    ]
    d = decide("big", 4 * GIB, 10 * GIB, tenants)
    assert not d.fits and d.evict == []
    assert "coder (5.00 GiB, keep: true)" in d.reason
    assert "ollama:qwen (2.00 GiB, Ollama's; budget.allow_unload_ollama is off)" in d.reason
    assert "only 3.00 GiB can be freed" in d.reason


def test_a_resident_model_makes_the_start_wait_not_fail() -> None:
    tenants = [Tenant("a", 3 * GIB, busy=True, resident_s=12.0), Tenant("c", 1 * GIB, last_used=5.0)]
    d = decide("b", 4 * GIB, 5 * GIB, tenants)
    assert not d.fits and d.evict == [] and d.wait_s == 12.0
    assert "a (3.00 GiB, 12 s more)" in d.reason and "min_resident_s" in d.reason
    # room without the resident one: the others go, the resident stays
    assert [t.name for t in decide("b", 2 * GIB, 5 * GIB, tenants).evict] == ["c"]
    # a resident that is also blocked (keep) is a refusal, not a wait
    kept = [Tenant("a", 3 * GIB, resident_s=12.0, blocked="keep: true")]
    refused = decide("b", 4 * GIB, 5 * GIB, kept)
    assert not refused.fits and refused.wait_s == 0 and "keep: true" in refused.reason


def test_a_model_larger_than_the_whole_budget() -> None:
    d = decide("huge", 66 * GIB, 5 * GIB, [])
    assert not d.fits and "whole budget is 5.00 GiB" in d.reason


def test_capacity_fixed_or_auto() -> None:
    tenants = [Tenant("a", 3 * GIB)]
    assert capacity_bytes(5.0, None, 0, tenants) == 5 * GIB
    # auto: free now (MemAvailable) less the reserve, plus what the tenants hold and would give back
    assert capacity_bytes(None, 10 * GIB, 2 * GIB, tenants) == 11 * GIB
    assert capacity_bytes(None, 1 * GIB, 2 * GIB, []) == 0
    assert capacity_bytes(None, None, 0, tenants) is None


def test_sleeping_estimate_by_level_and_memory_kind() -> None:
    fp = Footprint(10 * GIB, "plan", weights=6 * GIB, kv=3 * GIB)
    assert fp.sleeping(1, "gpu") == 1 * GIB  # weights to host memory, KV dropped: the rest stays
    assert fp.sleeping(1, "unified") == 7 * GIB  # on unified memory the "host" is the same pool
    assert fp.sleeping(2, "unified") == 1 * GIB


# ---- the config -------------------------------------------------------------------------------


def _spec_file(path: Path, name: str, port: int, engine: str = "cpu", **kw: Any) -> Path:
    spec = LaunchSpec(name=name, engine=engine, model=str(path.parent / "m"), port=port, **kw)  # type: ignore[arg-type]
    path.write_text(spec.model_dump_json(), encoding="utf-8")
    return path


def _parse(tmp_path: Path, text: str) -> Any:
    return parse_config(text, source=tmp_path / "gw.yaml", settings=Settings(state_dir=tmp_path / "st"))


def test_spec_backend_resolves_with_its_footprint(tmp_path: Path) -> None:
    _spec_file(tmp_path / "a.json", "a", 8101, env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    loaded = _parse(
        tmp_path,
        "routes:\n  - model: a\n    backends: [{spec: a.json, ttl_s: 60, keep: true, group: g}]\n"
        "budget: {memory_gib: 8, allow_unload_ollama: true}\n",
    )
    backend = loaded.routes[0].backends[0]
    assert backend.url == "http://127.0.0.1:8101" and backend.managed.keep and backend.managed.ttl_s == 60
    assert backend.managed.planned.bytes == pytest.approx(4.2 * GIB, rel=0.01)  # 2 GiB KV + 2.2 processes
    assert "KV space 2" in backend.managed.planned.how
    assert loaded.config.budget.memory_gib == 8 and loaded.config.budget.allow_unload_ollama


@pytest.mark.parametrize(
    ("backends", "line", "words"),
    [
        ("[{spec: missing.json}]", 3, "does not exist"),
        ("[{spec: a.json, url: 'http://127.0.0.1:1'}]", 3, "exactly one of"),
        ("[{spec: a.json, sleep_level: 1}]", 3, "CPU engine does not have"),
        ("[{url: 'http://127.0.0.1:9', ttl_s: 5}]", 3, "applies to a `spec:` backend"),
        ("[{spec: a.json}, 'http://127.0.0.1:9']", 3, "mixes `spec:` backends"),
        ("[{spec: a.json}, {spec: a2.json}]", 3, "server name 'a' is also"),
        ("[{spec: a.json, sleep_level: 3}]", 3, "sleep_level"),
    ],
)
def test_config_errors_name_the_line(tmp_path: Path, backends: str, line: int, words: str) -> None:
    _spec_file(tmp_path / "a.json", "a", 8101)
    _spec_file(tmp_path / "a2.json", "a", 8102)
    text = f"routes:\n  - model: a\n    backends: {backends}\n"
    with pytest.raises(ConfigError) as err:
        _parse(tmp_path, text)
    assert f"gw.yaml:{line}" in err.value.message and words in err.value.message, err.value.message


def test_budget_errors_name_the_line(tmp_path: Path) -> None:
    _spec_file(tmp_path / "a.json", "a", 8101)
    text = "routes:\n  - {model: a, backends: [{spec: a.json}]}\nbudget:\n  memory_gib: -1\n"
    with pytest.raises(ConfigError) as err:
        _parse(tmp_path, text)
    assert "gw.yaml:4" in err.value.message and "budget.memory_gib" in err.value.message


def test_two_specs_on_one_port(tmp_path: Path) -> None:
    _spec_file(tmp_path / "a.json", "a", 8101)
    _spec_file(tmp_path / "b.json", "b", 8101)
    text = "routes:\n  - {model: a, backends: [{spec: a.json}]}\n  - {model: b, backends: [{spec: b.json}]}\n"
    with pytest.raises(ConfigError, match="port 8101 is also"):
        _parse(tmp_path, text)


def test_a_gpu_spec_that_cannot_be_planned_asks_for_memory_gib(tmp_path: Path) -> None:
    _spec_file(tmp_path / "g.json", "g", 8101, engine="venv")  # no NVML here, and no model folder
    with pytest.raises(ConfigError) as err:
        _parse(tmp_path, "routes:\n  - model: g\n    backends: [{spec: g.json}]\n")
    assert "gw.yaml:3" in err.value.message and "cannot estimate the memory of 'g'" in err.value.message
    assert "memory_gib: N" in (err.value.hint or "")
    loaded = _parse(tmp_path, "routes:\n  - model: g\n    backends: [{spec: g.json, memory_gib: 20}]\n")
    assert loaded.routes[0].backends[0].managed.planned.how == "declared (memory_gib)"


def test_budget_kind_auto_follows_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llmdeck.runtime import host

    _spec_file(tmp_path / "a.json", "a", 8101)
    text = "routes:\n  - model: a\n    backends: [{spec: a.json}]\n"
    h200 = host.NvmlReport(
        available=True, gpus=[host.GpuInfo(index=0, name="NVIDIA H200", total_bytes=150 << 30)]
    )
    gb10 = host.NvmlReport(
        available=True, gpus=[host.GpuInfo(index=0, name="NVIDIA GB10")], memory_not_supported=True
    )
    for report, kind in ((h200, "gpu"), (gb10, "unified"), (host.NvmlReport(available=False), "unified")):
        monkeypatch.setattr(host, "nvml_snapshot", lambda r=report: r)
        assert _parse(tmp_path, text).config.budget.kind == kind


def test_a_spec_backends_api_key_reaches_the_server_and_the_gateway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _spec_file(tmp_path / "a.json", "a", 8101)
    monkeypatch.setenv("CODER_KEY", "sk-local-123")
    loaded = _parse(
        tmp_path, "routes:\n  - model: a\n    backends: [{spec: a.json, api_key_env: CODER_KEY}]\n"
    )
    backend = loaded.routes[0].backends[0]
    assert backend.api_key == "sk-local-123" and backend.managed.spec.env["VLLM_API_KEY"] == "sk-local-123"
    monkeypatch.delenv("CODER_KEY")
    with pytest.raises(ConfigError, match="CODER_KEY"):
        _parse(tmp_path, "routes:\n  - model: a\n    backends: [{spec: a.json, api_key_env: CODER_KEY}]\n")


def test_the_models_table(capsys: pytest.CaptureFixture[str]) -> None:
    from llmdeck.cli.gateway import _print_models

    def entry(name: str, state: str, **kw: Any) -> dict[str, Any]:
        base = {"model": name, "state": state, "planned_gib": 3.274, "measured_gib": None, "idle_s": None}
        return {**base, "in_flight": 0, "queue": 0, "keep": False, **kw}

    data = {
        "budget": {"memory_gib": 5.0, "kind": "unified", "reserve_gib": 2.0, "held_gib": 3.29},
        "models": [
            entry("coder", "running", measured_gib=3.29, idle_s=4, keep=True),
            entry("chat", "starting", queue=2, progress="engine initialising (+15.1 s)"),
            entry("broken", "failed", last_error="Model 'broken' failed to start: … --no-such-flag"),
        ],
    }
    _print_models(data)
    out = capsys.readouterr().out
    assert "budget 5.0 GiB (unified memory, reserve 2.0 GiB; held 3.29 GiB)" in out
    assert any(
        "coder" in ln and "running" in ln and "3.29" in ln and "4 s ago" in ln for ln in out.splitlines()
    )
    assert any("chat" in ln and "starting" in ln and "never" in ln for ln in out.splitlines())
    assert "chat: engine initialising (+15.1 s)" in out and "coder: keep" in out and "--no-such-flag" in out


def test_one_spec_may_serve_two_aliases(tmp_path: Path) -> None:
    _spec_file(tmp_path / "a.json", "a", 8101)
    text = (
        "routes:\n  - {model: fast, backends: [{spec: a.json}], defaults: {max_tokens: 64}}\n"
        "  - {model: think, backends: [{spec: a.json}]}\n"
    )
    loaded = _parse(tmp_path, text)
    from llmdeck.gateway.manager import ModelManager

    assert len(ModelManager(loaded, Settings(state_dir=tmp_path / "st")).models) == 1  # one server
    with pytest.raises(ConfigError, match="with other settings"):
        _parse(
            tmp_path,
            text.replace("{spec: a.json}]}\n", "{spec: a.json, keep: true}]}\n", 1).replace(
                "[{spec: a.json}], defaults", "[{spec: a.json, ttl_s: 5}], defaults"
            ),
        )


def test_status_json_adds_the_gateways_models_only_while_it_has_some(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`llmdeck status --json`: the list as before with no gateway (or none with models on demand);
    an object {servers, gateway} while one runs models. The gateway's service answer is stubbed here
    (the real gateway's is in tests/integration/test_gateway_models_integration.py)."""
    import json

    from cli_helpers import run_cli
    from llmdeck.gateway import service

    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    code, out, _ = run_cli(["status", "--json"], capsys)
    assert code == 0 and json.loads(out) == []  # no gateway: unchanged
    monkeypatch.setattr(service, "load_record", lambda settings: object())
    answer: dict[str, Any] = {"state": "running", "url": "http://127.0.0.1:4000", "routes": []}
    monkeypatch.setattr(service, "status", lambda settings: answer)
    code, out, _ = run_cli(["status", "--json"], capsys)
    assert code == 0 and json.loads(out) == []  # a gateway without models on demand: unchanged
    model = {"model": "coder", "state": "sleeping", "held_gib": 0.5, "last_used": 1.0, "queue": 0}
    answer.update(budget={"memory_gib": 5.0, "kind": "unified", "held_gib": 0.5}, models=[model])
    code, out, _ = run_cli(["status", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["servers"] == []
    assert data["gateway"] == {
        "state": "running",
        "url": "http://127.0.0.1:4000",
        "budget": answer["budget"],
        "models": [model],
    }
    code, out, _ = run_cli(["status", "--json", "nosuch"], capsys)  # one server asked for: no gateway
    assert "gateway" not in out
