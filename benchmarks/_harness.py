"""Shared harness of the bench benchmarks: run one tool (llmdeck or `vllm bench serve`) on one
workload in a child process and report its metrics and the client's CPU time.

Child mode (``python benchmarks/_harness.py child TOOL OUT.json [workload flags]``) runs the tool
in-process and times the load phase with ``time.process_time()`` (all threads of the client
process): for vLLM the ``benchmark()`` coroutine of ``vllm.benchmarks.serve``, for llmdeck
``ScenarioRun.run`` plus the /metrics + host sampler that runs beside it. Tokenizer loading and
prompt building are outside both phases. The whole child's rusage is reported too.

Worker mode (``python benchmarks/_harness.py worker TOOL``, driven by :class:`Worker`) keeps one
process per tool for a whole block-interleaved benchmark and runs one measurement per stdin line.
Each report also holds the per-request TTFTs in the dataset's order (``ttfts_ms``), so two tools'
runs on the same prompts and send times can be compared request by request.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", default="http://127.0.0.1:8100")
    p.add_argument("--model", default="tiny-qwen3")
    p.add_argument("--tokenizer", default=str(ROOT / ".cache" / "dev-tiny"))
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--num-prompts", type=int, default=24)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=None, help="req/s; default: all at once")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--burstiness",
        type=float,
        default=1.0,
        help="gamma shape of the arrivals at --request-rate (vLLM's --burstiness; 1 = Poisson, higher = "
        "more even gaps, fewer requests arriving within one prefill of each other)",
    )
    p.add_argument(
        "--range-ratio",
        type=float,
        default=0.0,
        help="spread lengths uniformly by this ratio (vLLM's --random-range-ratio); unequal output lengths "
        "keep the requests of a fixed-concurrency run from starting and finishing in lockstep",
    )
    p.add_argument("--no-metrics", action="store_true", help="llmdeck: do not sample /metrics")
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sent by both tools (vLLM's --temperature, llmdeck's --temperature); default: none, the "
        "server's default applies (random sampling). 0 = greedy: on random weights the same prompt then "
        "yields the same tokens, so the MoE routing of the decode steps repeats between the two servings",
    )
    p.add_argument(
        "--no-ready-check",
        action="store_true",
        help="vLLM: --ready-check-timeout-sec 0, no initial test request before the run (it is the run's "
        "first prompt with its full output length: one more request on the server, outside the metrics)",
    )
    p.add_argument(
        "--start-at",
        type=float,
        default=None,
        help="(child) wall-clock time to start the load at, so that two tools can run side by side",
    )


def workload_argv(a: argparse.Namespace) -> list[str]:
    out = [
        "--base-url",
        a.base_url,
        "--model",
        a.model,
        "--tokenizer",
        a.tokenizer,
        "--input-len",
        str(a.input_len),
        "--output-len",
        str(a.output_len),
        "--num-prompts",
        str(a.num_prompts),
        "--seed",
        str(a.seed),
        "--range-ratio",
        str(a.range_ratio),
    ]
    if a.max_concurrency:
        out += ["--max-concurrency", str(a.max_concurrency)]
    if a.request_rate:
        out += ["--request-rate", str(a.request_rate), "--burstiness", str(a.burstiness)]
    if getattr(a, "start_at", None):
        out += ["--start-at", str(a.start_at)]
    if getattr(a, "no_metrics", False):
        out.append("--no-metrics")
    if getattr(a, "temperature", None) is not None:
        out += ["--temperature", str(a.temperature)]
    if getattr(a, "no_ready_check", False):
        out.append("--no-ready-check")
    return out


def run_child(tool: str, a: argparse.Namespace, *, no_metrics: bool = False) -> dict[str, Any]:
    """Run one measurement in a fresh Python process; returns its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "child.json"
        argv = [sys.executable, str(Path(__file__)), "child", tool, str(out), *workload_argv(a)]
        if no_metrics:
            argv.append("--no-metrics")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(
                f"{tool} child failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        report: dict[str, Any] = json.loads(out.read_text())
        return report


# ---- child side ------------------------------------------------------------------------------


def _rusage_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _wait_until(start_at: float | None) -> None:
    if start_at is not None:
        import asyncio

        await asyncio.sleep(max(0.0, start_at - time.time()))


def child_vllm(a: argparse.Namespace) -> dict[str, Any]:
    import vllm.benchmarks.serve as serve

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:  # older vLLM (e.g. 0.22)
        from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef,attr-defined]

    phase: dict[str, float] = {}
    # a worker runs many measurements in one process: always wrap the original coroutine, once
    orig = serve.__dict__.setdefault("_harness_orig_benchmark", serve.benchmark)

    async def timed(*args: Any, **kw: Any) -> Any:
        await _wait_until(a.start_at)
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            return await orig(*args, **kw)
        finally:
            phase["cpu_s"] = time.process_time() - c0
            phase["wall_s"] = time.perf_counter() - w0

    serve.benchmark = timed
    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    with tempfile.TemporaryDirectory() as tmp:
        argv = [
            "--backend",
            "openai",
            "--base-url",
            a.base_url,
            "--endpoint",
            "/v1/completions",
            "--model",
            a.model,
            "--tokenizer",
            a.tokenizer,
            "--dataset-name",
            "random",
            "--random-input-len",
            str(a.input_len),
            "--random-output-len",
            str(a.output_len),
            "--num-prompts",
            str(a.num_prompts),
            "--ignore-eos",
            "--seed",
            str(a.seed),
            "--random-range-ratio",
            str(a.range_ratio),
            "--disable-tqdm",
            "--save-result",
            "--save-detailed",
            "--result-dir",
            tmp,
            "--result-filename",
            "vllm.json",
        ]
        if a.max_concurrency:
            argv += ["--max-concurrency", str(a.max_concurrency)]
        if a.request_rate:
            argv += ["--request-rate", str(a.request_rate), "--burstiness", str(a.burstiness)]
        if a.no_ready_check:
            argv += ["--ready-check-timeout-sec", "0"]
        if a.temperature is not None:
            argv += ["--temperature", str(a.temperature)]
        result = serve.main(parser.parse_args(argv))
        saved = json.loads((Path(tmp) / "vllm.json").read_text())
    if not isinstance(result, dict) or "itls" not in result:
        result = saved
    itls = result.get("itls") or []
    errors = result.get("errors") or [""] * len(itls)
    chunks = sum(len(itl) + 1 for itl, err in zip(itls, errors, strict=False) if not err)
    return {
        "tool": "vllm bench serve",
        "completed": saved["completed"],
        "failed": saved.get("failed", 0),
        "mean_ttft_ms": saved["mean_ttft_ms"],
        "mean_tpot_ms": saved["mean_tpot_ms"],
        "mean_itl_ms": saved["mean_itl_ms"],
        "output_throughput": saved["output_throughput"],
        "duration_s": saved["duration"],
        "total_input_tokens": saved.get("total_input_tokens"),
        "total_output_tokens": saved.get("total_output_tokens"),
        "chunks": chunks,
        "phase_cpu_s": phase.get("cpu_s"),
        "phase_wall_s": phase.get("wall_s"),
        # per request, in the dataset's order (the same prompts and send times as the peer's list)
        "ttfts_ms": [
            round(1000 * t, 3) if not e else None
            for t, e in zip(result.get("ttfts") or [], errors, strict=False)
        ],
    }


_ORIG: dict[str, Any] = {}
_TOKENIZERS: dict[str, Any] = {}


def child_llmdeck(a: argparse.Namespace) -> dict[str, Any]:
    from llmdeck.bench import load as load_mod
    from llmdeck.bench.result_schema import ScenarioSpec, TargetInfo
    from llmdeck.bench.runner import BenchOptions, run_bench
    from llmdeck.bench.verdict import DEFAULT_SLO
    from llmdeck.bench.workloads import load_tokenizer

    phase: dict[str, float] = {}
    orig = _ORIG.setdefault("llmdeck_run", load_mod.ScenarioRun.run)

    async def timed(self: Any) -> float:
        await _wait_until(a.start_at)
        c0, w0 = time.process_time(), time.perf_counter()
        try:
            return await orig(self)
        finally:
            phase["cpu_s"] = time.process_time() - c0
            phase["wall_s"] = time.perf_counter() - w0

    load_mod.ScenarioRun.run = timed  # type: ignore[method-assign]
    tok = _TOKENIZERS.get(a.tokenizer) or _TOKENIZERS.setdefault(a.tokenizer, load_tokenizer(a.tokenizer))
    spec = ScenarioSpec(
        name="agreement",
        input_len=a.input_len,
        output_len=a.output_len,
        num_prompts=a.num_prompts,
        max_concurrency=a.max_concurrency,
        request_rate=a.request_rate,
        burstiness=a.burstiness,
        seed=a.seed,
        range_ratio=a.range_ratio,
        temperature=a.temperature,
    )
    target = TargetInfo(base_url=a.base_url, model=a.model, tokenizer=a.tokenizer)
    opts = BenchOptions(slo=dict(DEFAULT_SLO), scrape_metrics=not a.no_metrics)
    res = run_bench(target, [spec], opts, tokenizer=tok)
    sr = res.scenarios[0]
    m = sr.metrics
    assert m is not None and m.ttft_ms and m.tpot_ms and m.itl_ms
    return {
        "tool": "llmdeck" + (" (no /metrics sampling)" if a.no_metrics else ""),
        "completed": m.completed,
        "failed": m.failed,
        "mean_ttft_ms": m.ttft_ms.mean,
        "mean_tpot_ms": m.tpot_ms.mean,
        "mean_itl_ms": m.itl_ms.mean,
        "output_throughput": m.output_throughput,
        "duration_s": m.duration_s,
        "total_input_tokens": m.total_input_tokens,
        "total_output_tokens": m.total_output_tokens,
        "chunks": sum(r.num_chunks for r in sr.requests if r.ok),
        "prompt_len_mismatches": m.prompt_len_mismatches,
        "phase_cpu_s": phase.get("cpu_s"),
        "phase_wall_s": phase.get("wall_s"),
        "ttfts_ms": [
            round(1000 * r.ttft, 3) if r.ok and r.ttft is not None else None
            for r in sorted(sr.requests, key=lambda r: r.index)
        ],
    }


def child_main(argv: list[str]) -> None:
    tool, out = argv[0], Path(argv[1])
    p = argparse.ArgumentParser()
    add_workload_args(p)
    a = p.parse_args(argv[2:])
    rep = child_vllm(a) if tool == "vllm" else child_llmdeck(a)
    rep["process_cpu_s"] = _rusage_cpu()
    out.write_text(json.dumps(rep))


DONE = "@@harness-done@@"


def worker_main(tool: str) -> None:
    """A long-lived child: one JSON job per stdin line ({"argv": [...], "out": path}); each result is
    written to its path, then DONE is printed. The tool's imports, tokenizer and code paths are paid
    once, not per block (a fresh `vllm bench serve` process costs ~15 s before its first request)."""
    import traceback

    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        out = Path(job["out"])
        try:
            p = argparse.ArgumentParser()
            add_workload_args(p)
            a = p.parse_args(job["argv"])
            c0 = _rusage_cpu()
            rep = child_vllm(a) if tool == "vllm" else child_llmdeck(a)
            rep["process_cpu_s"] = _rusage_cpu() - c0  # this job's share of the worker's CPU time
        except Exception:  # reported to the parent, which raises it
            rep = {"error": traceback.format_exc()}
        out.write_text(json.dumps(rep))
        print(DONE, flush=True)


class Worker:
    """Parent side of worker_main: ``Worker("vllm").run(namespace)`` returns the same report as
    run_child, from one process kept for the whole benchmark."""

    def __init__(self, tool: str, log: Path | None = None) -> None:
        self.tool = tool
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        self._tmp = tempfile.TemporaryDirectory()
        self._log = open(log or Path(self._tmp.name) / "worker.log", "a")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "worker", tool],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self._n = 0

    def run(self, a: argparse.Namespace) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._n += 1
        out = Path(self._tmp.name) / f"job{self._n}.json"
        self.proc.stdin.write(json.dumps({"argv": workload_argv(a), "out": str(out)}) + "\n")
        self.proc.stdin.flush()
        tail: list[str] = []
        for line in self.proc.stdout:
            if line.strip() == DONE:
                break
            tail = [*tail, line][-50:]
        else:
            raise RuntimeError(f"{self.tool} worker died (rc {self.proc.wait()}):\n{''.join(tail)}")
        rep: dict[str, Any] = json.loads(out.read_text())
        if "error" in rep:
            raise RuntimeError(f"{self.tool} worker job failed:\n{rep['error']}")
        return rep

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()
        self._tmp.cleanup()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        child_main(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker_main(sys.argv[2])
    else:
        sys.exit("usage: _harness.py child TOOL OUT.json [workload flags] | _harness.py worker TOOL")
