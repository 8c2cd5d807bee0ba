"""Starting a server in a container (the docker engine): the image pulled with its progress shown,
then `docker run -d` under the start lock, the container recorded, and — for a foreground start —
leashed, so that it stops if llmdeck is killed outright."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from llmdeck.engines import get as get_engine
from llmdeck.engines.logfiles import open_log
from llmdeck.engines.secrets import split_secrets
from llmdeck.engines.spec import LaunchSpec
from llmdeck.runtime import start_gate
from llmdeck.runtime.state import ServerRecord, StartedBy, StateStore
from llmdeck.settings import Settings

if TYPE_CHECKING:
    from llmdeck.engines.docker import DockerCLI


def _quiet(_: str) -> None:
    return None


def make_compile_cache(spec: LaunchSpec) -> None:
    """The spec's compile-cache folder, made by us rather than by docker (which makes a missing mount
    source as root)."""
    if spec.compile_cache:
        from llmdeck.util.localfile import ensure_dir

        ensure_dir(Path(spec.compile_cache), 0o755)  # read in the container; never group/world-writable


def start_docker(
    spec: LaunchSpec,
    settings: Settings,
    docker: DockerCLI | None = None,
    started_by: StartedBy = "up",
    *,
    leashed: bool = False,
    progress: Callable[[str], None] | None = None,
    sized_from: LaunchSpec | None = None,
) -> ServerRecord:
    """`docker run -d` the spec (vllm/vllm-openai or nvcr.io/nvidia/vllm) and record the container.

    The spec was validated and its port checked (the launcher takes a ValidatedSpec). What may take
    long — pulling the image — runs before the start lock, its lines to ``progress``. Secrets go into
    the container as ``-e KEY`` (the value through docker's own environment)."""
    engine = get_engine(spec.engine, docker=docker)
    store = StateStore(settings.servers_dir)
    spec, secrets = split_secrets(spec)
    engine.prepare(spec, progress=progress or _quiet, timeout_s=settings.docker_pull_timeout_s)
    make_compile_cache(spec)
    log_path = settings.logs_dir / f"{spec.name}.log"
    start_gate.prepare_folders(store, [settings.logs_dir])
    with start_gate.start_lock(settings):
        start_gate.forget_dead(store, spec.name, docker)
        start_gate.refuse_a_port_taken_by_a_start(store, spec)
        start_gate.rotate(log_path)
        argv = engine.argv(spec, secret_env=sorted(secrets))
        with open_log(log_path, argv) as log:
            _, container_id = engine.start(spec, log=log, env={}, secrets=secrets)
        if leashed:
            engine.leash(None, container_id)
        record = ServerRecord(
            name=spec.name,
            spec=spec,
            argv=argv,
            pid=None,
            container_id=container_id,
            log_path=log_path,
            started_by=started_by,
            sized_from=sized_from,
        )
        start_gate.keep_record(store, record, secrets, engine)
    return record
