"""The parts of `llmdeck cluster` below the typer commands: options to a request, results to tables."""

from __future__ import annotations

import os
from typing import Any

from llmdeck.cli.output import err_console, out_console


def _hf_cache(given: str | None) -> str | None:
    """--hf-cache as an absolute path: a leading ~ is this machine's home (the nodes get the path itself:
    a quoted ~ would reach them unexpanded)."""
    from pathlib import PurePosixPath

    from llmdeck.errors import UsageError

    if not given:
        return None
    path = os.path.expanduser(given)
    if not PurePosixPath(path).is_absolute():
        raise UsageError(
            f"--hf-cache {given!r} is not an absolute path.",
            hint="Give the nodes' Hugging Face cache as an absolute path, e.g. --hf-cache /data/hf.",
        )
    if ":" in path:  # docker -v SRC:DST[:MODE]: /a:/etc had mounted /a at /etc with a mode docker refuses
        raise UsageError(
            f"--hf-cache {given!r} holds ':', which docker's -v reads as the end of the path.",
            hint="Give a cache folder whose path has no ':' (a symlink to it will do).",
        )
    return path


def _check_user(destination: str, flag: str) -> None:
    """The user of ``user@host``: a login name; ``user:password@`` is refused without showing it."""
    import re

    from llmdeck.errors import UsageError

    if destination.count("@") != 1:
        return
    user, host = destination.split("@", 1)
    if ":" in user:
        raise UsageError(
            f"{flag} {user.split(':', 1)[0]}:<redacted>@{host} names a password, which ssh does not "
            "take in a destination.",
            hint="Give user@host and let ssh log in with a key (ssh-copy-id user@host).",
        )
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}", user):
        raise UsageError(
            f"{flag} {destination!r}: {user!r} is not a login name.", hint="Give host or user@host."
        )


def _no_brackets(host: str, flag: str) -> None:
    """An IPv6 address as ssh, Ray and NCCL take it: bare (``[fd00::1]`` is a URL's spelling; it had
    gone as is into the ssh destination, VLLM_HOST_IP and --node-ip-address)."""
    from llmdeck.errors import UsageError

    if "[" in host or "]" in host:
        bare = host.replace("[", "").replace("]", "")
        raise UsageError(
            f"{flag} {host!r}: an address in brackets is not a host here.",
            hint=f"Give the IPv6 address without brackets: {flag} {bare}.",
        )


def request(values: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    from llmdeck.cluster.commands import RayOptions, Setup
    from llmdeck.cluster.netenv import NetSpec, validate_link_names
    from llmdeck.cluster.run import ClusterRequest
    from llmdeck.errors import UsageError
    from llmdeck.formats.result_file import first_problem
    from llmdeck.util.hfpaths import default_hf_home
    from llmdeck.util.net import validate_host

    # hosts go to ssh as its destination: [user@]name-or-address only (no "-o…" options, no spaces)
    for flag, hosts in (("--head", [values["head"]]), ("--worker", values["worker"] or [])):
        for h in hosts:
            _check_user(h, flag)
            _no_brackets(h, flag)
            validate_host(h.split("@", 1)[-1] if h.count("@") == 1 and not h.startswith("@") else h, flag)
    for flag, ips in (
        ("--head-ip", [values["head_ip"]] if values["head_ip"] else []),
        ("--worker-ip", values["worker_ip"] or []),
    ):
        for ip in ips:
            _no_brackets(ip, flag)
            validate_host(ip, flag)
    validate_link_names(values["interface"], values["hca"] or [])
    hf_cache = _hf_cache(values["hf_cache"]) or (str(default_hf_home()) if values["docker"] else None)
    try:
        return ClusterRequest(
            head=values["head"],
            workers=values["worker"] or [],
            head_ip=values["head_ip"],
            worker_ips=values["worker_ip"] or [],
            net=NetSpec(
                interface=values["interface"], hcas=values["hca"] or [], gid_index=values["gid_index"]
            ),
            ray=RayOptions(
                port=values["port"],
                num_cpus=values["num_cpus"],
                num_gpus=values["num_gpus"],
                object_store_bytes=_object_store_bytes(values),
            ),
            setup=Setup(
                mode="docker" if values["docker"] else "venv",
                image=values["image"],
                python=values["python"],
                hf_cache=hf_cache,
            ),
            timeout=values["timeout"],
        )
    except ValidationError as exc:
        raise UsageError(
            f"Invalid option {first_problem(exc)}.", hint="See llmdeck cluster up --help."
        ) from exc


def _object_store_bytes(values: dict[str, Any]) -> int:
    """--object-store-mb, else 1 GiB across boxes (the field's launchers) and 100 MB on one machine."""
    from llmdeck.cluster.commands import DEFAULT_OBJECT_STORE_BYTES, is_local

    if values["object_store_mb"] is not None:
        return int(values["object_store_mb"] * 1_000_000)
    local = is_local(values["head"]) and all(is_local(w) for w in values["worker"] or [])
    return 100_000_000 if local else DEFAULT_OBJECT_STORE_BYTES


def render_event(event: Any) -> None:
    """One step of ``cluster up`` (a picked port taken, the head started again) on stderr, as tune's."""
    err_console().print(event.message, markup=False, highlight=False, soft_wrap=True)


def print_up(res: Any) -> None:
    from llmdeck.plan.argv import shell_join

    con = out_console()
    for f in res.net:
        color = {"ok": "green", "warn": "yellow", "fail": "red"}[f.severity]
        con.print(
            f"[{color}]{f.severity:4}[/] {f.check}: {f.message}" + (f" fix: {f.fix}" if f.fix else ""),
            highlight=False,
        )
    for node in res.commands:
        con.print(f"[bold]{node.role} {node.host}[/] ({node.node_ip})", highlight=False)
        for argv in node.up:
            con.print(shell_join(argv), markup=False, highlight=False)
    if res.dry_run:
        con.print("(dry run: nothing was started)")
        return
    alive = res.status.nodes_alive if res.status else 0
    con.print(
        f"Ray cluster ({res.kind}) at {res.address}: {alive} of {res.nodes_expected} nodes alive "
        f"after {res.seconds:.1f} s",
        highlight=False,
    )
    con.print(
        "next: llmdeck cluster netcheck; then on the head, with RAY_ADDRESS="
        f"{res.address}: llmdeck up --model DIR -- --distributed-executor-backend ray "
        f"--tensor-parallel-size {res.nodes_expected}",
        highlight=False,
        markup=False,
    )


def netcheck(values: dict[str, Any], settings: Any) -> Any:
    from llmdeck.cluster import netcheck
    from llmdeck.cluster.netenv import read_speed_mbps, validate_link_names
    from llmdeck.cluster.verdict import judge, load_rows, profile_for

    validate_link_names(values["interface"], [])
    speed = read_speed_mbps(values["interface"]) if values["interface"] else None
    profile = profile_for(values["link"], values["expect_gbps"], speed)
    if values["max_latency_us"] is not None:
        profile = profile.model_copy(update={"max_latency_us": values["max_latency_us"]})
    if values["result"] is not None:
        rows = load_rows(values["result"])
        return judge(rows, profile), None
    if values["local"]:
        _check_local_ranks(values["local"])
        env = {"GLOO_SOCKET_IFNAME": values["interface"]} if values["interface"] else {}
        rows, raw = netcheck.run_local(
            values["local"],
            backend=values["backend"],
            port=values["master_port"],
            timeout=values["timeout"],
            env=env,
        )
        return judge(rows, profile), raw
    return netcheck_cluster(values, settings, profile)


def _check_local_ranks(ranks: int) -> None:
    """Two ranks at least (an all-reduce of one moves nothing), one CPU core each at most: every rank
    is a process holding torch (~150 MB), and more than the cores only measure the scheduler."""
    import os

    from llmdeck.errors import UsageError

    cores = os.cpu_count() or 1
    if ranks < 2 or ranks > max(2, cores):
        raise UsageError(
            f"--local {ranks} is not a number of ranks this machine can test: an all-reduce needs 2 at "
            f"least, and this machine has {cores} CPU core(s) for them.",
            hint=f"Use --local 2 (up to {max(2, cores)}).",
        )


def netcheck_cluster(values: dict[str, Any], settings: Any, profile: Any) -> Any:
    from llmdeck.cluster import netcheck
    from llmdeck.cluster.netenv import NetSpec
    from llmdeck.cluster.run import load_remote
    from llmdeck.cluster.verdict import judge
    from llmdeck.errors import NotRunningError

    rec = load_remote(settings.state_dir)
    if rec is None:
        raise NotRunningError(
            "No multi-node cluster recorded to test.",
            hint="Start one with `llmdeck cluster up --head H --worker W ...` first, or pass --local N to "
            "test this machine.",
        )
    hosts = [n.host for n in rec.commands]
    ips = [n.node_ip for n in rec.commands]
    env = rec.commands[0].env
    net = NetSpec(
        interface=env.get("NCCL_SOCKET_IFNAME"), hcas=[h for h in env.get("NCCL_IB_HCA", "").split(",") if h]
    )
    argvs = netcheck.cluster_argvs(
        hosts, ips, net=net, backend=values["backend"], port=values["master_port"], setup=rec.setup
    )
    rows, raw = netcheck.run_cluster(argvs, timeout=values["timeout"])
    return judge(rows, profile), raw


def print_verdict(v: Any) -> None:
    from rich.table import Table

    con = out_console()
    t = Table(
        title=f"all-reduce ({v.backend}, {v.world_size} ranks) vs {v.profile.name}", header_style="bold"
    )
    for col in ("size", "time", "algbw", "busbw"):
        t.add_column(col, justify="right")
    for r in v.rows:
        t.add_row(
            f"{r.size_bytes:,} B",
            f"{r.time_us:,.1f} µs",
            f"{r.algbw_gbps:.3f} GB/s",
            f"{r.busbw_gbps:.3f} GB/s",
        )
    con.print(t)
    color = {"pass": "green", "warn": "yellow", "fail": "red"}[v.verdict]
    summary = (
        f"bus bandwidth {v.busbw_gbps:.2f} GB/s = {v.share:.0%} of {v.profile.rated_gbytes_s:g} GB/s, "
        f"latency {v.latency_us:.0f} µs"
    )
    con.print(f"[{color}]{v.verdict}[/]: " + ("; ".join(v.reasons) or summary), highlight=False)
    if v.fix:
        con.print(f"fix: {v.fix}", markup=False, highlight=False)


def show_up(res: Any, netcheck: str | None, settings: Any, *, as_json: bool) -> None:
    """The cluster just started, then (``--netcheck``) the all-reduce over it; --json: one document."""
    if not as_json:
        print_up(res)
    elif not netcheck:
        from llmdeck.cli.output import print_json

        print_json(res)
    if netcheck:
        check_after_up(res, netcheck, settings, as_json=as_json)


def check_after_up(res: Any, backend: str, settings: Any, *, as_json: bool) -> None:
    """``cluster up --netcheck``: the all-reduce over the nodes just started; exit 1 with the fix on a
    fail, before anyone starts vLLM on a slow link. --json: the cluster's document with the verdict as
    its "netcheck" (it had been printed without it, the verdict nowhere on stdout)."""
    from llmdeck.errors import CheckFailedError, UsageError

    if backend not in ("gloo", "nccl"):
        raise UsageError(f"--netcheck {backend!r} is not gloo or nccl.", hint="Use --netcheck gloo or nccl.")
    values: dict[str, Any] = {"link": None, "expect_gbps": None, "interface": None, "result": None}
    values["max_latency_us"] = None
    values |= {"backend": backend, "master_port": 29533, "timeout": 300.0}
    values["local"] = res.nodes_expected if res.kind == "local" else 0
    if res.kind == "local":  # one machine: the link is memory; judge against a loopback's share
        values |= {"expect_gbps": 0.05, "max_latency_us": 1e6}
    verdict, _ = netcheck(values, settings)
    if as_json:
        from llmdeck.cli.output import print_json

        print_json({**res.model_dump(mode="json"), "netcheck": verdict.model_dump(mode="json")})
    else:
        print_verdict(verdict)
    if verdict.verdict == "fail":
        raise CheckFailedError(
            f"The interconnect test failed: {'; '.join(verdict.reasons)}.",
            hint=verdict.fix + " The Ray cluster is up; `llmdeck cluster down` stops it.",
        )
