"""vLLM in Docker: the `docker run` argv for a LaunchSpec, the other docker argvs, and parsers.

By topic: :mod:`.argv` (the argvs and image facts), :mod:`.output` (parsers of real docker output,
docker's errors), :mod:`.cli` (:class:`DockerCLI`, which runs them). Every name is importable from here.

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

from llmdeck.engines.docker.argv import (
    CONTAINER_HF_CACHE,
    CONTAINER_MODELS_DIR,
    CONTAINER_PREFIX,
    DEFAULT_IMAGE,
    DEFAULT_LOG_DRIVER,
    LABEL_NAME,
    LABEL_PORT,
    NGC_REPO,
    VLLM_OPENAI_REPO,
    ImageKind,
    Network,
    container_model_path,
    container_name,
    default_hf_cache,
    docker_inspect_argv,
    docker_kill_argv,
    docker_logs_argv,
    docker_ps_argv,
    docker_rm_argv,
    docker_run_argv,
    docker_stop_argv,
    docker_version_argv,
    image_kind,
    image_vllm_version_argv,
    is_local_model,
    log_opts_for,
    render_shell,
    split_image,
    up_argv,
)
from llmdeck.engines.docker.cli import DockerCLI, Runner
from llmdeck.engines.docker.output import (
    ContainerState,
    ContainerSummary,
    DockerError,
    DockerVersion,
    docker_error,
    parse_inspect,
    parse_labels,
    parse_ps,
    parse_version,
)

__all__ = [
    "CONTAINER_HF_CACHE",
    "CONTAINER_MODELS_DIR",
    "CONTAINER_PREFIX",
    "DEFAULT_IMAGE",
    "DEFAULT_LOG_DRIVER",
    "LABEL_NAME",
    "LABEL_PORT",
    "NGC_REPO",
    "VLLM_OPENAI_REPO",
    "ContainerState",
    "ContainerSummary",
    "DockerCLI",
    "DockerError",
    "DockerVersion",
    "ImageKind",
    "Network",
    "Runner",
    "container_model_path",
    "container_name",
    "default_hf_cache",
    "docker_error",
    "docker_inspect_argv",
    "docker_kill_argv",
    "docker_logs_argv",
    "docker_ps_argv",
    "docker_rm_argv",
    "docker_run_argv",
    "docker_stop_argv",
    "docker_version_argv",
    "image_kind",
    "image_vllm_version_argv",
    "is_local_model",
    "log_opts_for",
    "parse_inspect",
    "parse_labels",
    "parse_ps",
    "parse_version",
    "render_shell",
    "split_image",
    "up_argv",
]
