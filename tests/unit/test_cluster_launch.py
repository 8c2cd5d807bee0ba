"""`llmdeck up --ray-cluster`: the spec and argv vLLM gets on the head (rendered; no GPUs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdeck.cluster.commands import RayOptions, Setup
from llmdeck.cluster.launch import on_cluster
from llmdeck.cluster.local import LocalCluster, LocalNode, state_file
from llmdeck.cluster.netenv import NetSpec
from llmdeck.cluster.run import ClusterRequest, RemoteRecord, remote_file, render
from llmdeck.engines.argv import engine_env, venv_argv
from llmdeck.engines.spec import LaunchSpec
from llmdeck.errors import NotRunningError, UsageError
from llmdeck.util.atomic import atomic_write_json

TP2 = ["--tensor-parallel-size", "2", "--pipeline-parallel-size", "1"]


def _spec(args: list[str]) -> LaunchSpec:
    return LaunchSpec(
        engine="venv", model="/models/Qwen3-30B-A3B", python="/opt/vllm/bin/python", vllm_args=args
    )


def test_remote_cluster_gives_ray_backend_address_and_link_env(tmp_path: Path) -> None:
    req = ClusterRequest(
        head="127.0.0.1",
        head_ip="169.254.10.1",
        workers=["spark2"],
        worker_ips=["169.254.10.2"],
        net=NetSpec(interface="enp1s0f1np1", hcas=["rocep1s0f1", "roceP2p1s0f1"]),
        ray=RayOptions(port=6380),
        setup=Setup(mode="venv"),
    )
    rec = RemoteRecord(address="169.254.10.1:6380", commands=render(req))
    atomic_write_json(remote_file(tmp_path), rec.model_dump(mode="json"))
    spec = on_cluster(_spec(TP2), tmp_path)
    argv = venv_argv(spec)
    assert argv[:4] == ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.cli.main", "serve"]
    assert argv[-6:] == [*TP2, "--distributed-executor-backend", "ray"]
    env = engine_env(spec, tmp_path)
    assert env["RAY_ADDRESS"] == "169.254.10.1:6380" and env["VLLM_HOST_IP"] == "169.254.10.1"
    assert env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1" and env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
    # given explicitly it is kept once; another backend is refused
    again = on_cluster(_spec([*TP2, "--distributed-executor-backend=ray"]), tmp_path)
    assert again.vllm_args.count("--distributed-executor-backend=ray") == 1 and "ray" not in again.vllm_args
    with pytest.raises(UsageError, match="mp"):
        on_cluster(_spec(["--distributed-executor-backend", "mp"]), tmp_path)


def test_local_cluster_address_and_missing_cluster(tmp_path: Path) -> None:
    with pytest.raises(NotRunningError):
        on_cluster(_spec(TP2), tmp_path)
    rec = LocalCluster(address="127.0.0.1:26400", port=26400, temp_dir="/tmp/llmdeck-ray-26400")
    rec.nodes.append(LocalNode(role="head", pgid=1 << 30, log="/dev/null", argv=["ray"]))
    atomic_write_json(state_file(tmp_path), rec.model_dump(mode="json"))
    assert on_cluster(_spec(TP2), tmp_path).env == {"RAY_ADDRESS": "127.0.0.1:26400"}
