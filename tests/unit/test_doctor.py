"""`llmdeck doctor`: each finding's pass and fail paths, on real inputs (meminfo text, docker output,
a bound socket, Ollama's documented /api/ps payload), and the command's exit codes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.doctor import env as env_probes
from llmdeck.doctor import host, stack
from llmdeck.runtime import host as host_facts
from llmdeck.runtime.preflight import parse_meminfo
from llmdeck.runtime.tenants import GpuInfo, InferenceProcess, NvmlReport, OllamaModel, OllamaStatus
from repo_paths import TEST_FIXTURES

DOCKER_FIXTURES = TEST_FIXTURES / "docker"
GIB = 1024**3
MEMINFO = """MemTotal:       24576000 kB
MemFree:         1048576 kB
MemAvailable:   20971520 kB
Buffers:          102400 kB
Cached:         16777216 kB
SwapTotal:       8388608 kB
SwapFree:        4194304 kB
"""


def _ids(findings: list) -> list[str]:  # type: ignore[type-arg]
    return [f.id for f in findings]


def test_os_linux_ok_and_other_fails() -> None:
    assert host.probe_os("aarch64", "Linux")[0].status == "ok"
    assert "aarch64" in host.probe_os("aarch64", "Linux")[0].message
    f = host.probe_os("arm64", "Darwin")[0]
    assert (f.id, f.status) == ("os-not-linux", "fail") and "Linux" in f.fix


def test_memory_page_cache_and_swap_warn() -> None:
    mem = parse_meminfo(MEMINFO)
    found = host.probe_memory(mem, psi_avg10=25.0)
    assert _ids(found) == ["memory", "memory-page-cache", "memory-swapping", "memory-pressure"]
    assert "drop_caches" in found[1].fix
    calm = parse_meminfo(
        MEMINFO.replace("Cached:         16777216", "Cached:          1048576").replace(
            "SwapFree:        4194304", "SwapFree:        8388608"
        )
    )
    assert _ids(host.probe_memory(calm, psi_avg10=0.0)) == ["memory"]


def test_psi_parsed_from_kernel_text(tmp_path: Path) -> None:
    p = tmp_path / "memory"
    p.write_text(
        "some avg10=12.50 avg60=3.00 avg300=1.00 total=100\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert host_facts.read_psi_avg10(p) == 12.5
    assert host_facts.read_psi_avg10(tmp_path / "absent") is None


def test_disk_levels_and_one_finding_per_filesystem(tmp_path: Path) -> None:
    paths = {"LLMDECK_MODELS_DIR": tmp_path / "models" / "not-yet", "HF_HOME": tmp_path}
    found = host.probe_disk(paths, free_bytes=5 * GIB)
    assert len(found) == 1 and found[0].status == "fail" and "LLMDECK_MODELS_DIR and HF_HOME" in found[0].fix
    assert host.probe_disk(paths, free_bytes=50 * GIB)[0].status == "warn"
    assert host.probe_disk(paths, free_bytes=500 * GIB)[0].status == "ok"


def test_port_in_use_warns() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert host.probe_port("127.0.0.1", port)[0].id == "port-in-use"
    assert host.probe_port("127.0.0.1", port)[0].status == "ok"


def test_ollama_loaded_models_warn_with_unload_command() -> None:
    status = OllamaStatus(
        url="http://127.0.0.1:11434",
        reachable=True,
        models=[OllamaModel(name="gemma3", size=20 * GIB)],
    )
    f = host.probe_ollama(status)[0]
    assert f.status == "warn" and "20.0 GiB" in f.message and "keep_alive" in f.fix
    assert host.probe_ollama(OllamaStatus(url="x", reachable=False))[0].status == "ok"


def test_other_servers_warn() -> None:
    procs = [InferenceProcess(pid=4242, kind="vllm", port=8001)]
    f = host.probe_servers(procs)[0]
    assert f.status == "warn" and "vllm pid 4242 port 8001" in f.message
    assert host.probe_servers([])[0].status == "ok"


def test_gpu_absent_warns_and_gb10_called_out() -> None:
    none = stack.probe_gpu(NvmlReport(available=False, reason="no driver"), {}, has_nvidia_smi=False)
    assert _ids(none) == ["gpu-none"] and "CPU engine" in none[0].fix
    gb10 = NvmlReport(available=True, gpus=[GpuInfo(index=0, name="NVIDIA GB10")], memory_not_supported=True)
    found = stack.probe_gpu(gb10, {"driver": "580.95.05", "cuda": "13.0"}, has_nvidia_smi=True)
    assert _ids(found) == ["gpu-0", "gpu-unified-memory", "cuda"]
    assert "MemAvailable" in found[1].message and "0.85" in found[1].fix
    assert _ids(stack.probe_gpu(gb10, {}, has_nvidia_smi=True))[-1] == "cuda-unknown"


def test_docker_absent_and_no_daemon_from_real_output() -> None:
    assert _ids(stack.probe_docker(which=lambda _: None)) == ["docker-absent"]
    stderr = (DOCKER_FIXTURES / "docker-ps-no-daemon.stderr").read_text()
    rc = int((DOCKER_FIXTURES / "docker-ps-no-daemon.rc").read_text().strip())

    def no_daemon(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, rc, "", stderr)

    f = stack.probe_docker(no_daemon, which=lambda _: "/usr/bin/docker")[0]
    assert f.id == "docker-no-daemon" and "Cannot connect to the Docker daemon" in f.message


def test_docker_runtime_check() -> None:
    def info(runtimes: str):  # type: ignore[no-untyped-def]
        return lambda argv: subprocess.CompletedProcess(argv, 0, f"{runtimes}|27.3.1\n", "")

    plain = '{"io.containerd.runc.v2":{"path":"runc"},"runc":{"path":"runc"}}'
    with_nv = '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}'
    assert stack.probe_docker(info(plain), which=lambda _: "docker")[0].id == "docker-no-nvidia-runtime"
    assert stack.probe_docker(info(with_nv), which=lambda _: "docker")[0].status == "ok"


def test_containers_llmdeck_started_but_no_record_knows_are_named(tmp_path: Path) -> None:
    """The state dir removed (or another LLMDECK_STATE_DIR): llmdeck's containers were invisible to
    `status` and `down`, one holding GPU memory or the name the next `up` needs."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.runtime.state import ServerRecord, StateStore

    ps = (DOCKER_FIXTURES / "docker-ps-format-json.jsonl").read_text()
    with_nv = '{"nvidia":{"path":"nvidia-container-runtime"}}|28.2.2\n'

    def docker(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, ps if argv[1] == "ps" else with_nv, "")

    store = StateStore(tmp_path / "servers")
    spec = LaunchSpec(name="qwen", engine="docker", model="/models/qwen3-0.6b", port=8000)
    store.save(ServerRecord(name="qwen", spec=spec, argv=["docker"], pid=None, log_path=tmp_path / "q.log"))
    found = stack.probe_docker(docker, which=lambda _: "docker", servers_dir=tmp_path / "servers")
    unknown = [f for f in found if f.id == "docker-unrecorded"]
    assert found[0].status == "ok" and [f.data["server"] for f in unknown] == ["hybrid"]
    assert "llmdeck-hybrid" in unknown[0].message and "`docker rm -f llmdeck-hybrid`" in unknown[0].fix


def test_docker_on_this_machine_is_bounded_and_answers() -> None:
    found = stack.probe_docker()
    assert found and found[0].area == "docker"


def test_vllm_versions_against_catalog() -> None:
    old = stack.probe_vllm("0.11.0", "", where="image nvcr.io/nvidia/vllm:25.11-py3")[0]
    assert old.id == "vllm-too-old" and "Qwen3_5MoeForConditionalGeneration" in old.message
    assert stack.probe_vllm("0.22.0", "", where="x")[0].status == "ok"
    absent = stack.probe_vllm(None, "No module named 'vllm'", where="the Python /usr/bin/python3")[0]
    assert absent.id == "vllm-absent" and "--python" in absent.fix


def test_a_venv_whose_transformers_breaks_granite_is_named() -> None:
    """vLLM 0.22.0 under transformers >= 5.13 died on the H200 with KeyError: 'linear_attention'
    (evidence/plan/families/results-round2 rows 14-15); only Granite 4.0 models are affected."""
    (warn,) = stack.probe_transformers("0.22.0", "5.19.0", where="the Python /venv/bin/python")
    assert warn.status == "warn" and "KeyError: 'linear_attention'" in warn.message and "<5.13" in warn.fix
    assert stack.probe_transformers("0.22.0", "5.12.1", where="x") == []
    assert stack.probe_transformers("0.26.0", "5.19.0", where="x") == []
    assert stack.probe_transformers("0.22.0", None, where="x") == []


def test_hf_variables_token_hidden_and_bad_endpoint_fails() -> None:
    env = {"HF_TOKEN": "hf_secret_value", "HF_ENDPOINT": "hf-mirror.com", "HF_HUB_OFFLINE": "1"}
    found = env_probes.probe_hf(env)
    assert _ids(found) == ["hf", "hf-endpoint-invalid", "hf-offline"]
    assert "hf_secret_value" not in json.dumps([f.model_dump() for f in found])
    assert found[1].status == "fail"
    transfer = env_probes.probe_hf({"HF_HUB_ENABLE_HF_TRANSFER": "1"}, has_hf_transfer=False)
    assert _ids(transfer) == ["hf", "hf-transfer-missing"]
    assert _ids(env_probes.probe_hf({"HF_ENDPOINT": "https://hf-mirror.com"})) == ["hf"]


def test_proxies_without_no_proxy_warn_and_password_hidden() -> None:
    env = {"HTTPS_PROXY": "http://me:pa55word@proxy.corp:3128"}
    f = env_probes.probe_proxies(env)[0]
    assert f.id == "proxy-local-not-excluded" and "pa55word" not in f.model_dump_json()
    assert "me:<redacted>@proxy.corp:3128" in f.message
    ok = env_probes.probe_proxies(env | {"NO_PROXY": "localhost,127.0.0.1,::1"})[0]
    assert ok.status == "ok"
    assert env_probes.probe_proxies({})[0].id == "proxy"


def _doctor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmdeck", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_cli_json_report_and_exit_codes(tmp_path: Path) -> None:
    env = {"LLMDECK_STATE_DIR": str(tmp_path / "state"), "HF_ENDPOINT": "https://hf-mirror.com"}
    proc = _doctor(env, "--json")
    report = json.loads(proc.stdout)
    assert report["schema_version"] == 1 and report["host"]["cpu_count"]
    areas = {f["area"] for f in report["findings"]}
    assert {"os", "gpu", "docker", "vllm", "hf", "proxy", "disk", "memory", "tenants", "ports"} <= areas
    assert proc.returncode == (1 if any(f["status"] == "fail" for f in report["findings"]) else 0)
    bad = _doctor(env | {"HF_ENDPOINT": "not-a-url"})
    assert bad.returncode == 1 and "FAIL" in bad.stdout and "HF_ENDPOINT" in bad.stdout
    assert "Traceback" not in bad.stderr


@pytest.mark.parametrize("value", ["0", "70000"])
def test_cli_bad_port_is_usage_error(value: str) -> None:
    proc = _doctor({}, "--port", value)
    assert proc.returncode == 2 and "--port" in proc.stderr


def test_an_image_tag_without_a_version_is_unknown_not_absent() -> None:
    f = stack.probe_unknown_version("image vllm/vllm-openai:latest")[0]
    assert f.id == "vllm-version-unknown" and "v0.22.0" in f.fix


def test_cli_python_that_does_not_exist_is_usage_error(tmp_path: Path) -> None:
    proc = _doctor({}, "--python", str(tmp_path / "no-python"))
    assert proc.returncode == 2 and "--python" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_python_that_is_a_folder_is_usage_error(tmp_path: Path) -> None:
    """A folder passes os.access(X_OK): it had given a warning and exit 0."""
    proc = _doctor({}, "--python", str(tmp_path))
    assert proc.returncode == 2 and "is not an executable file" in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("HTTPS_PROXY", "me:pa55word@proxy.corp:3128", "pa55word"),  # no scheme: curl takes it so
        ("HTTPS_PROXY", "http://proxy.corp:3128/?api_key=sk-abcdefabcdefabcdef12", "sk-abcdef"),
        ("HF_ENDPOINT", "https://mirror.example/?token=abc123secret", "abc123secret"),
        ("HF_ENDPOINT", "mirror.example/?token=abc123secret", "abc123secret"),
    ],
)
def test_secrets_in_proxy_and_endpoint_variables_are_hidden_in_text_and_json(
    tmp_path: Path, name: str, value: str, secret: str
) -> None:
    env = {"LLMDECK_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "300", name: value}
    for args in ((), ("--json",)):
        proc = _doctor(env, *args)
        assert name in proc.stdout and secret not in proc.stdout + proc.stderr, proc.stdout


def test_a_fix_is_printed_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix line is printed without markup: escaping it too had shown `llmdeck\\[gpu]`."""
    from llmdeck.doctor.model import DoctorFinding, DoctorReport

    fix = "pip install 'llmdeck[gpu]'"
    finding = DoctorFinding(id="x", area="gpu", status="warn", message="m [b]", fix=fix)
    monkeypatch.setattr("llmdeck.doctor.run.run_doctor", lambda *a, **k: DoctorReport(findings=[finding]))
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(["doctor"], capsys)
    assert code == 0 and f"fix: {fix}" in out and "m [b]" in out, out


def test_a_hung_command_is_stopped_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung `docker info` was bounded, but a process it had started outlived the doctor."""
    import time

    import psutil

    from llmdeck.doctor import stack

    marker = f"sleep 300.{os.getpid()}{time.monotonic_ns() % 1000}"  # this test's own orphan
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\n{marker} &\nsleep 300\n")
    fake.chmod(0o755)
    monkeypatch.setattr(stack, "COMMAND_TIMEOUT_S", 1.0)
    t0 = time.monotonic()
    done = stack.run_command([str(fake), "info"])
    assert done.returncode == 124 and time.monotonic() - t0 < 10
    time.sleep(0.3)
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert not left, left


def test_a_commands_output_that_is_not_utf8_is_read_replaced(tmp_path: Path) -> None:
    from llmdeck.doctor import stack

    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\nprintf 'ok \\377\\n'\n")
    fake.chmod(0o755)
    done = stack.run_command([str(fake)])
    assert done.returncode == 0 and done.stdout.startswith("ok ")


def test_the_vllm_probe_of_a_hung_python_stops_what_it_started_and_reads_any_bytes(tmp_path: Path) -> None:
    """`doctor --python` on a wrapper that hangs: its child had lived on (subprocess.run killed the
    wrapper alone); one that prints bytes that are not UTF-8 had ended in a UnicodeDecodeError."""
    import time

    import psutil

    from llmdeck.runtime.preflight.vllm_version import probe_venv_vllm

    marker = f"sleep 301.{os.getpid()}{time.monotonic_ns() % 1000}"
    hung = tmp_path / "python"
    hung.write_text(f"#!/bin/sh\n{marker} &\nsleep 300\n")
    hung.chmod(0o755)
    version, why = probe_venv_vllm(str(hung), timeout_s=1.0)
    assert version is None and "took more than 1 s" in why
    time.sleep(0.3)
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert not left, left
    hung.write_text("#!/bin/sh\nprintf '\\377\\376 no vllm\\n' >&2\nexit 3\n")
    assert probe_venv_vllm(str(hung), timeout_s=5.0) == (None, "\ufffd\ufffd no vllm")


@pytest.mark.parametrize("image", ["bad image;rm", "-v/:/x", ""])
def test_doctor_refuses_what_is_no_image_name(image: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`doctor --image 'bad image;rm'` had been judged (exit 0) where `plan` refuses it."""
    code, _out, err = run_cli(["doctor", "--image", image], capsys)
    assert code == 2 and "--image" in err


def test_hf_home_that_is_a_file_fails(tmp_path: Path) -> None:
    """HF_HOME=<a file> had been "ok hf": every download and the docker engine's mount of it then failed."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    found = env_probes.probe_hf({"HF_HOME": str(a_file), "HF_HUB_CACHE": str(a_file / "hub")})
    assert _ids(found) == ["hf", "hf-home-not-a-folder", "hf-hub-cache-not-a-folder"]
    assert all(f.status == "fail" for f in found[1:]) and "is under" in found[2].message
    assert _ids(env_probes.probe_hf({"HF_HOME": str(tmp_path / "new" / "hf")})) == ["hf"]
