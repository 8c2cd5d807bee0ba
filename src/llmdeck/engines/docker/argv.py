"""The ``docker run`` argv for a LaunchSpec, the other docker argvs, and the image facts they rest on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from llmdeck.engines.spec import LaunchSpec
from llmdeck.util.hfpaths import default_hf_home

DEFAULT_IMAGE = "vllm/vllm-openai:latest"
VLLM_OPENAI_REPO = "vllm/vllm-openai"
NGC_REPO = "nvcr.io/nvidia/vllm"
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
CONTAINER_MODELS_DIR = "/models"
CONTAINER_COMPILE_CACHE = "/llmdeck-compile-cache"
LABEL_NAME = "llmdeck.name"
LABEL_PORT = "llmdeck.port"
CONTAINER_PREFIX = "llmdeck-"
# docker's json-file driver (the default) keeps a container's output in one file that grows for as long
# as the container runs (vLLM logs a line per request); these options rotate it: at most 3 x 64 MiB
BOUNDED_LOG_OPTS = ("--log-opt", "max-size=64m", "--log-opt", "max-file=3")
UNBOUNDED_LOG_DRIVERS = frozenset({"json-file"})  # "local" rotates by default (5 x 20 MB)
DEFAULT_LOG_DRIVER = "json-file"  # a daemon's when its daemon.json names none

ImageKind = Literal["vllm-openai", "ngc", "other"]
Network = Literal["publish", "host"]


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
    log_opts: Sequence[str] = (),
) -> list[str]:
    """The full ``docker run`` argv that starts ``spec`` (engine ``docker``).

    No secret in it: ``--api-key X``, secret ``spec.env`` variables and ``secret_env`` become
    ``-e NAME`` without a value (:meth:`DockerCLI.run_container` gives docker the values).

    ``detach``: ``-d`` with the spec's restart policy; otherwise attached in the foreground with
    ``--rm`` (and ``-it`` when ``tty``); docker forwards Ctrl-C to vLLM. ``network="publish"``
    maps ``HOST:PORT:PORT`` (vLLM binds 0.0.0.0 inside the container); ``"host"`` shares the
    host network and vLLM binds the spec's host itself. ``log_opts``: docker's own log options
    (:data:`BOUNDED_LOG_OPTS` when the daemon keeps logs in a file that never rotates).
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
    argv += ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864", *log_opts]
    if network == "host":
        argv += ["--network", "host"]
        bind_host = spec.host
    else:
        if spec.host in {"0.0.0.0", "::", ""}:
            argv += ["-p", f"{spec.port}:{spec.port}"]
        else:
            argv += ["-p", f"{spec.host}:{spec.port}:{spec.port}"]
        bind_host = "0.0.0.0"
    argv += _mounts(spec, local)
    argv += _env_flags(spec, local, {*found, *secret_env})
    argv.append(image)
    if kind != "vllm-openai":
        argv += ["vllm", "serve"]
    argv.append(container_model_path(spec))
    argv += ["--served-model-name", spec.effective_served_name, "--host", bind_host, "--port", str(spec.port)]
    argv += list(spec.vllm_args)
    return argv


def log_opts_for(driver: str | None) -> tuple[str, ...]:
    """The options that bound docker's own log of a container under the daemon's log ``driver``:
    :data:`BOUNDED_LOG_OPTS` for one that keeps it in one file that never rotates (json-file), none
    for the others (journald refuses max-size, local rotates by itself)."""
    return BOUNDED_LOG_OPTS if driver in UNBOUNDED_LOG_DRIVERS else ()


def up_argv(
    spec: LaunchSpec, *, log_opts: Sequence[str], secret_env: Sequence[str] = (), docker: str = "docker"
) -> list[str]:
    """The ``docker run -d`` argv `up --engine docker` runs for ``spec``, and `plan` prints: one builder,
    so that a copied command is the one `up` would run (the plan's had lacked the log options)."""
    return docker_run_argv(spec, detach=True, secret_env=sorted(secret_env), log_opts=log_opts, docker=docker)


def _mounts(spec: LaunchSpec, local: bool) -> list[str]:
    """The HF cache, the compile cache (when the spec names one) and a local model folder (read-only)."""
    argv = ["-v", f"{spec.hf_cache or default_hf_cache()}:{CONTAINER_HF_CACHE}"]
    if spec.compile_cache:
        argv += ["-v", f"{spec.compile_cache}:{CONTAINER_COMPILE_CACHE}"]
    if local:
        host_dir = str(Path(spec.model).expanduser().resolve())
        argv += ["-v", f"{host_dir}:{container_model_path(spec)}:ro"]
    return argv


def compile_cache_env(spec: LaunchSpec) -> dict[str, str]:
    """Where the container's vLLM and Triton keep their caches when ``compile_cache`` is mounted
    (torch.compile and DeepGEMM live under VLLM_CACHE_ROOT; Triton's kernels and autotuning results
    under TRITON_CACHE_DIR): a restart, or the next trial of a tune, compiles nothing it compiled
    before. The user's own ``env`` wins."""
    if not spec.compile_cache:
        return {}
    return {
        "VLLM_CACHE_ROOT": f"{CONTAINER_COMPILE_CACHE}/vllm",
        "TRITON_CACHE_DIR": f"{CONTAINER_COMPILE_CACHE}/triton",
    }


def _env_flags(spec: LaunchSpec, local: bool, secret_names: set[str]) -> list[str]:
    """``-e KEY=VALUE`` for plain variables, ``-e KEY`` (the value from docker's environment) for
    secrets and for HF_TOKEN (the caller's, for hub models)."""
    flags = ["-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1"] if local else []
    env = {**compile_cache_env(spec), **spec.env}
    for key in sorted(env):
        flags += ["-e", f"{key}={env[key]}"]
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
    since: str | None = None,
    docker: str = "docker",
) -> list[str]:
    """``since``: docker's timestamp (RFC 3339, nanoseconds) of the first line wanted."""
    argv = [docker, "logs"]
    if follow:
        argv.append("-f")
    if tail is not None:
        argv += ["--tail", str(tail)]
    if timestamps:
        argv.append("-t")
    if since is not None:
        argv += ["--since", since]
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


def docker_log_driver_argv(*, docker: str = "docker") -> list[str]:
    """The daemon's default logging driver, as a JSON string (``"json-file"``)."""
    return [docker, "info", "--format", "{{json .LoggingDriver}}"]


def docker_image_present_argv(image: str, *, docker: str = "docker") -> list[str]:
    """Exit 0 when ``image`` is on this host (docker prints ``No such image`` otherwise)."""
    return [docker, "image", "inspect", "--format", "{{.Id}}", image]


def docker_pull_argv(image: str, *, docker: str = "docker") -> list[str]:
    return [docker, "pull", image]


def docker_stop_id_argv(container_id: str, *, timeout_s: int = 20, docker: str = "docker") -> list[str]:
    """Stop one container by its id (unique for ever, unlike a name a next start takes again)."""
    return [docker, "stop", "-t", str(timeout_s), container_id]


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
    """The argv as one copy-pasteable shell line (control characters escaped: see util/shellquote)."""
    from llmdeck.util.shellquote import join

    return join(list(argv))
