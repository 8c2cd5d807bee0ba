"""CLI group: cluster — a Ray cluster across boxes for vLLM's distributed executor, and its link test."""

from __future__ import annotations

from pathlib import Path

import typer

from llmdeck.cli.options import netcheck_timeout, step_timeout
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import nonempty, number

CLUSTER_HELP = """A Ray cluster over several boxes for vLLM's own distributed executor (tensor/pipeline
parallel), with the NCCL/Gloo environment of the link, and an all-reduce acceptance test before vLLM
starts.

Examples:

  llmdeck cluster up --head 10.0.0.1 --worker 10.0.0.2 --interface enp1s0f1np1 \\
      --hca rocep1s0f1 --hca roceP2p1s0f1 --gid-index 3 --docker --image vllm/vllm-openai:v0.22.0

  llmdeck cluster up --head 10.0.0.1 --worker 10.0.0.2 --venv --python /opt/vllm/bin/python --dry-run

  llmdeck cluster up --head 127.0.0.1 --worker 127.0.0.1      # both Ray nodes on this machine

  llmdeck cluster netcheck --link cx7-200g                     # all-reduce across the recorded nodes

  llmdeck cluster netcheck --local 2 --expect-gbps 1           # 2 local ranks, gloo (CPU)

  llmdeck cluster status --json

  llmdeck cluster logs -n 20                                   # every node's Ray log

  llmdeck cluster down
"""

UP_HELP = """Start Ray's head and workers (and print the environment each node gets).

Head and workers all 127.0.0.1/localhost: real Ray processes on this machine (Ray must be installed:
pip install 'llmdeck\\[cluster]'). Otherwise each node is reached over ssh: --docker runs the vLLM image
with --network host and starts Ray inside it, --venv starts Ray from the node's own Python. --dry-run
prints the commands and runs nothing. Then start vLLM on the head with `llmdeck up --ray-cluster
-- --tensor-parallel-size N`. Ray listens on every interface and runs the code clients send: keep
the nodes on a private link.
"""


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    group = typer.Typer(name="cluster", help=CLUSTER_HELP, no_args_is_help=True)
    _up_command(group)
    _lifecycle_commands(group)
    _netcheck_command(group)
    app.add_typer(group)


NETCHECK_OPTION = typer.Option(
    None, "--netcheck", help='Then the all-reduce test: gloo | nccl (--json: its verdict as "netcheck").'
)


def _up_command(group: typer.Typer) -> None:
    @group.command("up", help=UP_HELP)
    def up_cmd(
        ctx: typer.Context,
        head: str = typer.Option(..., "--head", help="The head node (host or IP; 127.0.0.1: this machine)."),
        worker: list[str] = typer.Option(None, "--worker", help="A worker node (repeat for each)."),
        head_ip: str = typer.Option(
            None, "--head-ip", callback=nonempty, help="The head's address on the fast link."
        ),
        worker_ip: list[str] = typer.Option(None, "--worker-ip", help="Each worker's address on the link."),
        interface: str = typer.Option(
            None, "--interface", help="The link's interface (NCCL/GLOO_SOCKET_IFNAME)."
        ),
        hca: list[str] = typer.Option(None, "--hca", help="An RDMA device for NCCL_IB_HCA (repeat)."),
        gid_index: int = typer.Option(
            None, "--gid-index", min=0, max=255, help="NCCL_IB_GID_INDEX (RoCE v2: often 3)."
        ),
        docker: bool = typer.Option(
            False, "--docker/--venv", help="Ray inside the vLLM image, or the node's venv."
        ),
        image: str = typer.Option(
            None, "--image", callback=nonempty, help="--docker: the vLLM image on every node."
        ),
        python: str = typer.Option("python3", "--python", help="--venv: the Python with vLLM and Ray."),
        port: int = typer.Option(6379, "--port", min=1, max=65535, help="Ray's head port."),
        num_cpus: int = typer.Option(None, "--num-cpus", min=1, max=65536, help="CPUs each node offers Ray."),
        num_gpus: int = typer.Option(
            None, "--num-gpus", min=0, max=1024, help="GPUs each node offers (here: 0)."
        ),
        object_store_mb: float = typer.Option(
            None,
            "--object-store-mb",
            callback=number(at_least=82, at_most=1e9),
            help="Ray's object store (MB, at least 82; 1024, 100 on one machine).",
        ),
        hf_cache: str = typer.Option(
            None, "--hf-cache", callback=nonempty, help="--docker: the nodes' HF cache, mounted."
        ),
        timeout: float = step_timeout(120.0, " (each command on a node, each wait for the nodes)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the commands; start nothing."),
        netcheck: str = NETCHECK_OPTION,
        as_json: bool = JSON_OPTION,
    ) -> None:
        from llmdeck.cli.cluster_parts import render_event, request, show_up
        from llmdeck.cluster.run import up

        if netcheck not in (None, "gloo", "nccl"):
            from llmdeck.errors import UsageError

            raise UsageError(
                f"--netcheck {netcheck!r} is not gloo or nccl.", hint="Use --netcheck gloo or nccl."
            )
        skip = {"ctx", "dry_run", "as_json", "netcheck"}
        req = request({k: v for k, v in locals().items() if k not in skip})
        settings = get_settings(ctx)
        res = up(req, settings.state_dir, dry_run=dry_run, events=render_event)
        show_up(res, None if dry_run else netcheck, settings, as_json=as_json)


def _lifecycle_commands(group: typer.Typer) -> None:
    @group.command("status")
    def status_cmd(
        ctx: typer.Context,
        timeout: float = step_timeout(30.0, " (here: `ray status`)"),
        as_json: bool = JSON_OPTION,
    ) -> None:
        """The recorded cluster's nodes (alive, pending, failed) and resources, from `ray status`."""
        from llmdeck.cluster.run import status

        kind, address, st = status(get_settings(ctx).state_dir, timeout=timeout)
        if as_json:
            print_json({"kind": kind, "address": address, "nodes_alive": st.nodes_alive, **st.model_dump()})
            return
        out_console().print(
            f"Ray cluster ({kind}) at {address}: {st.nodes_alive} node(s) alive, {len(st.pending)} pending; "
            + ", ".join(f"{k} {v}" for k, v in st.totals.items()),
            highlight=False,
        )

    @group.command("logs")
    def logs_cmd(
        ctx: typer.Context,
        lines: int = typer.Option(50, "--lines", "-n", min=1, help="How many lines a node."),
        timeout: float = step_timeout(30.0, " (here: each node's log)"),
    ) -> None:
        """The Ray log tail of every node of the recorded cluster."""
        from llmdeck.cluster.run import logs

        con = out_console()
        for node, text in logs(get_settings(ctx).state_dir, lines=lines, timeout=timeout):
            con.print(f"[bold]== {node}[/]", highlight=False)
            con.print(text, markup=False, highlight=False)

    @group.command("down")
    def down_cmd(
        ctx: typer.Context,
        grace: float = typer.Option(
            15.0,
            "--grace",
            callback=number(at_least=0, at_most=3600),
            help="Seconds Ray gets before SIGKILL.",
        ),
    ) -> None:
        """Stop the recorded cluster: workers first, then the head (only what llmdeck started). Exit 0
        when none is recorded (nothing to stop), as `llmdeck down --all`."""
        from llmdeck.cluster.run import down

        kind, seconds = down(get_settings(ctx).state_dir, grace=grace)
        if kind == "none":
            err_console().print(
                "No cluster started by llmdeck is recorded here: nothing to stop.", markup=False
            )
            return
        err_console().print(f"Ray cluster ({kind}) stopped in {seconds:.1f} s.", highlight=False)


NETCHECK_HELP = """All-reduce bus bandwidth and latency (torch.distributed; nccl on GPUs, gloo on CPUs)
against what the link should give; exit 1 on a fail, with the fix. nccl-tests' definitions (busbw = algbw x
2(n-1)/n).
"""


def _netcheck_command(group: typer.Typer) -> None:
    @group.command("netcheck", help=NETCHECK_HELP)
    def netcheck_cmd(
        ctx: typer.Context,
        local: int = typer.Option(
            0, "--local", min=0, help="Run N ranks on this machine (else: the cluster)."
        ),
        backend: str = typer.Option("gloo", "--backend", help="gloo (CPU) | nccl (GPU)."),
        link: str = typer.Option(None, "--link", help="cx7-200g | ethernet-100g | ethernet-10g"),
        expect_gbps: float = typer.Option(
            None, "--expect-gbps", callback=number(at_least=0.001, at_most=1e5), help="The link's rated GB/s."
        ),
        max_latency_us: float = typer.Option(
            None, "--max-latency-us", callback=number(at_least=0.1, at_most=1e7), help="Latency limit (µs)."
        ),
        interface: str = typer.Option(None, "--interface", help="Read the rated speed from this interface."),
        result: Path = typer.Option(None, "--result", help="Judge a saved run (its JSON lines)."),
        out: Path = typer.Option(None, "--out", help="Save the run's JSON lines here."),
        master_port: int = typer.Option(29533, "--master-port", min=1, max=65535),
        timeout: float = netcheck_timeout(300.0),
        as_json: bool = JSON_OPTION,
    ) -> None:
        from llmdeck.cli.cluster_parts import netcheck, print_verdict
        from llmdeck.errors import CheckFailedError, UsageError
        from llmdeck.util.atomic import atomic_write_text, check_writable

        if backend not in ("gloo", "nccl"):
            raise UsageError(
                f"--backend {backend!r} is not gloo or nccl.", hint="Use --backend gloo or nccl."
            )
        if out is not None:  # before the test (minutes across boxes): its rows are not lost at the end
            check_writable(out)
        values = {k: v for k, v in locals().items() if k not in {"ctx", "as_json"}}
        verdict, raw = netcheck(values, get_settings(ctx))
        if out is not None and raw:
            atomic_write_text(out, raw)
        print_json(verdict) if as_json else print_verdict(verdict)
        if verdict.verdict == "fail":
            raise CheckFailedError(
                f"The interconnect test failed: {'; '.join(verdict.reasons)}.", hint=verdict.fix
            )
