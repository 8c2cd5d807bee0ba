"""The hidden tests: run with pytest in a fresh copy of a workspace, in their own process and session.

The agent's workspace is copied (without ``.git`` and caches) to a new temporary folder, the task's
``tests/`` go in as ``_hidden_tests/`` with a pytest.ini of their own (so no config or conftest.py the
agent wrote applies), and pytest runs there under the task's timeout; the whole process group is killed
when it runs over. Per-test outcomes come from pytest's JUnit XML, written outside the copy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from llmdeck.evals.spec import EvalTask
from llmdeck.util import leash
from llmdeck.util.procgroup import signal_group

HIDDEN_DIR = "_hidden_tests"
COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", "*.pyc", ".llmdeck-*")
Outcome = Literal["passed", "failed", "error", "skipped"]
OUTPUT_TAIL_BYTES = 64 * 1024  # of the tests' output, kept (the result keeps its last 3000 characters)
READ_GRACE_S = 5.0


class TestOutcome(BaseModel):
    __test__ = False  # not a pytest class

    id: str
    outcome: Outcome
    message: str | None = None


class VerifierRun(BaseModel):
    """One run of a task's hidden tests against one workspace."""

    tests: list[TestOutcome] = Field(default_factory=list)
    passed: int = 0
    total: int = 0
    exit_code: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    output_tail: str = ""

    @property
    def all_passed(self) -> bool:
        return self.total > 0 and self.passed == self.total

    def outcome_of(self, test_id: str) -> Outcome | None:
        return next((t.outcome for t in self.tests if t.id == test_id), None)


def lay_over(src: Path, dest: Path) -> None:
    """Copy the files of ``src`` over ``dest`` (a solution over a workspace)."""
    if src.is_dir():
        shutil.copytree(src, dest, dirs_exist_ok=True, ignore=COPY_IGNORE)


def prepare_workspace(task: EvalTask, dest: Path, overlay: Path | None = None) -> Path:
    """The task's starting workspace in ``dest`` (a new folder), with ``overlay`` laid over it."""
    shutil.copytree(task.workspace_dir, dest, ignore=COPY_IGNORE)
    if overlay is not None:
        lay_over(overlay, dest)
    return dest


def _clean_env(workspace: Path, home: Path) -> dict[str, str]:
    """The tests' environment: no PYTHON* variables of ours, the workspace on the path, a scratch home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(workspace), PYTHONDONTWRITEBYTECODE="1", HOME=str(home), PYTHONHASHSEED="0")
    return env


def _pytest(python: str, ws: Path, junit: Path, timeout: float) -> tuple[int | None, bool, str]:
    argv = [
        python, "-m", "pytest", HIDDEN_DIR, "-q", "-rfE", "-p", "no:cacheprovider",
        "-c", f"{HIDDEN_DIR}/pytest.ini", "--confcutdir", HIDDEN_DIR, f"--junitxml={junit}",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        cwd=ws,
        env=_clean_env(ws, junit.parent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    leash.hold(proc.pid, 0.0)  # killed outright, the eval leaves no tests behind
    tail = _Tail(proc)
    try:
        proc.wait(timeout=timeout)
        return proc.returncode, False, tail.text()
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.wait()
        return None, True, tail.text()
    except BaseException:  # Ctrl-C or SIGTERM: the tests (their own session) must not outlive the eval
        _kill_group(proc)
        raise
    finally:
        leash.let_go(proc.pid)


class _Tail:
    """The last OUTPUT_TAIL_BYTES of the tests' output, read as it comes: a test printing gigabytes had
    all of them held in memory (several times over) until pytest ended."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc, self.data = proc, bytearray()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout as out, contextlib.suppress(OSError, ValueError):
            while chunk := os.read(out.fileno(), 1 << 16):
                self.data += chunk
                del self.data[:-OUTPUT_TAIL_BYTES]

    def text(self) -> str:
        """The tail once the output ends (bounded: a child that keeps the pipe open is killed)."""
        self.thread.join(READ_GRACE_S)
        if self.thread.is_alive():
            _kill_group(self.proc)
            self.thread.join(READ_GRACE_S)
        return bytes(self.data).decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    signal_group(proc.pid, signal.SIGKILL)


def _remove(path: Path) -> None:
    """What the agent left at ``path`` in the copy: a folder, a file or a symlink (never followed; a link
    to a folder had made rmtree raise and the eval stop as an internal error)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def parse_junit(path: Path) -> list[TestOutcome]:
    """Per-test outcomes of pytest's JUnit XML (missing or broken file: none)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    out: list[TestOutcome] = []
    for case in root.iter("testcase"):
        name = case.get("name") or case.get("classname") or "?"
        outcome: Outcome = "passed"
        message = None
        for child, kind in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = case.find(child)
            if el is not None:
                outcome = kind  # type: ignore[assignment]
                message = (el.get("message") or "")[:500] or None
                break
        out.append(TestOutcome(id=name, outcome=outcome, message=message))
    return out


def run_hidden_tests(
    task: EvalTask, workspace: Path, *, python: str, expected: list[str] | None = None
) -> VerifierRun:
    """The task's hidden tests against a fresh copy of ``workspace``.

    ``expected``: the test ids the reference solution has; any of them missing from this run (the module
    under test would not import, the run timed out) counts as an error, so every run has the same total.
    """
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llmdeck-verify-") as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(workspace, ws, ignore=COPY_IGNORE, symlinks=True)
        hidden = ws / HIDDEN_DIR
        _remove(hidden)
        shutil.copytree(task.tests_dir, hidden, ignore=COPY_IGNORE)
        (hidden / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        junit = Path(tmp) / "junit.xml"
        code, timed_out, out = _pytest(python, ws, junit, task.config.verifier.timeout_sec)
        tests = parse_junit(junit)
    if expected is not None:
        seen = {t.id for t in tests}
        why = "timed out" if timed_out else "not run (collection failed)"
        tests = [t for t in tests if t.id in set(expected)]
        tests += [TestOutcome(id=i, outcome="error", message=why) for i in expected if i not in seen]
    return VerifierRun(
        tests=tests,
        passed=sum(t.outcome == "passed" for t in tests),
        total=len(tests),
        exit_code=code,
        timed_out=timed_out,
        wall_s=round(time.monotonic() - t0, 3),
        output_tail=out[-3000:],
    )


class TaskVerification(BaseModel):
    """``eval verify``: the reference passes every hidden test; the wrong solution fails those it must."""

    task: str
    reference: VerifierRun
    wrong: VerifierRun | None = None
    must_fail: list[str] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_task(task: EvalTask, *, python: str) -> TaskVerification:
    with tempfile.TemporaryDirectory(prefix="llmdeck-ref-") as tmp:
        ref = run_hidden_tests(
            task, prepare_workspace(task, Path(tmp) / "ref", task.solution_dir), python=python
        )
        wrong = None
        spec = task.config.wrong
        if spec is not None and task.wrong_dir.is_dir():
            ws = prepare_workspace(task, Path(tmp) / "wrong", task.wrong_dir)
            wrong = run_hidden_tests(task, ws, python=python, expected=[t.id for t in ref.tests])
    problems = [f"reference fails {t.id} ({t.outcome})" for t in ref.tests if t.outcome != "passed"]
    if ref.timed_out:
        limit = task.config.verifier.timeout_sec
        problems.append(f"reference: the hidden tests did not end within {limit:g} s (verifier.timeout_sec)")
    elif not ref.tests:
        problems.append("reference: no hidden test ran: " + ref.output_tail[-300:].strip())
    must_fail = spec.must_fail if spec else []
    if wrong is not None:
        for test_id in must_fail:
            got = wrong.outcome_of(test_id)
            if got is None:
                problems.append(f"wrong solution: no hidden test {test_id!r}")
            elif got == "passed":
                problems.append(f"wrong solution passes {test_id}, which it must fail")
    elif task.config.wrong is not None:
        problems.append("task.toml has [wrong] but the task has no wrong/ folder")
    return TaskVerification(
        task=task.name, reference=ref, wrong=wrong, must_fail=must_fail, problems=problems
    )
