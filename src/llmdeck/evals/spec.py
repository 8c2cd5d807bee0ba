"""Eval tasks as data: one folder per task, in harbor's layout where it fits.

A task folder holds ``task.toml`` (metadata, the agent's limits, the verifier's timeout, what the seeded
wrong solution must fail), ``instruction.md`` (the first prompt), ``followups/NN.md`` (later turns, sent in
the same session), ``workspace/`` (the starting files: harbor's ``environment/`` is a container build
context, here the agent runs on the host in a scratch copy), ``tests/`` (hidden pytest files the agent
never sees), ``solution/`` (files laid over the workspace: the reference) and ``wrong/`` (the same for a
seeded wrong solution). Suites are lists of task names in ``tasks/suites.toml``.
"""

from __future__ import annotations

import difflib
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field

from llmdeck.errors import UsageError
from llmdeck.formats.eval_task import read_task_folder

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
SUITES_FILE = TASKS_DIR / "suites.toml"
MAX_TIMEOUT_S = 30 * 86400.0  # a task's or its tests' wall time: as --task-timeout (inf never ended)


class TaskMeta(BaseModel):
    description: str = ""
    category: str = ""
    difficulty: str = ""
    tags: list[str] = Field(default_factory=list)
    source: str = ""


class AgentLimits(BaseModel):
    """What the agent may spend on the task; the harness stops it at the first one reached."""

    timeout_sec: float = Field(
        900.0,
        gt=0,
        le=MAX_TIMEOUT_S,
        allow_inf_nan=False,
        description="Wall time for all of the task's turns.",
    )
    max_turns: int = Field(30, ge=1, description="Model requests (agent steps) over all prompts.")
    max_tokens: int = Field(300_000, ge=1, description="Prompt + output tokens over all steps.")


class VerifierSpec(BaseModel):
    timeout_sec: float = Field(
        120.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, description="Wall time of the hidden tests."
    )


class WrongSpec(BaseModel):
    description: str = ""
    must_fail: list[str] = Field(default_factory=list, description="Hidden test ids it must fail.")


class TaskFile(BaseModel):
    """``task.toml`` as written (harbor's keys, plus the agent limits and ``[wrong]``)."""

    version: str = "1.0"
    metadata: TaskMeta = Field(default_factory=TaskMeta)
    agent: AgentLimits = Field(default_factory=AgentLimits)
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    wrong: WrongSpec | None = None


class EvalTask(BaseModel):
    """A loaded task: its files and its prompts."""

    name: str
    root: Path
    config: TaskFile
    instruction: str
    followups: list[str] = Field(default_factory=list)

    @property
    def prompts(self) -> list[str]:
        return [self.instruction, *self.followups]

    @property
    def workspace_dir(self) -> Path:
        return self.root / "workspace"

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"

    @property
    def solution_dir(self) -> Path:
        return self.root / "solution"

    @property
    def wrong_dir(self) -> Path:
        return self.root / "wrong"


def load_task(root: Path) -> EvalTask:
    """Read a task folder; ConfigError (exit 2) saying what is missing or wrong."""
    root = Path(root)
    config, instruction, followups = read_task_folder(root, TaskFile)
    return EvalTask(
        name=root.name or root.resolve().name,
        root=root,
        config=config,
        instruction=instruction,
        followups=followups,
    )


def builtin_task_names() -> list[str]:
    return sorted(p.name for p in TASKS_DIR.iterdir() if (p / "task.toml").is_file())


def suites() -> dict[str, tuple[str, list[str]]]:
    """Suite name -> (description, task names), from tasks/suites.toml."""
    raw = tomllib.loads(SUITES_FILE.read_text(encoding="utf-8")).get("suites", {})
    return {
        name: (str(s.get("description", "")), [str(t) for t in s.get("tasks", [])]) for name, s in raw.items()
    }


def _unknown(kind: str, given: str, known: list[str], hint: str) -> UsageError:
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6)
    maybe = f" Did you mean {close[0]!r}?" if close else ""
    return UsageError(f"Unknown eval {kind} {given!r} (known: {', '.join(known)}).{maybe}", hint=hint)


def find_task(name: str) -> EvalTask:
    """A built-in task by name, or a task folder by path (one that holds task.toml)."""
    path = Path(name).expanduser()
    if ("/" in name or name.startswith(".")) and path.is_dir():
        return load_task(path)
    if name in builtin_task_names():
        return load_task(TASKS_DIR / name)
    raise _unknown(
        "task", name, builtin_task_names(), "Run `llmdeck eval tasks` to list them, or give a task folder."
    )


def find_suite(name: str) -> list[EvalTask]:
    known = suites()
    if name not in known:
        raise _unknown("suite", name, sorted(known), "Run `llmdeck eval tasks` to list them.")
    return [find_task(t) for t in known[name][1]]


def select_tasks(task: list[str] | None, suite: str | None) -> list[EvalTask]:
    """--task (repeatable) or --suite; exactly one of the two."""
    if bool(task) == bool(suite):
        raise UsageError(
            "Give either --task NAME (repeatable) or --suite NAME.",
            hint="List the tasks and suites with `llmdeck eval tasks`.",
        )
    if suite:
        return find_suite(suite)
    return [find_task(t) for t in task or []]
