"""The eval tasks hold without a model: each reference passes all its hidden tests, each seeded wrong
solution fails the ones task.toml names, the untouched workspace does not pass, and the hidden tests
run isolated (a fresh copy, their own pytest config, a timeout)."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

import pytest

from llmdeck.errors import ConfigError, UsageError
from llmdeck.evals.spec import builtin_task_names, find_task, load_task, select_tasks, suites
from llmdeck.evals.verifier import prepare_workspace, run_hidden_tests, verify_task

NAMES = builtin_task_names()


def test_the_suite_has_the_five_kinds_of_task() -> None:
    assert len(NAMES) >= 5
    core = suites()["core"][1]
    assert set(core) <= set(NAMES) and len(core) >= 5
    cats = {find_task(n).config.metadata.category for n in core}
    assert {"numerics", "debugging", "feature", "refactor"} <= cats
    assert any("multi-step" in find_task(n).config.metadata.tags for n in core)
    for _, (_, tasks) in suites().items():
        assert set(tasks) <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes_and_wrong_solution_fails_what_it_must(name: str) -> None:
    check = verify_task(find_task(name), python=sys.executable)
    assert check.ok, check.problems
    assert check.reference.all_passed and check.reference.total >= 4
    assert check.wrong is not None and check.must_fail
    for test_id in check.must_fail:
        assert check.wrong.outcome_of(test_id) in {"failed", "error"}, test_id


@pytest.mark.parametrize("name", NAMES)
def test_the_untouched_workspace_does_not_pass(name: str, tmp_path: Path) -> None:
    task = find_task(name)
    run = run_hidden_tests(task, prepare_workspace(task, tmp_path / "ws"), python=sys.executable)
    assert not run.all_passed


@pytest.mark.parametrize("name", NAMES)
def test_the_agent_never_sees_the_hidden_tests(name: str) -> None:
    task = find_task(name)
    shown = {p.name for p in task.workspace_dir.rglob("*")}
    assert not shown & {p.name for p in task.tests_dir.rglob("test_*.py")}
    assert "_hidden_tests" not in task.instruction


def test_fem_task_is_the_seeds_checks() -> None:
    """Seed 004 §7.7: convergence, non-zero Dirichlet, shifted domain, bad n_elems and domains, trapz."""
    task = find_task("fem-poisson-1d")
    wrong = task.config.wrong
    assert wrong is not None
    for test_id in (
        "test_second_order_convergence",
        "test_zero_load_nonzero_dirichlet",
        "test_shifted_domain_nonzero_dirichlet",
        "test_invalid_n_elems[0]",
        "test_invalid_n_elems[-1]",
        "test_invalid_n_elems[4.0]",
        "test_invalid_domain[domain0]",
        "test_invalid_domain[domain1]",
        "test_no_np_trapz",
    ):
        assert test_id in wrong.must_fail
    assert len(task.prompts) == 2 and "np.trapz" in task.followups[0]


def _task(tmp_path: Path, test_body: str, timeout: float = 60.0) -> Path:
    root = tmp_path / "mytask"
    (root / "workspace").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "task.toml").write_text(f'version = "1.0"\n[verifier]\ntimeout_sec = {timeout}\n')
    (root / "instruction.md").write_text("Do it.\n")
    (root / "workspace" / "mod.py").write_text("VALUE = 1\n")
    (root / "tests" / "test_mod.py").write_text(test_body)
    return root


def test_hidden_tests_ignore_the_agents_pytest_config_and_conftest(tmp_path: Path) -> None:
    task = load_task(_task(tmp_path, "import mod\n\ndef test_value():\n    assert mod.VALUE == 1\n"))
    ws = prepare_workspace(task, tmp_path / "ws")
    (ws / "conftest.py").write_text("raise RuntimeError('the agent wrote this')\n")
    (ws / "pytest.ini").write_text("[pytest]\naddopts = --no-such-flag\n")
    run = run_hidden_tests(task, ws, python=sys.executable)
    assert run.all_passed and run.total == 1, run.output_tail
    assert not (ws / "_hidden_tests").exists()  # the copy is fresh; the agent's folder is untouched


def test_a_hanging_test_is_killed_at_the_verifier_timeout(tmp_path: Path) -> None:
    body = "import time\n\ndef test_a():\n    pass\n\ndef test_hang():\n    time.sleep(600)\n"
    task = load_task(_task(tmp_path, body, timeout=3.0))
    ws = prepare_workspace(task, tmp_path / "ws")
    run = run_hidden_tests(task, ws, python=sys.executable, expected=["test_a", "test_hang"])
    assert run.timed_out and run.wall_s < 30
    assert run.total == 2 and run.outcome_of("test_hang") == "error" and not run.all_passed


def test_a_module_that_does_not_import_fails_every_expected_test(tmp_path: Path) -> None:
    task = load_task(
        _task(tmp_path, "import nothere\n\ndef test_x():\n    pass\n\ndef test_y():\n    pass\n")
    )
    run = run_hidden_tests(
        task, prepare_workspace(task, tmp_path / "ws"), python=sys.executable, expected=["test_x", "test_y"]
    )
    assert run.total == 2 and run.passed == 0
    assert {t.outcome for t in run.tests} == {"error"}


def test_bad_task_folders_are_exit_2(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no task\.toml"):
        load_task(tmp_path)
    root = _task(tmp_path, "def test_x():\n    pass\n")
    (root / "task.toml").write_text("[agent]\nmax_turns = 0\n")
    with pytest.raises(ConfigError, match=r"agent\.max_turns"):
        load_task(root)
    (root / "task.toml").write_text("[agent\n")
    with pytest.raises(ConfigError, match="TOML"):
        load_task(root)
    (root / "task.toml").write_text("")
    (root / "instruction.md").unlink()
    with pytest.raises(ConfigError, match=r"instruction\.md"):
        load_task(root)
    assert ConfigError.exit_code == 2


def test_selecting_tasks() -> None:
    assert [t.name for t in select_tasks(None, "seed")] == ["fem-poisson-1d"]
    with pytest.raises(UsageError, match="Did you mean 'fix-intervals'"):
        select_tasks(["bugfix-interval"], None)
    with pytest.raises(UsageError, match="Unknown eval suite 'cor'"):
        select_tasks(None, "cor")
    with pytest.raises(UsageError, match="either --task"):
        select_tasks(None, None)
    with pytest.raises(UsageError, match="either --task"):
        select_tasks(["fem-poisson-1d"], "core")


def test_a_task_folder_by_path(tmp_path: Path) -> None:
    root = _task(tmp_path, "def test_x():\n    pass\n")
    (task,) = select_tasks([str(root)], None)
    assert task.name == "mytask" and task.prompts == ["Do it."]


@pytest.mark.parametrize("kind", ["link to a folder", "dangling link", "file"])
def test_what_the_agent_left_at_the_hidden_tests_path_is_replaced(tmp_path: Path, kind: str) -> None:
    task = load_task(_task(tmp_path, "import mod\n\ndef test_value():\n    assert mod.VALUE == 1\n"))
    ws = prepare_workspace(task, tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the user's\n")
    if kind == "file":
        (ws / "_hidden_tests").write_text("not tests\n")
    else:
        (ws / "_hidden_tests").symlink_to(outside if kind == "link to a folder" else tmp_path / "gone")
    run = run_hidden_tests(task, ws, python=sys.executable)
    assert run.all_passed and run.total == 1, run.output_tail
    assert (outside / "keep.txt").read_text() == "the user's\n"


def test_hidden_tests_that_print_megabytes_are_not_held_in_memory(tmp_path: Path) -> None:
    body = "def test_spam():\n    print(('y' * 1023 + '\\n') * 40 * 1024)\n    assert False\n"
    task = load_task(_task(tmp_path, body))
    ws = prepare_workspace(task, tmp_path / "ws")
    tracemalloc.start()
    try:
        run = run_hidden_tests(task, ws, python=sys.executable)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.total == 1 and run.passed == 0 and "test_spam" in run.output_tail
    assert peak < 8 * 1024 * 1024  # pytest printed 40 MB (the captured output of the failing test)


def test_a_rerun_into_the_same_keep_folder_leaves_the_users_files(tmp_path: Path) -> None:
    """--keep DIR twice: the second run replaces what llmdeck kept, never a file the user added."""
    from llmdeck.evals.results import TaskRun
    from llmdeck.evals.session import keep_run

    ws, logs, keep = tmp_path / "ws", tmp_path / "logs", tmp_path / "keep"
    ws.mkdir()
    logs.mkdir()
    (ws / "a.py").write_text("first\n")
    (logs / "agent-stdout-1.txt").write_text("one\n")
    run = TaskRun(task="t", repeat=1)
    keep_run(ws, logs, keep, run)
    (keep / "t-1" / "NOTES.md").write_text("my analysis\n")
    (keep / "t-1" / "workspace" / "tried.py").write_text("by hand\n")
    (ws / "a.py").unlink()
    (ws / "b.py").write_text("second\n")
    keep_run(ws, logs, keep, run)
    kept = keep / "t-1"
    assert (kept / "NOTES.md").read_text() == "my analysis\n"
    assert (kept / "workspace" / "tried.py").read_text() == "by hand\n"
    assert (kept / "workspace" / "b.py").is_file() and not (kept / "workspace" / "a.py").exists()
