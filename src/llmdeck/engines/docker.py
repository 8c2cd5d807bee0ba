"""vLLM in Docker: the `docker run` argv for a LaunchSpec, the other docker argvs, and parsers.

This module is the one implementation of "how llmdeck runs vLLM in a container" (``llmdeck plan``
renders the same argv through :func:`docker_run_argv`). Everything here is pure except
:class:`DockerCLI`, whose ``run`` callable is injectable so tests check the exact argv.

Image facts (checked):

- ``vllm/vllm-openai`` sets ``ENTRYPOINT ["vllm", "serve"]``: everything after the image name is
  appended to it, so the model comes first (positional) and ``serve`` must not be repeated.
- ``nvcr.io/nvidia/vllm:YY.MM-py3`` (NGC) has no vLLM entrypoint: the command is ``vllm serve MODEL``.
- Both run as root, so the Hugging Face cache lives at ``/root/.cache/huggingface`` inside.
- ``--ipc host`` (PyTorch shared memory) and the NGC-recommended ulimits ``memlock=-1`` and
  ``stack=67108864``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import MissingDependencyError, NotRunningError, OperationError, UsageError
from llmdeck.util.hfpaths import default_hf_home

DEFAULT_IMAGE = "vllm/vllm-openai:latest"
VLLM_OPENAI_REPO = "vllm/vllm-openai"
NGC_REPO = "nvcr.io/nvidia/vllm"
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
CONTAINER_MODELS_DIR = "/models"
LABEL_NAME = "llmdeck.name"
LABEL_PORT = "llmdeck.port"
CONTAINER_PREFIX = "llmdeck-"

ImageKind = Literal["vllm-openai", "ngc", "other"]
Network = Literal["publish", "host"]
Runner = Callable[..., "subprocess.CompletedProcess[str]"]  # (argv) or (argv, env=…)


class DockerError(OperationError):
    """A docker command failed (daemon down, no GPU runtime, name conflict, ...)."""


# ---- pure helpers ----------------------------------------------------------------------------


def split_image(image: str) -> tuple[str, str | None]:
    """``nvcr.io/nvidia/vllm:25.11-py3`` -> (``nvcr.io/nvidia/vllm``, ``25.11-py3``); digests keep no tag."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
        return repo, tag
    return ref, None


def image_kind(image: str) -> ImageKind:
    """Which family an image belongs to; decides where `vllm serve` comes from."""
    repo, _ = split_image(image)
    repo = repo.removeprefix("docker.io/").removeprefix("index.docker.io/")
    if repo == VLLM_OPENAI_REPO or repo.endswith("/vllm-openai"):
        return "vllm-openai"
    if repo == NGC_REPO:
        return "ngc"
    return "other"


def container_name(name: str) -> str:
    """The container name of llmdeck server ``name``."""
    return CONTAINER_PREFIX + name


def is_local_model(model: str) -> bool:
    """A host folder (mounted into the container) rather than a Hugging Face repo id."""
    if model.startswith(("/", "./", "../", "~")):
        return True
    return Path(model).expanduser().is_dir()


def container_model_path(spec: LaunchSpec) -> str:
    """Where the model is seen inside the container (``/models/NAME``), or the repo id."""
    if not is_local_model(spec.model):
        return spec.model
    base = Path(spec.model).expanduser().name or "model"
    return f"{CONTAINER_MODELS_DIR}/{base}"


def default_hf_cache() -> str:
    """The host folder mounted as the container's HF cache when the spec names none (HF_HOME aside)."""
    return str(default_hf_home())


def docker_run_argv(
    spec: LaunchSpec,
    *,
    detach: bool = True,
    network: Network = "publish",
    tty: bool = False,
    docker: str = "docker",
    secret_env: Sequence[str] = (),
) -> list[str]:
    """The full ``docker run`` argv that starts ``spec`` (engine ``docker``).

    No secret in it: ``--api-key X``, secret ``spec.env`` variables and ``secret_env`` become
    ``-e NAME`` without a value (:meth:`DockerCLI.run_container` gives docker the values).

    ``detach``: ``-d`` with the spec's restart policy; otherwise attached in the foreground with
    ``--rm`` (and ``-it`` when ``tty``); docker forwards Ctrl-C to vLLM. ``network="publish"``
    maps ``HOST:PORT:PORT`` (vLLM binds 0.0.0.0 inside the container); ``"host"`` shares the
    host network and vLLM binds the spec's host itself.
    """
    from llmdeck.engines.secrets import split_secrets

    spec, found = split_secrets(spec)
    image = spec.image or DEFAULT_IMAGE
    kind = image_kind(image)
    local = is_local_model(spec.model)
    argv: list[str] = [docker, "run"]
    if detach:
        argv.append("-d")
        if spec.restart_policy:
            argv += ["--restart", spec.restart_policy]
    else:
        argv.append("--rm")
        if tty:
            argv.append("-it")
    argv += ["--name", container_name(spec.name)]
    argv += ["--label", f"{LABEL_NAME}={spec.name}", "--label", f"{LABEL_PORT}={spec.port}"]
    argv += ["--gpus", "all", "--ipc", "host"]
    argv += ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    if network == "host":
        argv += ["--network", "host"]
        bind_host = spec.host
    else:
        if spec.host in {"0.0.0.0", "::", ""}:
            argv += ["-p", f"{spec.port}:{spec.port}"]
        else:
            argv += ["-p", f"{spec.host}:{spec.port}:{spec.port}"]
        bind_host = "0.0.0.0"
    argv += ["-v", f"{spec.hf_cache or default_hf_cache()}:{CONTAINER_HF_CACHE}"]
    if local:
        host_dir = str(Path(spec.model).expanduser().resolve())
        argv += ["-v", f"{host_dir}:{container_model_path(spec)}:ro"]
    argv += _env_flags(spec, local, {*found, *secret_env})
    argv.append(image)
    if kind != "vllm-openai":
        argv += ["vllm", "serve"]
    argv.append(container_model_path(spec))
    argv += ["--served-model-name", spec.effective_served_name, "--host", bind_host, "--port", str(spec.port)]
    argv += list(spec.vllm_args)
    return argv


def _env_flags(spec: LaunchSpec, local: bool, secret_names: set[str]) -> list[str]:
    """``-e KEY=VALUE`` for plain variables, ``-e KEY`` (the value from docker's environment) for
    secrets and for HF_TOKEN (the caller's, for hub models)."""
    flags = ["-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1"] if local else []
    for key in sorted(spec.env):
        flags += ["-e", f"{key}={spec.env[key]}"]
    for key in sorted(secret_names | (set() if local else {"HF_TOKEN"})):
        flags += ["-e", key]
    return flags


def docker_stop_argv(name: str, *, timeout_s: int = 30, docker: str = "docker") -> list[str]:
    """Graceful stop: SIGTERM, then SIGKILL after ``timeout_s``."""
    return [docker, "stop", "-t", str(timeout_s), container_name(name)]


def docker_kill_argv(name: str, *, docker: str = "docker") -> list[str]:
    return [docker, "kill", container_name(name)]


def docker_rm_argv(name: str, *, force: bool = False, docker: str = "docker") -> list[str]:
    return [docker, "rm", *(["-f"] if force else []), container_name(name)]


def docker_logs_argv(
    name: str,
    *,
    follow: bool = False,
    tail: int | None = None,
    timestamps: bool = False,
    docker: str = "docker",
) -> list[str]:
    argv = [docker, "logs"]
    if follow:
        argv.append("-f")
    if tail is not None:
        argv += ["--tail", str(tail)]
    if timestamps:
        argv.append("-t")
    return [*argv, container_name(name)]


def docker_inspect_argv(name: str, *, docker: str = "docker") -> list[str]:
    return [docker, "inspect", "--type", "container", container_name(name)]


def docker_ps_argv(
    *, all_containers: bool = True, llmdeck_only: bool = True, docker: str = "docker"
) -> list[str]:
    argv = [docker, "ps"]
    if all_containers:
        argv.append("-a")
    if llmdeck_only:
        argv += ["--filter", f"label={LABEL_NAME}"]
    return [*argv, "--no-trunc", "--format", "{{json .}}"]


def docker_version_argv(*, docker: str = "docker") -> list[str]:
    return [docker, "version", "--format", "json"]


def image_vllm_version_argv(image: str, *, docker: str = "docker") -> list[str]:
    """Ask an image which vLLM it ships (the entrypoint is overridden: vllm-openai's is `vllm serve`)."""
    return [
        docker,
        "run",
        "--rm",
        "--entrypoint",
        "python3",
        image,
        "-c",
        "import vllm; print(vllm.__version__)",
    ]


def render_shell(argv: Sequence[str]) -> str:
    """The argv as one copy-pasteable shell line."""
    return shlex.join(list(argv))


# ---- parsers of real docker output -----------------------------------------------------------


class ContainerSummary(BaseModel):
    """One line of ``docker ps --format '{{json .}}'`` (docker quotes every value as a string)."""

    id: str
    names: str
    image: str
    state: str = Field(description="created, running, restarting, exited, paused, dead")
    status: str = Field(description="Human status, e.g. 'Up 2 hours' or 'Exited (1) 3 minutes ago'")
    ports: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: str = ""
    running_for: str = ""

    @property
    def llmdeck_name(self) -> str | None:
        return self.labels.get(LABEL_NAME)

    @property
    def exit_code(self) -> int | None:
        """The exit code from ``Status`` (``Exited (137) ...``), if the container exited."""
        if self.status.startswith("Exited (") and ")" in self.status:
            try:
                return int(self.status[len("Exited (") : self.status.index(")")])
            except ValueError:
                return None
        return None


def parse_labels(text: str) -> dict[str, str]:
    """``a=1,b=2`` (docker ps' Labels column) -> dict; values with commas are not split apart."""
    labels: dict[str, str] = {}
    if not text:
        return labels
    last: str | None = None
    for part in text.split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            labels[key] = value
            last = key
        elif last is not None:
            labels[last] += "," + part
    return labels


def parse_ps(text: str) -> list[ContainerSummary]:
    """Parse ``docker ps --format '{{json .}}'`` output: one JSON object per line."""
    out: list[ContainerSummary] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DockerError(
                f"`docker ps` printed a line that is not JSON (line {lineno}: {line[:80]!r}).",
                hint="Check that `docker ps --format '{{json .}}'` works in this shell.",
            ) from exc
        labels = row.get("Labels", "")
        out.append(
            ContainerSummary(
                id=str(row.get("ID", "")),
                names=str(row.get("Names", "")),
                image=str(row.get("Image", "")),
                state=str(row.get("State", "")),
                status=str(row.get("Status", "")),
                ports=str(row.get("Ports", "")),
                labels=labels if isinstance(labels, dict) else parse_labels(str(labels)),
                created_at=str(row.get("CreatedAt", "")),
                running_for=str(row.get("RunningFor", "")),
            )
        )
    return out


class ContainerState(BaseModel):
    """The parts of ``docker inspect`` that lifecycle decisions need."""

    id: str
    name: str
    image: str = ""
    status: str = Field(
        description="State.Status: created, running, paused, restarting, removing, exited, dead"
    )
    running: bool = False
    restarting: bool = False
    oom_killed: bool = False
    exit_code: int = 0
    error: str = ""
    pid: int = 0
    started_at: str = ""
    finished_at: str = ""
    restart_count: int = 0
    health: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)

    @property
    def dead(self) -> bool:
        """The container stopped on its own (not running, not about to restart)."""
        return self.status in {"exited", "dead"} and not self.restarting

    def summary(self) -> str:
        if self.status == "running":
            return f"running (pid {self.pid}, restarts {self.restart_count})"
        text = f"{self.status}, exit code {self.exit_code}"
        if self.oom_killed:
            text += ", killed by the kernel OOM killer (host RAM)"
        if self.error:
            text += f", error: {self.error}"
        if self.restart_count:
            text += f", restarted {self.restart_count} times"
        return text


def parse_inspect(text: str) -> list[ContainerState]:
    """Parse ``docker inspect`` (a JSON array of container objects)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DockerError(
            "`docker inspect` printed something that is not JSON.",
            hint="Run the same `docker inspect` by hand to see what it says.",
        ) from exc
    if not isinstance(data, list):
        data = [data]
    out: list[ContainerState] = []
    for obj in data:
        if not isinstance(obj, dict):
            continue
        state: dict[str, Any] = obj.get("State") or {}
        config: dict[str, Any] = obj.get("Config") or {}
        health = state.get("Health")
        out.append(
            ContainerState(
                id=str(obj.get("Id", "")),
                name=str(obj.get("Name", "")).lstrip("/"),
                image=str(config.get("Image") or obj.get("Image") or ""),
                status=str(state.get("Status", "")),
                running=bool(state.get("Running", False)),
                restarting=bool(state.get("Restarting", False)),
                oom_killed=bool(state.get("OOMKilled", False)),
                exit_code=int(state.get("ExitCode", 0) or 0),
                error=str(state.get("Error", "") or ""),
                pid=int(state.get("Pid", 0) or 0),
                started_at=str(state.get("StartedAt", "")),
                finished_at=str(state.get("FinishedAt", "")),
                restart_count=int(obj.get("RestartCount", 0) or 0),
                health=str(health.get("Status")) if isinstance(health, dict) else None,
                labels={str(k): str(v) for k, v in (config.get("Labels") or {}).items()},
            )
        )
    return out


class DockerVersion(BaseModel):
    client_version: str | None = None
    client_api_version: str | None = None
    server_version: str | None = None
    server_reachable: bool = False


def parse_version(stdout: str) -> DockerVersion:
    """Parse ``docker version --format json``. With no daemon, docker prints ``"Server":null``."""
    try:
        data = json.loads(stdout.strip().splitlines()[0]) if stdout.strip() else {}
    except json.JSONDecodeError:
        data = {}
    client = data.get("Client") or {}
    server = data.get("Server") or {}
    return DockerVersion(
        client_version=client.get("Version"),
        client_api_version=client.get("ApiVersion"),
        server_version=server.get("Version") if isinstance(server, dict) else None,
        server_reachable=bool(server),
    )


# Messages docker prints on stderr, and what to do about them.
_DOCKER_ERRORS: list[tuple[str, str, str]] = [
    (
        "Cannot connect to the Docker daemon",
        "The Docker daemon is not running (or not reachable at DOCKER_HOST).",
        "Start it (`sudo systemctl start docker`), or use `--engine venv` with a Python that has vLLM.",
    ),
    (
        "permission denied while trying to connect to the Docker daemon",
        "This user may not talk to the Docker daemon.",
        "Add yourself to the docker group (`sudo usermod -aG docker $USER`, then log in again).",
    ),
    (
        "could not select device driver",
        "Docker cannot give the container a GPU: the NVIDIA Container Toolkit is missing or not configured.",
        "Install nvidia-container-toolkit, run `sudo nvidia-ctk runtime configure --runtime=docker` and "
        "restart docker.",
    ),
    (
        "is already in use by container",
        "A container with this name exists already.",
        "Stop it with `llmdeck down NAME` (or `docker rm -f llmdeck-NAME`), or pick another --name.",
    ),
    (
        "No such container",
        "The container does not exist (removed, or never started).",
        "Run `llmdeck status` to see the servers llmdeck knows.",
    ),
    (
        "pull access denied",
        "The image cannot be pulled (wrong name, or a registry login is needed).",
        "Check the image name; for nvcr.io run `docker login nvcr.io` with an NGC API key.",
    ),
    (
        "manifest unknown",
        "The image tag does not exist in the registry.",
        "Check the tag (e.g. vllm/vllm-openai:v0.17.0, nvcr.io/nvidia/vllm:25.12-py3).",
    ),
    (
        "port is already allocated",
        "The host port is taken by another container or process.",
        "Pick another --port, or stop what holds it.",
    ),
]


def docker_error(argv: Sequence[str], rc: int, stderr: str) -> DockerError:
    """A DockerError with the known cause and fix for a failed docker command."""
    text = stderr.strip()
    first = text.splitlines()[-1] if text else f"exit code {rc}"
    for needle, cause, hint in _DOCKER_ERRORS:
        if needle.lower() in text.lower():
            return DockerError(
                f"`{render_shell(argv[:3])} ...` failed: {cause} Docker said: {first}", hint=hint
            )
    return DockerError(
        f"`{render_shell(argv[:3])} ...` failed with exit code {rc}: {first}",
        hint="Run the command by hand to see the whole output.",
    )


# ---- executing -------------------------------------------------------------------------------


def _subprocess_runner(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env)


class DockerCLI:
    """Runs docker commands; ``run`` is injectable (tests record the argv and return real output)."""

    def __init__(self, docker: str = "docker", run: Runner | None = None) -> None:
        self.docker = docker
        self._run: Runner = run or _subprocess_runner

    def _call(
        self, argv: list[str], *, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        try:
            proc = self._run(argv, env=env) if env is not None else self._run(argv)
        except FileNotFoundError as exc:
            raise MissingDependencyError(
                f"The docker client ({self.docker!r}) is not installed or not on PATH.",
                hint="Install Docker Engine and the NVIDIA Container Toolkit, or use `--engine venv`.",
            ) from exc
        if check and proc.returncode != 0:
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        return proc

    def version(self) -> DockerVersion:
        """Client and server versions; raises DockerError when the daemon is unreachable."""
        argv = docker_version_argv(docker=self.docker)
        proc = self._call(argv, check=False)
        info = parse_version(proc.stdout or "")
        if proc.returncode != 0 or not info.server_reachable:
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        return info

    def run_container(
        self, spec: LaunchSpec, *, network: Network = "publish", secrets: dict[str, str] | None = None
    ) -> str:
        """Start ``spec`` detached; returns the container id docker printed. Secrets (``secrets``, and
        any left in ``spec``) reach docker through its environment, never its argv."""
        import os

        from llmdeck.engines.secrets import split_secrets

        if spec.engine != "docker":
            raise UsageError(
                f"Server {spec.name!r} uses engine {spec.engine!r}, not docker.",
                hint="Use --engine docker to run vLLM in a container.",
            )
        spec, found = split_secrets(spec)
        secret = {**found, **(secrets or {})}
        argv = docker_run_argv(
            spec, detach=True, network=network, docker=self.docker, secret_env=list(secret)
        )
        proc = self._call(argv, env={**os.environ, **secret} if secret else None)
        return (proc.stdout or "").strip().splitlines()[-1] if (proc.stdout or "").strip() else ""

    def stop(self, name: str, *, timeout_s: int = 30) -> None:
        self._call(docker_stop_argv(name, timeout_s=timeout_s, docker=self.docker))

    def kill(self, name: str) -> None:
        self._call(docker_kill_argv(name, docker=self.docker))

    def rm(self, name: str, *, force: bool = False) -> None:
        self._call(docker_rm_argv(name, force=force, docker=self.docker))

    def logs(self, name: str, *, tail: int | None = None) -> str:
        """The container's log (vLLM writes to stderr; docker keeps both streams)."""
        proc = self._call(docker_logs_argv(name, tail=tail, docker=self.docker))
        return (proc.stdout or "") + (proc.stderr or "")

    def inspect(self, name: str) -> ContainerState:
        argv = docker_inspect_argv(name, docker=self.docker)
        proc = self._call(argv, check=False)
        if proc.returncode != 0:
            if "No such container" in (proc.stderr or "") or "No such object" in (proc.stderr or ""):
                raise NotRunningError(
                    f"There is no container {container_name(name)!r} for server {name!r}.",
                    hint="Run `llmdeck status` to see known servers, or `llmdeck up` to start it.",
                )
            raise docker_error(argv, proc.returncode, proc.stderr or "")
        states = parse_inspect(proc.stdout or "[]")
        if not states:
            raise NotRunningError(f"`docker inspect` knows no container {container_name(name)!r}.")
        return states[0]

    def ps(self, *, all_containers: bool = True, llmdeck_only: bool = True) -> list[ContainerSummary]:
        proc = self._call(
            docker_ps_argv(all_containers=all_containers, llmdeck_only=llmdeck_only, docker=self.docker)
        )
        return parse_ps(proc.stdout or "")

    def image_vllm_version(self, image: str) -> str | None:
        """The vLLM version inside ``image`` (pulls it if needed), or None if it has no vLLM."""
        proc = self._call(image_vllm_version_argv(image, docker=self.docker), check=False)
        if proc.returncode != 0:
            if "No module named" in (proc.stderr or ""):
                return None
            raise docker_error(image_vllm_version_argv(image), proc.returncode, proc.stderr or "")
        lines = (proc.stdout or "").strip().splitlines()
        return lines[-1].strip() if lines else None
