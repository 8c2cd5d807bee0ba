"""Parsers of real docker output (``ps``, ``inspect``, ``version``) and docker's errors with their fixes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from llmdeck.engines.docker.argv import LABEL_NAME, render_shell
from llmdeck.errors import OperationError


class DockerError(OperationError):
    """A docker command failed (daemon down, no GPU runtime, name conflict, ...)."""


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
        "Remove it with `docker rm -f CONTAINER` (`docker logs CONTAINER` first shows its log), or pick "
        "another --name.",
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


def docker_timeout(argv: Sequence[str], timeout_s: float) -> DockerError:
    """A docker command that gave no answer in time: its daemon is hung, or busy past any reason."""
    return DockerError(
        f"`{render_shell(argv[:3])} ...` gave no answer within {timeout_s:.0f} s: the Docker daemon is "
        "not answering (hung or overloaded); llmdeck stopped waiting and stopped the command.",
        hint="See whether it answers by hand (`docker ps`); `sudo systemctl status docker` shows its "
        "state and `sudo systemctl restart docker` restarts it.",
    )


def docker_pull_timeout(image: str, timeout_s: float) -> DockerError:
    pull = render_shell(["docker", "pull", image])
    return DockerError(
        f"`{pull}` did not finish within {timeout_s:.0f} s (LLMDECK_DOCKER_PULL_TIMEOUT_S); llmdeck "
        "stopped it.",
        hint=f"Pull it yourself (`{pull}`: docker keeps the layers it has), then run the command again; "
        "or raise LLMDECK_DOCKER_PULL_TIMEOUT_S.",
    )


class PullProgress:
    """Follows ``docker pull``'s lines when its output is not a terminal (``ID: Pulling fs layer``,
    ``ID: Already exists``, ``ID: Pull complete``, ``Status: …``): how many layers there are, how
    many are done. :meth:`feed` returns a line worth showing, at most one a ``every_s``."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.layers: set[str] = set()
        self.done: set[str] = set()
        self.every_s = every_s
        self._shown_at: float | None = None
        self._shown_done = -1

    def feed(self, line: str, now: float) -> str | None:
        text = line.strip()
        layer, sep, status = text.partition(": ")
        if sep and len(layer) == 12 and all(c in "0123456789abcdef" for c in layer):
            self.layers.add(layer)
            if status in ("Pull complete", "Already exists"):
                self.done.add(layer)
            due = self._shown_at is None or now - self._shown_at >= self.every_s
            # from the first layer done: by then docker has listed every layer ("0 of 1" had shown first)
            if not due or not self.done or len(self.done) == self._shown_done:
                return None
            self._shown_at, self._shown_done = now, len(self.done)
            return f"{len(self.done)} of {len(self.layers)} layers pulled"
        return text or None  # "v0.22.0: Pulling from …", "Digest: …", "Status: …", errors


def _usage_pointer(line: str) -> bool:
    """docker's last line after a failed command (``Run 'docker run --help' for more information``;
    ``See 'docker run --help'.`` before docker 23): no part of what went wrong."""
    text = line.strip()
    return text.startswith(("Run 'docker", "See 'docker")) and "--help'" in text


def _container_of(argv: Sequence[str]) -> str:
    """The container a docker argv names (`run --name X`), for a hint; ``CONTAINER`` when none does."""
    args = list(argv)
    return args[args.index("--name") + 1] if "--name" in args[:-1] else "CONTAINER"


def docker_error(argv: Sequence[str], rc: int, stderr: str) -> DockerError:
    """A DockerError with the known cause and fix for a failed docker command."""
    text = stderr.strip()
    said = [line for line in text.splitlines() if line.strip() and not _usage_pointer(line)]
    first = said[-1] if said else f"exit code {rc}"
    for needle, cause, hint in _DOCKER_ERRORS:
        if needle.lower() in text.lower():
            return DockerError(
                f"`{render_shell(argv[:3])} ...` failed: {cause} Docker said: {first}",
                hint=hint.replace("CONTAINER", render_shell([_container_of(argv)])),
            )
    return DockerError(
        f"`{render_shell(argv[:3])} ...` failed with exit code {rc}: {first}",
        hint="Run the command by hand to see the whole output.",
    )
