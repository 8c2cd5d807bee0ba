"""The commands that make a Ray cluster for vLLM, rendered as argv lists (nothing is run here).

Two ways, as in the field (eugr/spark-vllm-docker launch-cluster.sh @013cd2ea ``start_cluster``,
``start_ray_head``, ``start_ray_worker``):

* ``docker``: on every node a long-lived container of the vLLM image with ``--network host`` (NCCL,
  Gloo and Ray must see the node's real interfaces), ``--gpus all``, ``--ipc=host``, ``--privileged``
  (RDMA devices, pinned memory) and the node's environment (netenv.node_env); then
  ``docker exec -d NAME ray start ...`` inside it. Remote nodes are reached with ``ssh``.
* ``venv``: the node's own Python environment over ``ssh``: ``env K=V ... PY -m ray.scripts.scripts
  start ...``; the command line sent to ssh is one shell-quoted string (strings are data).

``ray start`` keeps to a small footprint (``--object-store-memory``, ``--num-cpus``, no dashboard,
no usage stats), as the field's launchers do (1 GiB object store there: vLLM moves tensors with
NCCL, not through Ray's object store).
"""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from llmdeck.cluster.netenv import NetSpec, node_env
from llmdeck.engines.spec import ImageName

DEFAULT_RAY_PORT = 6379
DEFAULT_OBJECT_STORE_BYTES = 1 << 30
MIN_OBJECT_STORE_BYTES = 78 * (1 << 20)  # Ray refuses less
MAX_OBJECT_STORE_BYTES = 1 << 50  # 1 PiB: more is a typo, not a node
DEFAULT_CONTAINER = "llmdeck-ray"
SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
RAY_SESSION_LOG = "/tmp/ray/session_latest/logs/raylet.out"  # Ray's default temp dir, the newest session

Mode = Literal["docker", "venv"]


class RayOptions(BaseModel):
    port: int = Field(DEFAULT_RAY_PORT, ge=1, le=65535)
    num_cpus: int | None = Field(None, ge=1)
    num_gpus: int | None = Field(None, ge=0)
    object_store_bytes: int = Field(
        DEFAULT_OBJECT_STORE_BYTES, ge=MIN_OBJECT_STORE_BYTES, le=MAX_OBJECT_STORE_BYTES
    )
    temp_dir: str | None = None
    block: bool = True
    client_server_port: int | None = Field(
        None, ge=1, le=65535, description="head only (Ray's default: 10001)"
    )


class NodeCommands(BaseModel):
    """What to run for one node, in order; ``down`` stops what ``up`` started."""

    host: str
    role: Literal["head", "worker"]
    node_ip: str
    env: dict[str, str]
    up: list[list[str]]
    down: list[list[str]]
    status: list[str] | None = None
    logs: list[str] | None = Field(None, description="the node's Ray log tail (LINES is replaced)")


def ray_start_argv(
    opts: RayOptions, *, node_ip: str, head_address: str | None, ray: str = "ray"
) -> list[str]:
    """``ray start`` for the head (``head_address`` None) or a worker joining ``head_address``."""
    argv = [ray, "start"]
    if opts.block:
        argv.append("--block")
    if head_address is None:
        argv += ["--head", "--port", str(opts.port), "--include-dashboard=false"]
        if opts.client_server_port:
            argv += ["--ray-client-server-port", str(opts.client_server_port)]
    else:
        argv += ["--address", head_address]
    argv += ["--node-ip-address", node_ip, "--object-store-memory", str(opts.object_store_bytes)]
    if opts.num_cpus is not None:
        argv += ["--num-cpus", str(opts.num_cpus)]
    if opts.num_gpus is not None:
        argv += ["--num-gpus", str(opts.num_gpus)]
    if opts.temp_dir:
        argv += ["--temp-dir", opts.temp_dir]
    argv.append("--disable-usage-stats")
    return argv


def ssh_host(destination: str) -> str:
    """The machine an ssh destination names: ``user@host`` -> ``host``."""
    return destination.rsplit("@", 1)[-1]


def is_local(host: str) -> bool:
    return host in LOCAL_HOSTS


def over_ssh(host: str, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """``argv`` on ``host`` (as is when local); the remote command line is shell-quoted."""
    full = (["env", *[f"{k}={v}" for k, v in env.items()]] if env else []) + argv
    if is_local(host):
        return full
    return ["ssh", *SSH_OPTIONS, host, shlex.join(full)]


def docker_run_argv(image: str, name: str, env: dict[str, str], hf_cache: str | None) -> list[str]:
    """The long-lived container one node runs Ray and vLLM in."""
    argv = ["docker", "run", "-d", "--rm", "--name", name, "--network", "host", "--gpus", "all"]
    argv += ["--ipc=host", "--privileged", "--ulimit", "memlock=-1", "--ulimit", "nofile=1048576:1048576"]
    argv += ["--entrypoint", ""]
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    if hf_cache:
        argv += ["-v", f"{hf_cache}:/root/.cache/huggingface"]
    return [*argv, image, "sleep", "infinity"]


class Setup(BaseModel):
    """How every node runs Ray: in the vLLM image's container or in the node's own venv."""

    mode: Mode = "venv"
    image: ImageName | None = None
    python: str = "python3"
    container: str = DEFAULT_CONTAINER
    hf_cache: str | None = None

    @field_validator("python")
    @classmethod
    def _one_program(cls, value: str) -> str:
        """A program name or path for ssh to run: empty, an option or a line break fails only on the node."""
        if not value.strip() or value.startswith("-") or any(c in value for c in "\r\n\0"):
            raise ValueError(f"--python {value!r} is not a program: give the Python with vLLM and Ray")
        return value

    @property
    def containerized(self) -> bool:
        """Ray (and vLLM) run in a container on every node: the engine of that name is one."""
        from llmdeck.engines import get as get_engine

        return get_engine(self.mode).containerized


def node_commands(
    host: str,
    *,
    role: Literal["head", "worker"],
    node_ip: str,
    head_address: str | None,
    net: NetSpec,
    opts: RayOptions,
    setup: Setup,
) -> NodeCommands:
    env = node_env(net, node_ip)
    ray_opts = opts.model_copy(update={"block": False})  # detached: docker exec -d / ray's daemon
    if setup.containerized:
        if not setup.image:
            raise ValueError("docker mode needs an image")
        name = setup.container
        start = ray_start_argv(ray_opts, node_ip=node_ip, head_address=head_address)
        up = [
            over_ssh(host, docker_run_argv(setup.image, name, env, setup.hf_cache)),
            over_ssh(host, ["docker", "exec", "-d", name, *start]),
        ]
        down = [over_ssh(host, ["docker", "stop", "--time", "30", name])]
        status = over_ssh(host, ["docker", "exec", name, "ray", "status"]) if role == "head" else None
        logs = over_ssh(host, ["docker", "logs", "--tail", "LINES", name])
    else:
        ray = [setup.python, "-m", "ray.scripts.scripts"]
        start = [*ray, *ray_start_argv(ray_opts, node_ip=node_ip, head_address=head_address)[1:]]
        up = [over_ssh(host, start, env)]
        down = [over_ssh(host, [*ray, "stop", "--grace-period", "30"])]
        status = over_ssh(host, [*ray, "status"]) if role == "head" else None
        logs = over_ssh(host, ["tail", "-n", "LINES", RAY_SESSION_LOG])
    return NodeCommands(
        host=host, role=role, node_ip=node_ip, env=env, up=up, down=down, status=status, logs=logs
    )


def cluster_commands(
    head: str,
    workers: list[str],
    *,
    net: NetSpec,
    opts: RayOptions,
    setup: Setup,
    head_ip: str | None = None,
    worker_ips: list[str] | None = None,
) -> list[NodeCommands]:
    """Head first, then each worker joining it at ``head_ip:port``; a node's address is its --*-ip, else
    the host of its ssh destination (``user@gpu2`` -> ``gpu2``)."""
    hip = head_ip or ssh_host(head)
    ips = worker_ips or [ssh_host(w) for w in workers]
    address = f"{hip}:{opts.port}"
    out = [node_commands(head, role="head", node_ip=hip, head_address=None, net=net, opts=opts, setup=setup)]
    for host, ip in zip(workers, ips, strict=True):
        out.append(
            node_commands(
                host, role="worker", node_ip=ip, head_address=address, net=net, opts=opts, setup=setup
            )
        )
    return out
