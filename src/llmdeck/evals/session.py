"""One agent on one task: every prompt in turn, in the same session, under the task's limits.

The agent runs in its own process session; its stdout is read line by line as it comes. Each turn it
ends (a model request) is recorded and the server's /metrics are read, which gives the server's own
TTFT for that turn. The first limit reached (wall time, turns, tokens) stops the agent: its process group
gets SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import BinaryIO

from llmdeck.errors import OperationError
from llmdeck.evals.agentbase import scrub_secrets
from llmdeck.evals.agents import (
    AgentSetup,
    StreamState,
    agent_env,
    argv_for,
    clip,
    feed,
    needs_session,
    shown_argv,
)
from llmdeck.evals.results import AgentRun, LimitHit, TaskRun, TranscriptEntry, TranscriptKind, TurnRecord
from llmdeck.evals.spec import AgentLimits
from llmdeck.util import leash
from llmdeck.util.procgroup import signal_group

LINE_LIMIT = 32 * 1024 * 1024  # one JSON event can carry a whole file a tool read
GRACE_S = 5.0
DRAIN_S = 2.0  # after the agent exits, its output is read this long at most
OnTurn = Callable[[TurnRecord], Awaitable[None]]


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM to the agent's process group, SIGKILL if it is still there after GRACE_S."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        signal_group(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), GRACE_S)
            return
        except TimeoutError:
            continue


def _limit(run: AgentRun, limits: AgentLimits) -> LimitHit | None:
    if len(run.turns) >= limits.max_turns:
        return "turns"
    if run.tokens.total >= limits.max_tokens:
        return "tokens"
    return None


async def _one_prompt(
    client: str,
    setup: AgentSetup,
    state: StreamState,
    argv: list[str],
    deadline: float,
    t0: float,
    limits: AgentLimits,
    on_turn: OnTurn,
) -> tuple[int | None, LimitHit | None]:
    stderr_path = setup.logs / f"agent-stderr-{state.prompt + 1}.txt"
    raw_path = setup.logs / f"agent-stdout-{state.prompt + 1}.txt"
    with stderr_path.open("wb") as err, raw_path.open("wb") as raw:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=setup.workspace,
                env=agent_env(setup, client),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
                limit=LINE_LIMIT,
            )
        except OSError as exc:
            raise OperationError(
                f"Cannot start {client} ({argv[0]}): {exc.strerror or exc}.",
                hint="Check the client's installation, or pass --agent-bin PATH.",
            ) from exc
        leash.hold(proc.pid, GRACE_S)  # killed outright, the eval leaves no agent behind
        hit: LimitHit | None = None
        try:
            hit = await _read(client, proc, state, deadline, t0, limits, on_turn, raw)
            if state.run.unreached is not None:
                pass  # no answer will come: stopped at once (below), not waited for
            elif hit is None and not await _exited_in_time(proc, deadline):
                hit = "time"
        finally:
            if proc.returncode is None:
                await _stop(proc)
            else:  # what it left running in its group (a dev server, a watcher) would edit the copy on
                signal_group(proc.pid, signal.SIGKILL)  # while it is scored
            leash.let_go(proc.pid)
    state.run.stderr_tail = clip(stderr_path.read_text(errors="replace")[-3000:], 3000)
    return proc.returncode, hit


async def _exited_in_time(proc: asyncio.subprocess.Process, deadline: float) -> bool:
    """After its output ended: did the agent exit before the deadline?"""
    try:
        await asyncio.wait_for(proc.wait(), max(0.1, deadline - time.monotonic()))
    except TimeoutError:
        return False
    return True


async def _read(
    client: str,
    proc: asyncio.subprocess.Process,
    state: StreamState,
    deadline: float,
    t0: float,
    limits: AgentLimits,
    on_turn: OnTurn,
    tee: BinaryIO,
) -> LimitHit | None:
    assert proc.stdout is not None
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if exited_at is None and proc.returncode is not None:
            exited_at = now  # what it left running may hold its output open: read DRAIN_S more, no longer
        left = (deadline if exited_at is None else min(deadline, exited_at + DRAIN_S)) - now
        if left <= 0:
            return "time" if exited_at is None else None
        try:
            raw = await asyncio.wait_for(proc.stdout.readline(), min(left, 1.0))
        except TimeoutError:
            continue  # (and look again whether the agent has exited)
        except ValueError:  # a line over LINE_LIMIT: skip what is buffered and go on
            continue
        if not raw:
            return None
        tee.write(raw)
        turn = feed(client, state, raw.decode("utf-8", errors="replace"), time.monotonic() - t0)
        if state.run.unreached is not None:
            return None  # the client cannot reach the model: its retries would only spend the time
        if turn is not None:
            await on_turn(turn)
            hit = _limit(state.run, limits)
            if hit is not None:
                return hit


def _why_stopped(
    client: str, run: AgentRun, code: int | None, hit: LimitHit | None, limits: AgentLimits
) -> tuple[TranscriptKind, str] | None:
    """Why no further prompt is sent: the model is out of reach, a limit, the client's exit code."""
    if run.unreached is not None:
        return "unreachable", f"stopped: {run.unreached.sentence()}"
    if hit is not None:
        run.limit_hit = hit
        what = {
            "time": f"{limits.timeout_sec:g} s",
            "turns": f"{limits.max_turns} turns",
            "tokens": f"{limits.max_tokens} tokens",
        }[hit]
        return "limit", f"stopped: the task's limit of {what} was reached"
    if code != 0:
        return "exit", f"{client} exited with {code}"
    return None


async def run_agent(
    client: str,
    setup: AgentSetup,
    prompts: list[str],
    limits: AgentLimits,
    on_turn: OnTurn,
    *,
    version: str | None = None,
) -> AgentRun:
    """Send ``prompts`` one after another (follow-ups to the same session) until done or a limit."""
    run = AgentRun(client=client, client_version=version)
    state = StreamState(run=run)
    t0 = time.monotonic()
    deadline = t0 + limits.timeout_sec
    try:
        for i, prompt in enumerate(prompts):
            state.prompt = i
            run.transcript.append(
                TranscriptEntry(t_s=round(time.monotonic() - t0, 3), prompt=i, kind="prompt", text=prompt)
            )
            argv = argv_for(client, setup, prompt, i, run.session_id)
            if i == 0:
                run.argv = shown_argv(argv, prompt)
            code, hit = await _one_prompt(client, setup, state, argv, deadline, t0, limits, on_turn)
            run.exit_codes.append(code)
            stop = _why_stopped(client, run, code, hit, limits)
            if stop is not None:
                kind, text = stop
                t = round(time.monotonic() - t0, 3)
                run.transcript.append(TranscriptEntry(t_s=t, prompt=i, kind=kind, text=clip(text)))
                break
            if needs_session(client) and run.session_id is None:
                break  # no session to send a follow-up to
    finally:
        run.wall_s = round(time.monotonic() - t0, 3)
        scrub_secrets(run, setup.api_key)
    return run


def git(workspace: Path, *args: str) -> str:
    """A git command in the scratch workspace (its own identity; no hooks, no global config)."""
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    res = subprocess.run(
        [
            "git",
            "-c",
            "user.name=llmdeck",
            "-c",
            "user.email=eval@llmdeck.invalid",
            "-c",
            "core.hooksPath=/dev/null",
            *args,
        ],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return res.stdout


def init_repo(workspace: Path) -> None:
    """The starting workspace as one commit: agents expect a repository, and the diff is recorded."""
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "task start", "--no-gpg-sign")


def diff_stat(workspace: Path) -> str:
    git(workspace, "add", "-A")
    return clip(git(workspace, "diff", "--cached", "--stat"), 3000)


def keep_run(ws: Path, logs: Path, keep_dir: Path | None, run: TaskRun) -> None:
    """--keep DIR: the final workspace (DIR/TASK-N/workspace) and the agent's raw output (DIR/TASK-N/logs).

    Only folders llmdeck made are reused (a rerun into the same DIR), and only the files it wrote there
    are replaced: what the user added to a kept run (notes, a fix tried by hand) stays."""
    if keep_dir is None:
        return
    from llmdeck.util.owned import clear_made_dir, mark_made, seal_made

    dest = keep_dir / f"{run.task}-{run.repeat}"
    clear_made_dir(dest, "kept eval workspace")  # refuses a folder llmdeck did not make
    mark_made(dest, "kept eval workspace", private=True)  # the agent's output: it ran with the key
    shutil.copytree(ws, dest / "workspace", symlinks=True, dirs_exist_ok=True)
    shutil.copytree(logs, dest / "logs", dirs_exist_ok=True)
    seal_made(dest)
