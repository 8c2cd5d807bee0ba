"""The docker engine bounded: no docker command waits for ever on a hung daemon, a missing image is
pulled with its progress shown (and stopped at its limit), docker's own log of a container is bounded
when the daemon keeps it in one file, a dead container's leftovers are cleared before the next start,
and a foreground start's container is leashed.

The fake docker clients here (``fake_docker``: small scripts named docker) stand for a hung daemon and
a pull in progress; their output is docker's real output (tests/fixtures/docker, see its README).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llmdeck.engines import get as get_engine
from llmdeck.engines.docker import DockerCLI, DockerError
from llmdeck.engines.docker import cli as docker_cli
from llmdeck.engines.docker.argv import BOUNDED_LOG_OPTS
from llmdeck.engines.docker.output import PullProgress
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime import container_start
from llmdeck.settings import Settings
from llmdeck.util import leash
from llmdeck.util.net import free_port
from repo_paths import ROOT, TEST_FIXTURES

FIX = TEST_FIXTURES / "docker"
PULL_LINES = (FIX / "docker-pull-non-tty.txt").read_text().splitlines()
VERSION_OK = json.dumps({"Client": {"Version": "28.2.2"}, "Server": {"Version": "28.2.2"}})


def fake_docker(tmp_path: Path, body: str) -> str:
    """A docker client that runs ``body`` (Python, ``argv`` = its arguments)."""
    path = tmp_path / "docker"
    path.write_text(f"#!{sys.executable}\nimport sys, time\nargv = sys.argv[1:]\n{body}\n")
    path.chmod(0o755)
    return str(path)


def real(stem: str) -> tuple[str, str, int]:
    return (
        (FIX / f"{stem}.stdout").read_text(),
        (FIX / f"{stem}.stderr").read_text(),
        int((FIX / f"{stem}.rc").read_text()),
    )


class Answers:
    """An injected runner: docker's answer for each verb (``image`` for `docker image inspect`)."""

    def __init__(self, **answers: tuple[str, str, int]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], env: object = None) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        out, err, rc = self.answers.get(argv[1], ("", "", 0))
        return subprocess.CompletedProcess(argv, rc, out, err)


def spec(**kw: object) -> LaunchSpec:
    base = {"name": "dock", "engine": "docker", "model": "Qwen/Qwen3-0.6B", "port": free_port()}
    return LaunchSpec.model_validate({**base, "image": "vllm/vllm-openai:v0.22.0", **kw})


def test_a_hung_daemon_is_an_error_in_bounded_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`docker ps` against a daemon that never answers had waited for ever (status, up, down)."""
    monkeypatch.setattr(docker_cli, "QUERY_S", 1.0)
    cli = DockerCLI(docker=fake_docker(tmp_path, "time.sleep(60)"))
    t0 = time.monotonic()
    with pytest.raises(DockerError) as info:
        cli.ps()
    assert time.monotonic() - t0 < 10
    assert "gave no answer within 1 s" in info.value.message
    assert "systemctl" in (info.value.hint or "")


def test_a_runner_that_times_out_is_the_same_error() -> None:
    def hung(argv: list[str]) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(argv, 30)

    with pytest.raises(DockerError, match="gave no answer"):
        DockerCLI(run=hung).inspect("dock")


def test_the_real_client_without_a_daemon_for_the_new_commands() -> None:
    cli = DockerCLI(
        run=Answers(
            info=real("docker-info-log-driver-no-daemon"), image=real("docker-image-inspect-no-daemon")
        )
    )
    assert cli.log_driver() is None  # stdout "" and exit 1: no driver known
    with pytest.raises(DockerError, match="daemon is not running"):
        cli.has_image("vllm/vllm-openai:v0.22.0")


def test_has_image_and_log_driver_read_docker_answers() -> None:
    missing = ("", "Error response from daemon: No such image: vllm/vllm-openai:v9\n", 1)
    cli = DockerCLI(run=Answers(image=missing, info=('"json-file"\n', "", 0)))
    assert cli.has_image("vllm/vllm-openai:v9") is False
    assert cli.log_driver() == "json-file"
    assert DockerCLI(run=Answers(image=("sha256:ab\n", "", 0))).has_image("x") is True


def test_pull_progress_counts_layers_from_real_output() -> None:
    progress = PullProgress(every_s=0.0)
    shown = [s for i, line in enumerate(PULL_LINES) if (s := progress.feed(line, float(i)))]
    assert shown[0] == "latest: Pulling from library/ubuntu"
    assert "4 of 4 layers pulled" in shown
    assert shown[-2].startswith("Status: Downloaded newer image")
    assert len(progress.layers) == 4 and len(progress.done) == 4
    quiet = PullProgress(every_s=5.0)
    assert sum(1 for line in PULL_LINES if quiet.feed(line, 0.0) and "layers" in line) <= 1


def test_pull_streams_its_lines_as_they_come(tmp_path: Path) -> None:
    body = f"for line in {PULL_LINES!r}:\n    print(line, flush=True)\n    time.sleep(0.05)"
    cli = DockerCLI(docker=fake_docker(tmp_path, body))
    seen: list[tuple[float, str]] = []
    t0 = time.monotonic()
    cli.pull("ubuntu", lambda line: seen.append((time.monotonic() - t0, line)), timeout_s=30)
    assert [line for _, line in seen] == PULL_LINES
    assert seen[0][0] < seen[-1][0] - 0.5, "the lines arrived as docker printed them, not at the end"


def test_a_pull_past_its_limit_is_stopped(tmp_path: Path) -> None:
    cli = DockerCLI(
        docker=fake_docker(tmp_path, "print(argv[-1] + ': Pulling from x', flush=True)\ntime.sleep(60)")
    )
    t0 = time.monotonic()
    with pytest.raises(DockerError) as info:
        cli.pull("vllm/vllm-openai:v0.22.0", lambda _: None, timeout_s=1.0)
    assert time.monotonic() - t0 < 10
    assert "LLMDECK_DOCKER_PULL_TIMEOUT_S" in info.value.message
    assert "docker pull vllm/vllm-openai:v0.22.0" in (info.value.hint or "")


def test_a_failed_pull_says_why(tmp_path: Path) -> None:
    _out, err, rc = real("docker-pull-no-daemon")
    body = f"sys.stderr.write({err!r}); sys.exit({rc})"
    with pytest.raises(DockerError, match="daemon is not running"):
        DockerCLI(docker=fake_docker(tmp_path, body)).pull("x", lambda _: None, timeout_s=30)


def test_prepare_pulls_a_missing_image_and_bounds_a_json_file_log() -> None:
    """No progress had been shown while `docker run -d` pulled 20 GB; and json-file (docker's
    default) keeps a container's whole output in one file for as long as it runs."""
    missing = ("", "Error: No such image: vllm/vllm-openai:v0.22.0\n", 1)
    runner = Answers(version=(VERSION_OK, "", 0), image=missing, info=('"json-file"\n', "", 0))
    cli = DockerCLI(run=runner)
    pulls: list[tuple[str, float]] = []

    def pull(image: str, on_line: object, *, timeout_s: float) -> None:
        pulls.append((image, timeout_s))
        for line in PULL_LINES:
            on_line(line)  # type: ignore[operator]

    cli.pull = pull  # type: ignore[method-assign]
    engine = get_engine("docker", docker=cli)
    said: list[str] = []
    engine.prepare(spec(), progress=said.append, timeout_s=60)
    assert pulls == [("vllm/vllm-openai:v0.22.0", 60)]
    assert said[:3] == [
        "pulling vllm/vllm-openai:v0.22.0 (not on this host yet) …",
        "pull: latest: Pulling from library/ubuntu",
        "pull: 1 of 4 layers pulled",  # once every layer is listed; then at most one count every 5 s
    ]
    assert said[-2] == "pull: Status: Downloaded newer image for ubuntu:latest"
    assert " ".join(BOUNDED_LOG_OPTS) in " ".join(engine.argv(spec()))


@pytest.mark.parametrize("driver", ['"journald"', '"local"', '""'])
def test_other_log_drivers_get_no_options(driver: str) -> None:
    """max-size is json-file's and local's option; journald refuses it (`docker run` would fail), and
    local rotates by itself."""
    runner = Answers(version=(VERSION_OK, "", 0), image=("sha256:ab", "", 0), info=(driver, "", 0))
    engine = get_engine("docker", docker=DockerCLI(run=runner))
    said: list[str] = []
    engine.prepare(spec(), progress=said.append, timeout_s=60)
    assert said == []  # the image is here: nothing pulled
    assert "--log-opt" not in engine.argv(spec())


def test_start_runs_the_bounded_argv_and_records_it(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    runner = Answers(
        version=(VERSION_OK, "", 0),
        image=("sha256:ab", "", 0),
        info=('"json-file"', "", 0),
        run=("c0ffee\n", "", 0),
    )
    record = container_start.start_docker(spec(), settings, DockerCLI(run=runner))
    run = next(c for c in runner.calls if c[1] == "run")
    assert run[run.index("--log-opt") + 1] == "max-size=64m" and "max-file=3" in run
    assert record.argv == run, "the record holds what ran"


@pytest.mark.parametrize(
    ("driver", "asked"), [('"json-file"', "json-file"), ('"journald"', "journald"), ('"json-file"', None)]
)
def test_the_planned_docker_command_is_the_one_up_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], driver: str, asked: str | None
) -> None:
    """`plan` printed `docker run` without the log options `up` passes on a json-file daemon (docker's
    default): a copied command ran with an unbounded log. The plan's spec started by `up` runs exactly
    the planned argv (a key among the vLLM flags too), and the printed text is that argv, shell-quoted.
    No daemon answering the plan (None): docker's default driver, json-file, is assumed."""
    import shlex

    from llmdeck.cli.plan import _print_plan
    from llmdeck.plan.planner import PlanRequest, make_plan

    model = tmp_path / "my model"  # a space: quoted in the printed command
    model.mkdir()
    (model / "config.json").write_text(
        (ROOT / "src/llmdeck/catalog/data/configs/Qwen3-0.6B.config.json").read_text()
    )
    req = PlanRequest(
        model=str(model), machine="h200", name="dock", port=free_port(), vllm_args=["--api-key", "s3cret"]
    )
    plan = make_plan(req.model_copy(update={"docker_log_driver": asked}), raise_if_impossible=False)
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    ok = {"version": (VERSION_OK, "", 0), "image": ("sha256:ab", "", 0), "run": ("c0ffee\n", "", 0)}
    runner = Answers(**ok, info=(driver, "", 0))
    container_start.start_docker(plan.spec, settings, DockerCLI(run=runner))
    run = next(c for c in runner.calls if c[1] == "run")
    assert plan.commands["docker"] == run
    assert ("--log-opt" in run) is (asked != "journald")
    assert "s3cret" not in " ".join(run)
    _print_plan(plan)
    out = capsys.readouterr().out
    printed = out.split("docker\n", 1)[1].split("\nvenv\n", 1)[0]
    assert shlex.split(printed.replace("\\\n", " ")) == run


def starting_daemon(inspect_file: str, **more: tuple[str, str, int]) -> Answers:
    """A daemon with the image, whose `run -d` prints container c0ffee and whose inspect is the fixture."""
    inspect = ((FIX / inspect_file).read_text(), "", 0)
    ok = {"version": (VERSION_OK, "", 0), "image": ("sha256:ab", "", 0), "run": ("c0ffee\n", "", 0)}
    return Answers(**ok, inspect=inspect, **more)


def test_a_dead_container_is_cleared_before_the_next_start(tmp_path: Path) -> None:
    """An exited container had kept its name: the next `docker run --name llmdeck-NAME` failed on it,
    and the hint's `llmdeck down NAME` knew no server (the record had been dropped)."""
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    runner = starting_daemon(
        "docker-inspect-exited-oom.json", logs=("", "torch.OutOfMemoryError: CUDA out of memory.\n", 0)
    )
    cli = DockerCLI(run=runner)
    container_start.start_docker(spec(), settings, cli)  # recorded; inspect says it exited
    runner.calls.clear()
    container_start.start_docker(spec(), settings, cli)
    verbs = [c[1] for c in runner.calls]
    assert ["docker", "rm", "-f", "llmdeck-dock"] in runner.calls
    assert verbs.index("rm") < verbs.index("run")
    rotated = settings.logs_dir / "dock.log.1"
    assert "CUDA out of memory" in rotated.read_text(), "the dead container's log was kept, then moved along"


def test_a_foreground_container_is_leashed_and_let_go_on_stop(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    runner = starting_daemon("docker-inspect-running-healthy.json")
    cli = DockerCLI(run=runner)
    record = container_start.start_docker(spec(), settings, cli, leashed=True)
    try:
        _write, watcher = leash._HELD["c0ffee"]
        assert watcher.args[-5:] == ["docker", "stop", "-t", "20", "c0ffee"]
    finally:
        get_engine("docker", docker=cli).stop(record, grace_s=1)
    assert "c0ffee" not in leash._HELD
    watcher.wait(timeout=10)


def test_a_command_leash_runs_its_command_when_its_holder_is_killed(tmp_path: Path) -> None:
    """What no signal reaches (a container): the watcher runs the command once llmdeck is gone."""
    marker = tmp_path / "released"
    release = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from llmdeck.util import leash\n"
            f"leash.hold_command('k', {release!r}); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": ":".join(sys.path)},
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.kill()
    holder.wait()
    deadline = time.monotonic() + 15
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists()


def test_a_command_leash_let_go_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "released"
    release = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"]
    leash.hold_command("k2", release)
    watcher = leash._HELD["k2"][1]
    leash.let_go("k2")
    watcher.wait(timeout=10)
    assert not marker.exists()


ATTACH_DOCKER = """
import json, os, pathlib
calls = pathlib.Path(os.environ["FAKE_DOCKER_CALLS"])
with calls.open("a") as fh:
    fh.write(json.dumps(argv) + "\\n")
if argv[0] == "version":
    print('{"Client": {"Version": "28.2.2"}, "Server": {"Version": "28.2.2"}}')
elif argv[0] == "run":
    time.sleep(60)  # attached to a container that serves until stopped
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_up_attach_container_does_not_outlive_llmdeck(tmp_path: Path, how: str) -> None:
    """`up --attach --engine docker` runs `docker run --rm` in the foreground: killed outright (or
    stopped by SIGTERM, whose handler killed the docker client only), llmdeck had left the container
    serving with no one attached to it. A fake docker client stands for the daemon (none here)."""
    import os
    import signal

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_docker(bin_dir, ATTACH_DOCKER)
    calls = tmp_path / "calls.jsonl"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_DOCKER_CALLS": str(calls),
        "LLMDECK_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    argv = [sys.executable, "-m", "llmdeck", "up", "--attach", "--engine", "docker", "--force"]
    argv += ["--model", "Qwen/Qwen3-0.6B", "--image", "vllm/vllm-openai:v0.22.0", "--name", "att"]
    argv += ["--port", str(free_port())]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def verbs() -> list[list[str]]:
        text = calls.read_text() if calls.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    try:
        deadline = time.monotonic() + 60
        while not any(c[0] == "run" for c in verbs()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert any(c[0] == "run" for c in verbs()), "the container never started"
        proc.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while ["stop", "-t", "20", "llmdeck-att"] not in verbs() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ["stop", "-t", "20", "llmdeck-att"] in verbs()
    finally:
        proc.kill()
        for pid_dir in Path("/proc").iterdir():  # the fake client: no one else would stop it
            try:
                if str(bin_dir) in (pid_dir / "cmdline").read_text():
                    os.kill(int(pid_dir.name), signal.SIGKILL)
            except (OSError, ValueError):
                pass


def test_logs_keep_the_containers_two_streams_in_the_order_written(tmp_path: Path) -> None:
    """`docker logs` writes the container's stdout and stderr to its own two: read as stdout then stderr,
    a traceback (stderr) came after every later line, and the log file shifted under the phase reader."""
    body = (
        "for i in range(6):\n"
        "    stream = sys.stdout if i % 2 == 0 else sys.stderr\n"
        "    stream.write(f'line {i}\\n'); stream.flush(); time.sleep(0.01)"
    )
    text = DockerCLI(docker=fake_docker(tmp_path, body)).logs("dock", tail=2000)
    assert text.splitlines() == [f"line {i}" for i in range(6)]


LOGS_DOCKER = """
if argv[0] == "logs" and "-f" in argv:
    for i in range(3):
        out = sys.stdout if i % 2 == 0 else sys.stderr
        out.write(f"new {i}\\n"); out.flush()
        time.sleep(0.05)
elif argv[0] == "logs":
    print("INFO started"); print("INFO 200 OK /v1/chat/completions")
elif argv[0] == "inspect":
    print(open(sys.argv[0] + ".inspect").read())
"""


def docker_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A docker server's record, and a fake docker client on PATH that answers for its container."""
    import os

    from llmdeck.runtime.state import ServerRecord, StateStore

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = Path(fake_docker(bin_dir, LOGS_DOCKER))
    fake.with_suffix(".inspect").write_text((FIX / "docker-inspect-running-healthy.json").read_text())
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    settings = Settings(state_dir=tmp_path / "state")
    log = settings.logs_dir / "dock.log"
    log.parent.mkdir(parents=True)
    log.write_text("# llmdeck: docker run ...\nINFO started\n")  # what the start saved
    record = ServerRecord(
        name="dock", spec=spec(), argv=["docker", "run"], container_id="c0ffee", log_path=log
    )
    StateStore(settings.servers_dir).save(record)
    return log


def test_logs_of_a_container_are_its_current_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`llmdeck logs` of a running container is `docker logs --tail N`: it had shown what the start
    saved, never a line the container printed while serving. The file keeps the start's copy (it had
    been rewritten from docker's last 2,000 lines, the start-up lost); `down` saves the rest."""
    from llmdeck.cli.app import main

    log = docker_record(tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as info:
        main(["logs", "dock"])
    assert info.value.code in (0, None)
    assert "INFO 200 OK /v1/chat/completions" in capsys.readouterr().out
    assert log.read_text() == "# llmdeck: docker run ...\nINFO started\n"


def test_logs_follow_of_a_container_streams_docker_logs_f(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`logs -f` had followed the log file, which nothing writes while a container serves."""
    from llmdeck.cli.app import main

    docker_record(tmp_path, monkeypatch)
    with pytest.raises(SystemExit):
        main(["logs", "-f", "dock", "-n", "1"])
    out = capsys.readouterr().out
    assert out.endswith("new 0\nnew 1\nnew 2\n"), out


def test_follow_output_is_killed_when_the_reader_stops(tmp_path: Path) -> None:
    from llmdeck.util.linestream import follow_output

    body = "print('first', flush=True); time.sleep(60)"
    lines = follow_output([fake_docker(tmp_path, body)])
    assert next(lines) == "first\n"
    lines.close()
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs(p, str(tmp_path))]
    assert leftovers == []


def _runs(proc: Path, needle: str) -> bool:
    try:
        return needle in (proc / "cmdline").read_text()
    except OSError:
        return False


RUN_DOCKER = """
import json, os
with open(os.environ["FAKE_DOCKER_CALLS"], "a") as fh:
    fh.write(json.dumps(argv) + "\\n")
if argv[0] == "info":
    print(os.environ["FAKE_DOCKER_DRIVER"])
"""


@pytest.mark.parametrize(("driver", "bounded"), [('"json-file"', True), ('"journald"', False)])
def test_up_attach_bounds_dockers_log_of_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: str, bounded: bool
) -> None:
    """`up --attach --engine docker` (`docker run --rm` in the foreground, for weeks as `-d` is) had run
    without the log options of `up`: the daemon's json-file log of the container grew without bound
    until the container ended. A fake docker client stands for the daemon."""
    import os

    from llmdeck.runtime import attach
    from llmdeck.runtime.service import UpOptions

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_docker(bin_dir, RUN_DOCKER)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_CALLS", str(calls))
    monkeypatch.setenv("FAKE_DOCKER_DRIVER", driver)
    settings = Settings(state_dir=tmp_path / "state", cache_dir=tmp_path / "cache")
    attach.docker(spec(), settings, UpOptions.bare(), tty=False, events=lambda event: None)
    run = next(c for c in map(json.loads, calls.read_text().splitlines()) if c[0] == "run")
    assert (" ".join(BOUNDED_LOG_OPTS) in " ".join(run)) is bounded
    assert "--rm" in run


def test_up_attach_container_with_stdin_closed_runs_without_a_terminal(tmp_path: Path) -> None:
    """`up --attach --engine docker <&-` (a job runner with no stdin): sys.stdin is None, and asking it
    whether it is a terminal had been an internal error (AttributeError) before anything started."""
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_docker(bin_dir, RUN_DOCKER)  # `docker run` returns at once: the container "ended" cleanly
    calls = tmp_path / "calls.jsonl"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_DOCKER_CALLS": str(calls),
        "FAKE_DOCKER_DRIVER": '"json-file"',
        "LLMDECK_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    argv = [sys.executable, "-m", "llmdeck", "up", "--attach", "--engine", "docker", "--force"]
    argv += ["--model", "Qwen/Qwen3-0.6B", "--image", "vllm/vllm-openai:v0.22.0", "--name", "nostdin"]
    argv += ["--port", str(free_port())]
    line = 'exec "$@" <&-'
    result = subprocess.run(
        ["sh", "-c", line, "sh", *argv], env=env, capture_output=True, text=True, timeout=120
    )
    assert "internal error" not in result.stderr and result.returncode == 0, result.stderr[-2000:]
    run = next(c for c in map(json.loads, calls.read_text().splitlines()) if c[0] == "run")
    assert "-t" not in run and "-it" not in run
