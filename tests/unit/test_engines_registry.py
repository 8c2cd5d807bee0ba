"""The engine abstraction (issue #39): one registered class per engine, asked what it is and can do;
no engine-name comparisons outside engines/; one detached spawn; one LaunchSpec -> plan mapping."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from llmdeck import engines
from llmdeck.engines.base import Engine
from llmdeck.engines.spec import EngineKind, LaunchSpec
from repo_paths import ROOT

SRC = ROOT / "src" / "llmdeck"
NAMES = "cpu|venv|docker"
# the measure, and the same comparison written the other way round or with `!=`
ENGINE_TESTS = re.compile(
    rf'engine (==|!=|in) |(==|!=) "({NAMES})"|"({NAMES})" (==|!=)|(engine|mode) not in [{{(\[]\s*"({NAMES})"'
)
# `llmdeck plan --engine docker|venv`: the option's choices, named as data
ALLOWED = {("cli/plan.py", 'if engine not in {"docker", "venv"}:')}


def _engine_tests() -> list[str]:
    hits = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("engines/"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ENGINE_TESTS.search(line) and (rel, line.strip()) not in ALLOWED:
                hits.append(f"{rel}:{n}: {line.strip()}")
    return hits


def test_no_engine_name_is_tested_outside_engines() -> None:
    """A new engine is one new class: code outside engines/ asks the engine object, never its name."""
    assert _engine_tests() == []


def test_the_detached_spawn_is_written_once() -> None:
    """Engines, the gateway, the guard and the local Ray cluster start detached through
    engines.process.spawn_detached; evals/ talks to its sandboxed processes through pipes, and the local
    all-reduce (cluster/netcheck.py), doctor's probe commands and the vLLM version probe of a venv
    (util/procgroup.py's run_in_group, for doctor/stack.py and preflight) and the `docker logs`
    that a stop saves (engines/docker/logrun.py) run in a group of their own so that a timeout ends every
    process of it. The docker client's commands (engines/docker/cli.py, runtime/attach.py's stop of an
    attached container) run in a session of their own so that a second Ctrl-C to the terminal's group
    does not kill the `docker stop` of a clean-up; the readiness tap's `docker logs -f`
    (engines/logtap.py) is in one too, so that its close can end its whole group even when an interrupt
    comes in the middle of it. util/leash.py's watcher is in a session of its own
    so that a signal to the command's group (timeout -s KILL, a closed terminal) does not end it before
    it stops the group it watches."""
    spawns = sorted(
        p.relative_to(SRC).as_posix()
        for p in SRC.rglob("*.py")
        if "start_new_session=True" in p.read_text(encoding="utf-8")
    )
    assert spawns == [
        "cluster/netcheck.py",
        "engines/docker/cli.py",
        "engines/docker/logrun.py",
        "engines/logtap.py",
        "engines/process.py",
        "evals/session.py",
        "evals/verifier.py",
        "runtime/attach.py",
        "util/leash.py",
        "util/procgroup.py",
    ]


def test_every_engine_of_the_spec_is_registered() -> None:
    assert sorted(engines.names()) == sorted(get_args(EngineKind))
    for name in engines.names():
        engine = engines.get(name)
        assert isinstance(engine, Engine) and engine.name == name


def test_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="no engine 'sglang'"):
        engines.get("sglang")


def test_what_each_engine_is() -> None:
    cpu, venv, docker = engines.get("cpu"), engines.get("venv"), engines.get("docker")
    assert cpu.runs_on_cpu and not cpu.can_sleep and cpu.needs_local_model and cpu.installed_with_llmdeck
    assert cpu.kv_budget_env == "VLLM_CPU_KVCACHE_SPACE" and cpu.measured_overhead_gib == 2.2
    assert not venv.runs_on_cpu and venv.can_sleep and not venv.containerized and venv.plans_as == "venv"
    assert docker.containerized and docker.plans_as == "docker" and docker.kv_budget_env is None


def test_a_new_engine_is_one_class(tmp_path: Path) -> None:
    """Registering a class is all it takes for `engines.get` to hand it out."""

    @Engine.register("test-llamacpp")
    class LlamaCpp(Engine):
        runs_on_cpu = True

        def argv(self, spec: LaunchSpec, *, secret_env: object = ()) -> list[str]:
            return ["llama-server", "-m", spec.model]

        def start(self, spec, *, log, env, secrets):  # type: ignore[no-untyped-def]
            return None, None

        def owner(self, handle):  # type: ignore[no-untyped-def]
            return "gone"

        def logs(self, handle):  # type: ignore[no-untyped-def]
            return ""

        def stop(self, handle, *, grace_s=20.0):  # type: ignore[no-untyped-def]
            return "gone"

    try:
        engine = engines.get("test-llamacpp")
        assert engine.runs_on_cpu and not engine.can_sleep
        assert engine.argv(LaunchSpec(model=str(tmp_path))) == ["llama-server", "-m", str(tmp_path)]
    finally:
        del Engine.registry["test-llamacpp"]


def test_engine_env_and_argv_come_from_the_engine(tmp_path: Path) -> None:
    from llmdeck.engines.argv import engine_env, local_argv

    spec = LaunchSpec(engine="cpu", model=str(tmp_path), env={"X": "1"})
    env = engine_env(spec, tmp_path)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["X"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_TARGET_DEVICE" not in engine_env(spec.model_copy(update={"engine": "venv"}), tmp_path)
    assert "--enforce-eager" in local_argv(spec)
    with pytest.raises(ValueError, match="does not run as a local process"):
        local_argv(spec.model_copy(update={"engine": "docker"}))


def test_the_cpu_engine_runs_the_model_in_the_engine_core_process(tmp_path: Path) -> None:
    """`uni` (one process fewer: 1.26x faster starts, benchmarks/cpu_executor_start.py), and the variable
    without which vllm-cpu turns it back into `mp`; an executor the spec picks is left alone."""
    from llmdeck.engines.argv import engine_env, local_argv

    spec = LaunchSpec(engine="cpu", model=str(tmp_path))
    argv = local_argv(spec)
    assert argv[argv.index("--distributed-executor-backend") + 1] == "uni"
    assert engine_env(spec, tmp_path)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    for given in (["--distributed-executor-backend", "mp"], ["--distributed-executor-backend=mp"]):
        own = spec.model_copy(update={"vllm_args": given})
        assert local_argv(own).count("uni") == 0 and local_argv(own)[-len(given) :] == given
        assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in engine_env(own, tmp_path)
    venv = spec.model_copy(update={"engine": "venv"})
    assert "--distributed-executor-backend" not in local_argv(venv)


def test_one_mapping_from_a_spec_to_a_plan_request(tmp_path: Path) -> None:
    from llmdeck.plan import request_for_spec

    docker = LaunchSpec(engine="docker", model="Qwen/Qwen3-0.6B", image="vllm/vllm-openai:v0.22.0")
    req = request_for_spec(docker, "h200", vllm_version="0.22.0")
    assert (req.engine, req.image, req.machine, req.vllm_version) == (
        "docker",
        "vllm/vllm-openai:v0.22.0",
        "h200",
        "0.22.0",
    )
    assert req.kv_cache_memory_gib is None
    cpu = LaunchSpec(engine="cpu", model="~/m", vllm_args=["--max-model-len", "4096"])
    req = request_for_spec(cpu)
    assert req.engine == "venv" and req.kv_cache_memory_gib == 1.0 and req.machine == "auto"
    assert req.model == str(Path("~/m").expanduser()) and req.vllm_args == ["--max-model-len", "4096"]
    sized = cpu.model_copy(update={"env": {"VLLM_CPU_KVCACHE_SPACE": "2"}})
    assert request_for_spec(sized).kv_cache_memory_gib == 2.0


def test_the_host_machine_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Preflight plans on the machine it reads (NVML), this machine's CPU profile when there is no GPU."""
    from llmdeck.errors import PlanError
    from llmdeck.plan import machine

    def no_gpu(name: str, *, total_gib: float | None = None) -> machine.MachineProfile:
        raise PlanError("no GPU")

    monkeypatch.setattr(machine, "get_machine", no_gpu)
    assert machine.host_machine().name == machine.CPU_MACHINE
    monkeypatch.setattr(machine, "get_machine", lambda name, total_gib=None: machine.h200())
    assert machine.host_machine().name == "h200"


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        (["--served-model-name", "tiny;x $(id)"], "served_model_name", "tiny;x $(id)"),
        (["--port=9999"], "port", 9999),
        (["--host", "0.0.0.0"], "host", "0.0.0.0"),
    ],
)
def test_up_takes_its_own_flags_after_the_double_dash_into_the_spec(
    extra: list[str], field: str, value: object
) -> None:
    # `up --model DIR -- --served-model-name X` had served X while the record (and `connect`, the
    # gateway) kept the folder's name: vLLM obeys the last of the two flags
    from llmdeck.engines.argv import cpu_argv
    from llmdeck.engines.spec import build_spec

    overrides = {"model": "/m/tiny", "served_model_name": None, "port": None, "host": None}
    spec = build_spec(None, overrides=overrides, extra_args=[*extra, "--max-num-seqs", "4"], defaults={})
    assert getattr(spec, field) == value
    assert spec.vllm_args == ["--max-num-seqs", "4"]
    flag = extra[0].partition("=")[0]
    assert cpu_argv(spec).count(flag) == 1


def test_up_refuses_its_own_flag_given_twice_with_two_values() -> None:
    from llmdeck.engines.spec import build_spec
    from llmdeck.errors import UsageError

    with pytest.raises(UsageError, match="--port is given twice"):
        build_spec(None, overrides={"model": "/m", "port": 8000}, extra_args=["--port", "9000"], defaults={})


def test_up_refuses_several_served_names_after_the_double_dash() -> None:
    """vLLM takes `--served-model-name A B`; folded into the spec's one name, B had been left behind as a
    stray positional argument for vLLM to refuse at start."""
    from llmdeck.engines.spec import build_spec
    from llmdeck.errors import UsageError

    with pytest.raises(UsageError, match="several values"):
        build_spec(None, overrides={"model": "/m"}, extra_args=["--served-model-name", "a", "b"], defaults={})
