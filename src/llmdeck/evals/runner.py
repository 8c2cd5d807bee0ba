"""`llmdeck eval`: each task (x --repeat) in a fresh scratch workspace, the real agent headless against
the server, then the hidden tests; the server's /metrics sampled the whole time.

Before any agent runs, every task's reference solution is run against its hidden tests here (a second
or two each): that gives the hidden test ids every run is scored on, and shows a broken environment
(no numpy, no pytest) before an hour of agent time. The result file is rewritten atomically after every
task run; an interrupted eval keeps every finished run and marks the rest.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from llmdeck.bench.monitor import Monitor, host_facts
from llmdeck.bench.result_schema import TargetInfo
from llmdeck.bench.runner import probe_target
from llmdeck.client.errors import ClientEndpointError
from llmdeck.client.openai import OpenAIClient
from llmdeck.client.prom import parse_metrics
from llmdeck.client.types import Timeouts
from llmdeck.errors import MissingDependencyError, OperationError
from llmdeck.evals.agents import AgentSetup, client_version, opencode_config_path, prepare_home
from llmdeck.evals.results import (
    EVAL_RESULT_KIND,
    EvalResult,
    ModelUnreached,
    TaskInfo,
    TaskRun,
    TurnRecord,
    summarize,
)
from llmdeck.evals.session import diff_stat, init_repo, keep_run, run_agent
from llmdeck.evals.spec import AgentLimits, EvalTask
from llmdeck.evals.verifier import prepare_workspace, run_hidden_tests
from llmdeck.util.atomic import atomic_write_json
from llmdeck.util.owned import json_kind_is, refuse_foreign_file

if TYPE_CHECKING:
    from llmdeck.settings import Settings


class EvalInterrupted(OperationError):
    exit_code = 130


class Progress(Protocol):
    def message(self, text: str) -> None: ...
    def run_start(self, run: TaskRun, index: int, total: int) -> None: ...
    def turn(self, run: TaskRun, turn: TurnRecord) -> None: ...
    def run_end(self, run: TaskRun) -> None: ...


@dataclass
class EvalOptions:
    client: str
    binary: Path
    model: str | None = None
    api_key: str | None = None
    repeat: int = 1
    out_path: Path | None = None
    python: str = field(default_factory=lambda: sys.executable)
    thinking: str = "server"
    limits: dict[str, Any] = field(default_factory=dict)  # overrides of every task's [agent] limits
    keep_dir: Path | None = None  # keep each run's workspace under this folder
    suite: str | None = None
    request: dict[str, Any] | None = None
    probe_timeout: float = 30.0  # each question to the server before the tasks (/v1/models, connect's)


def check_pytest(python: str) -> None:
    import subprocess

    try:
        res = subprocess.run([python, "-c", "import pytest"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingDependencyError(f"Cannot run {python} ({exc}).", hint="Pass --python PATH.") from exc
    if res.returncode != 0:
        raise MissingDependencyError(
            f"The hidden tests run with pytest, which {python} cannot import.",
            hint="pip install 'llmdeck[eval]' (or pytest), or pass --python with one that has it.",
        )


def _task_info(task: EvalTask, limits: AgentLimits, python: str) -> TaskInfo:
    info = TaskInfo(
        name=task.name,
        description=task.config.metadata.description,
        category=task.config.metadata.category,
        source=task.config.metadata.source,
        prompts=len(task.prompts),
        limits=limits,
    )
    has_ref = task.solution_dir.is_dir()
    with tempfile.TemporaryDirectory(prefix="llmdeck-ref-") as tmp:
        ws = prepare_workspace(task, Path(tmp) / "ref", task.solution_dir if has_ref else None)
        ref = run_hidden_tests(task, ws, python=python)
    info.hidden_tests = [t.id for t in ref.tests]
    if not has_ref:
        info.reference_note = "the task has no solution/: its hidden tests were not checked"
    elif ref.all_passed:
        info.reference_ok = True
    else:
        info.reference_ok = False
        bad = [f"{t.id} ({t.outcome})" for t in ref.tests if t.outcome != "passed"]
        info.reference_note = ("fails " + ", ".join(bad) if bad else ref.output_tail[-300:].strip())[:1000]
    return info


def _limits(task: EvalTask, overrides: dict[str, Any]) -> AgentLimits:
    return task.config.agent.model_copy(update={k: v for k, v in overrides.items() if v is not None})


async def _connect_opencode(target: TargetInfo, options: EvalOptions, settings: Settings, home: Path) -> None:
    """opencode's config as `llmdeck connect opencode` writes it, in the agent's scratch home."""
    from llmdeck.connect import connect_client, gather_info

    info = await asyncio.to_thread(
        gather_info,
        target.base_url,
        model=target.model,
        api_key=options.api_key,
        settings=settings,
        timeout=options.probe_timeout,
        client="opencode",
    )
    setup = AgentSetup(home, home, target.base_url, target.model, None, options.binary, "")
    path = opencode_config_path(setup)
    path.parent.mkdir(parents=True, exist_ok=True)
    connect_client("opencode", info, file=path, thinking=options.thinking)


def _home_setup(target: TargetInfo, options: EvalOptions, home: Path) -> AgentSetup:
    return AgentSetup(
        home,
        home,
        target.base_url,
        target.model,
        options.api_key,
        options.binary,
        "",
        max_model_len=target.max_model_len,
    )


_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{([^}\n]*)\}", re.M)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
CACHE_KEYS = (
    "cache_dtype",
    "block_size",
    "enable_prefix_caching",
    "gpu_memory_utilization",
    "num_gpu_blocks",
)


async def _cache_config(client: OpenAIClient) -> dict[str, str] | None:
    """The KV-cache settings vLLM publishes on /metrics (labels of ``vllm:cache_config_info``)."""
    try:
        text = await client.metrics_text()
    except Exception:
        return None
    m = _CACHE_INFO.search(text or "")
    if m is None:
        return None
    labels = dict(_LABEL.findall(m.group(1)))
    return {k: labels[k] for k in CACHE_KEYS if k in labels}


def _is_random_model(target: TargetInfo) -> bool | None:
    """llmdeck's tiny model, or a server started with ``--load-format dummy`` (random weights of a real
    shape, as on the H200): True. Unknown (a URL, a real checkpoint): None or False."""
    from llmdeck.model.tiny import is_tiny_model

    args = target.server_args or []
    if "--load-format=dummy" in args or any(
        a == "--load-format" and b == "dummy" for a, b in itertools.pairwise(args)
    ):
        return True
    root = Path(target.tokenizer) if target.tokenizer else None
    if root is None or not root.is_dir():
        return None
    return is_tiny_model(root) or _config_without_weights(root)


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf")


def _config_without_weights(folder: Path) -> bool:
    """The folder the server names (on this host) has a config.json and no weight file: vLLM can only
    have served it with random weights (``--load-format dummy``, as gpu-lab does on the H200)."""
    has_config = (folder / "config.json").is_file()
    return has_config and not any(next(folder.glob(p), None) for p in WEIGHT_FILES)


class _Writer:
    def __init__(self, path: Path | None, result: EvalResult) -> None:
        self.path, self.result = path, result

    def write(self) -> None:
        self.result.summary = summarize(self.result)
        if self.path is not None:
            atomic_write_json(self.path, self.result)


async def run_eval(
    tasks: list[EvalTask],
    target: TargetInfo,
    options: EvalOptions,
    settings: Settings,
    progress: Progress | None = None,
) -> EvalResult:
    if options.out_path is not None:
        refuse_foreign_file(options.out_path, "eval result", json_kind_is(EVAL_RESULT_KIND))
    await asyncio.to_thread(check_pytest, options.python)
    timeouts = Timeouts(probe=options.probe_timeout)
    async with OpenAIClient(target.base_url, api_key=options.api_key, timeouts=timeouts) as client:
        try:
            await probe_target(client, target)
        except ClientEndpointError as exc:  # bench's wording, said for an eval
            raise exc.reworded(exc.message.replace("Cannot bench", "Cannot run the eval against", 1)) from exc
        result = EvalResult(
            client=options.client,
            client_version=await asyncio.to_thread(client_version, options.binary),
            target=target,
            host=host_facts(),
            suite=options.suite,
            thinking=options.thinking,
            request=options.request,
        )
        result.summary.random_weights = _is_random_model(target)
        result.server_cache_config = await _cache_config(client)
        if progress:
            progress.message(
                f"checking the {len(tasks)} task(s)' reference solutions against their hidden tests"
            )
        for task in tasks:
            limits = _limits(task, options.limits)
            result.tasks.append(await asyncio.to_thread(_task_info, task, limits, options.python))
        result.runs = [TaskRun(task=t.name, repeat=r) for r in range(1, options.repeat + 1) for t in tasks]
        writer = _Writer(options.out_path, result)
        writer.write()
        with tempfile.TemporaryDirectory(prefix="llmdeck-eval-") as tmp:
            home = Path(tmp) / "home"
            home.mkdir()
            if options.client == "opencode":
                await _connect_opencode(target, options, settings, home)
            else:
                prepare_home(options.client, _home_setup(target, options, home))
            await _run_all(client, tasks, result, options, home, Path(tmp), writer, progress)
    return result


async def _run_all(
    client: OpenAIClient,
    tasks: list[EvalTask],
    result: EvalResult,
    options: EvalOptions,
    home: Path,
    tmp: Path,
    writer: _Writer,
    progress: Progress | None,
) -> None:
    by_name = {t.name: t for t in tasks}
    infos = {i.name: i for i in result.tasks}
    try:
        for n, run in enumerate(result.runs):
            if progress:
                progress.run_start(run, n, len(result.runs))
            run.status, run.started_at = "running", datetime.now(UTC)
            writer.write()  # the file says which run is under way
            await _run_one(
                client, by_name[run.task], infos[run.task], run, result, options, home, tmp, progress
            )
            writer.write()
            if progress:
                progress.run_end(run)
        result.status = "complete"
    except (asyncio.CancelledError, KeyboardInterrupt):
        result.status, result.error = "interrupted", "The eval was interrupted."
        for run in result.runs:
            if run.status in ("pending", "running"):
                run.status = "interrupted"
        raise
    except Exception as exc:  # the agent could not start, the server went away …: keep what ran
        result.status, result.error = "aborted", f"The eval stopped: {exc}"
        for run in result.runs:
            if run.status == "running":
                run.status, run.error = "error", str(exc)
        raise
    finally:
        result.finished_at = datetime.now(UTC)
        writer.write()


async def _run_one(
    client: OpenAIClient,
    task: EvalTask,
    info: TaskInfo,
    run: TaskRun,
    result: EvalResult,
    options: EvalOptions,
    home: Path,
    tmp: Path,
    progress: Progress | None,
) -> None:
    if info.reference_ok is False:
        run.status, run.error = "error", f"not run: the reference solution fails here ({info.reference_note})"
        return
    ws = prepare_workspace(task, tmp / f"{task.name}-{run.repeat}")
    await asyncio.to_thread(init_repo, ws)
    target = result.target
    setup = AgentSetup(
        ws,
        home,
        target.base_url,
        target.model,
        options.api_key,
        options.binary,
        str(Path(options.python).parent),
        log_dir=tmp / f"logs-{task.name}-{run.repeat}",
        max_model_len=target.max_model_len,
    )
    monitor = Monitor(client, interval_s=2.0)
    await monitor.start()
    turns = _TurnMeter(client, run, progress)
    await turns.start()
    try:
        run.agent = await run_agent(
            options.client, setup, task.prompts, info.limits, turns.on_turn, version=result.client_version
        )
    finally:
        try:
            run.server_metrics, run.host = await asyncio.wait_for(monitor.stop(), timeout=5.0)
        except (TimeoutError, asyncio.CancelledError):
            run.server_metrics, run.host = monitor.summaries()
    run.agent.diff_stat = await asyncio.to_thread(diff_stat, ws)
    agent = run.agent
    if agent.unreached is None and agent.limit_hit is None and not agent.turns and agent.tokens.total == 0:
        agent.unreached = ModelUnreached(kind="no_request", message=agent.stderr_tail[-300:].strip())
    if agent.unreached is not None:  # nothing the model did is in the workspace: not scored
        run.status, run.error = "unreachable", agent.unreached.sentence()
        keep_run(ws, setup.logs, options.keep_dir, run)
        return
    run.tests = await asyncio.to_thread(
        run_hidden_tests, task, ws, python=options.python, expected=info.hidden_tests or None
    )
    run.passed = run.tests.all_passed
    run.score = 1.0 if run.passed else 0.0
    run.tests_fraction = round(run.tests.passed / run.tests.total, 4) if run.tests.total else 0.0
    run.status = "done"
    keep_run(ws, setup.logs, options.keep_dir, run)


class _TurnMeter:
    """At every turn's end: the server's TTFT histogram since the previous turn (its own mean TTFT)."""

    def __init__(self, client: OpenAIClient, run: TaskRun, progress: Progress | None) -> None:
        self.client, self.run, self.progress = client, run, progress
        self.last: tuple[float, float] | None = None

    async def _ttft(self) -> tuple[float, float] | None:
        try:
            text = await self.client.metrics_text()
        except Exception:
            return None
        snap = parse_metrics(text or "", time.perf_counter())
        s, c = snap.values.get("ttft_sum"), snap.values.get("ttft_count")
        return (s, c) if s is not None and c is not None else None

    async def start(self) -> None:
        self.last = await self._ttft()

    async def on_turn(self, turn: TurnRecord) -> None:
        now = await self._ttft()
        if now is not None and self.last is not None and now[1] > self.last[1]:
            n = now[1] - self.last[1]
            turn.server_ttft_ms = round(1000.0 * (now[0] - self.last[0]) / n, 2)
            turn.server_requests = int(n)
        if now is not None:
            self.last = now
        if self.progress:
            self.progress.turn(self.run, turn)
