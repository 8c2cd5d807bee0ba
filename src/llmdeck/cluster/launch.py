"""vLLM on the recorded Ray cluster: the launch spec ``llmdeck up --ray-cluster`` starts on the head.

vLLM's Ray executor joins an existing cluster through ``ray.init(address=...)``, which reads
``RAY_ADDRESS`` (vllm 0.32.0 v1/executor/ray_utils.py ``initialize_ray_cluster``); it is chosen with
``--distributed-executor-backend ray`` (config/parallel.py:289-298: multi-node Ray must be asked for).
The head's NCCL/Gloo environment is the one ``cluster up`` gave the head node (netenv.node_env).
"""

from __future__ import annotations

from pathlib import Path

from llmdeck.cluster import local
from llmdeck.cluster.run import load_remote
from llmdeck.engines.argv import flag_value as _flag_value
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import NotRunningError, UsageError

BACKEND_FLAG = "--distributed-executor-backend"


def on_cluster(spec: LaunchSpec, state_dir: Path) -> LaunchSpec:
    """``spec`` with ``--distributed-executor-backend ray`` and the cluster's address and environment."""
    backend = _flag_value(spec.vllm_args, BACKEND_FLAG)
    if backend not in (None, "ray"):
        raise UsageError(
            f"--ray-cluster with {BACKEND_FLAG} {backend}: vLLM would not use the Ray cluster.",
            hint=f"Drop {BACKEND_FLAG} (llmdeck adds `ray`) or drop --ray-cluster.",
        )
    args = list(spec.vllm_args) if backend else [*spec.vllm_args, BACKEND_FLAG, "ray"]
    rec = local.load(state_dir)
    if rec is not None:
        env = {"RAY_ADDRESS": rec.address}
    else:
        remote = load_remote(state_dir)
        if remote is None:
            raise NotRunningError(
                "--ray-cluster, but no Ray cluster started by llmdeck is recorded.",
                hint="Start one with `llmdeck cluster up --head H --worker W` first, or drop --ray-cluster.",
            )
        env = {**remote.commands[0].env, "RAY_ADDRESS": remote.address}
    return spec.model_copy(update={"vllm_args": args, "env": {**spec.env, **env}})
