"""Fuzz suite, part 6: the commands added last: `tune`, `eval`, `cluster …`, `plan --nodes`, `up
--ray-cluster` — against misbehaving peers (tests/fake_servers.py: tiny named fakes on 127.0.0.1, a
silent one, one that hangs up, HTML, garbage, a 500, an SSE stream cut mid-way, hostile strings) and
bad files (tune folders, trials files, eval tasks, netcheck results, cluster records, result files of
the wrong kind), and bad LLMDECK_* settings.

Each case asserts tests/fuzz_helpers.py's promise: exit 2 for bad input, 1 for a failed operation, a
message naming what is wrong and what to do, no traceback, within a bound. Nothing here starts an
engine: tune's cases end before the first start (or at a start the runtime refuses at once).

`cluster down` with nothing recorded exits 0 ("nothing to stop"), as `llmdeck down --all` with no
server does: it names nothing that could be wrong, and scripts run it to make sure no cluster is left.
`llmdeck down NAME` of an unknown NAME stays exit 2: a name that matches nothing is a typo to report.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from fake_servers import HOSTILE_ID, running
from fuzz_helpers import Case, FuzzRun, assert_clean_failure, case, run_main
from repo_paths import ROOT

EVAL = "eval -c opencode --agent-bin /bin/true --task fix-intervals --timeout-probe 2"
TUNE_BASE = "tune Qwen3-0.6B --machine h200 --engine venv --slo ttft_p99=2s --trials 1"
TUNE = f"{TUNE_BASE} -w agent"

# ---- eval against misbehaving servers ----------------------------------------------------------------

EVAL_SAYS: dict[str, tuple[str, ...]] = {
    "fake_silent_server": ("Cannot run the eval against", "not answering", "2 s"),
    "fake_trickle_server": ("Cannot run the eval against", "not answering"),
    "fake_closing_server": ("Cannot run the eval against", "dropped"),
    "fake_non_http_server": ("Cannot run the eval against", "127.0.0.1"),
    "fake_html_server": ("did not answer JSON",),
    "fake_garbage_server": ("did not answer JSON",),
    "fake_empty_body_server": ("did not answer JSON",),
    "fake_500_server": ("HTTP 500",),
    "fake_401_server": ("API key",),
    "fake_wrong_shape_items_server": ("id",),
    # these answer /v1/models, then break in the client's setup (connect's questions): was an
    # internal error (httpx.ReadTimeout / RemoteProtocolError escaping /tokenize) after 60 s
    "fake_trickle_stream_server": ("Cannot read what",),
    "fake_sse_cut_server": ("base prompt",),  # /tokenize cut: the recording's count, too big for 4096
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fake", list(EVAL_SAYS), ids=[f"eval:{f}" for f in EVAL_SAYS])
def test_eval_against_a_misbehaving_server(
    fake: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = Path(fuzz_env["tmp"]) / "e.json"
    with running(fake) as url:
        argv = [*EVAL.split(), "--server", url, "--out", str(out)]
        code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=EVAL_SAYS[fake], seconds=30)


CONNECT_SAYS = {
    ("check", "fake_trickle_stream_server"): "health",
    ("check", "fake_sse_cut_server"): "peer closed connection",  # in words, not httpx's class name
    ("connect", "fake_trickle_stream_server"): "health",
    ("connect", "fake_sse_cut_server"): "base prompt",  # /tokenize cut: the recording's count
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("command", "fake"),
    list(CONNECT_SAYS),
    ids=[f"{c}:{f}" for c, f in CONNECT_SAYS],
)
def test_check_and_connect_against_streams_that_break(
    command: str, fake: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A server whose /v1/models answers but whose streams trickle or are cut: /tokenize (learning the
    chat template) used to raise out of the check as an internal error."""
    with running(fake) as url:
        argv = ["check", url, "--timeout", "2", "--deadline", "8"]  # a probe a 2 s timeout: bound it
        if command == "connect":
            argv = ["connect", "opencode", "--server", url, "--print", "--timeout", "2"]
        code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=1, needles=(CONNECT_SAYS[command, fake],), seconds=30)


@pytest.mark.timeout(120)
def test_eval_hostile_strings_are_data(fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """eval:hostile-model-id — a served model id with $(...), backticks and terminal escapes: the run
    goes on (the agent here is /bin/true: it asks the model nothing, so the run is unreachable, exit 1),
    nothing is executed, no raw ESC reaches the terminal, and the id is kept verbatim in the result."""
    marker = Path("/tmp/llmdeck-pwned")
    out = Path(fuzz_env["tmp"]) / "e.json"
    with running("fake_hostile_strings_server") as url:
        code, stdout, err, elapsed = run_main([*EVAL.split(), "--server", url, "--out", str(out)], capsys)
    assert code == 1 and "without a model turn" in err and "Traceback" not in err and elapsed < 60, err
    assert not marker.exists()
    assert "\x1b" not in stdout and "\x1b" not in err
    assert json.loads(out.read_text())["target"]["model"] == HOSTILE_ID


# ---- bad files and folders ---------------------------------------------------------------------------


def _tune_folders(tmp: Path) -> dict[str, str]:
    """Tune folders that are not (or no longer) a tune's, and a header-only folder made by a real run."""
    names: dict[str, str] = {}
    garbage = tmp / "t-garbage"
    garbage.mkdir()
    (garbage / "trials.jsonl").write_text('{"kind": "llmdeck.tune.trials", "schema_ver\n')
    binary = tmp / "t-binary"
    binary.mkdir()
    (binary / "trials.jsonl").write_bytes(b"\xff\xfe\x00\x89" * 64 + b"\n")
    foreign = tmp / "t-foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    dir_trials = tmp / "t-dir-trials"
    (dir_trials / "trials.jsonl").mkdir(parents=True)
    newer = tmp / "t-newer"
    newer.mkdir()
    (newer / "trials.jsonl").write_text(
        json.dumps({"kind": "llmdeck.tune.trials", "schema_version": 99}) + "\n"
    )
    fifo = tmp / "t-fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "trials.jsonl")
    names["t_fifo"] = str(fifo)
    for key, path in [("garbage", garbage), ("binary", binary), ("foreign", foreign)]:
        names[f"t_{key}"] = str(path)
    names |= {"t_dir_trials": str(dir_trials), "t_newer": str(newer)}
    return names


TUNE_CASES = [
    case("tune:out-is-a-file", f"{TUNE} --out {{a_file}}", 2, "{a_file}", "not a folder"),
    case("tune:rate-start-zero", f"{TUNE} --find-max-rate --rate-start 0", 2, "--rate-start", "above 0"),
    case("tune:rate-steps-one", f"{TUNE} --find-max-rate --rate-steps 1", 2, "--rate-steps", "at least 2"),
    case("tune:out-foreign-folder", f"{TUNE} --out {{t_foreign}}", 2, "{t_foreign}", "other files"),
    case("tune:out-trials-not-json", f"{TUNE} --out {{t_garbage}}", 2, "trials.jsonl:1", "not JSON"),
    case("tune:out-trials-binary", f"{TUNE} --out {{t_binary}}", 2, "trials.jsonl"),
    case("tune:out-trials-is-a-folder", f"{TUNE} --out {{t_dir_trials}}", 2, "{t_dir_trials}"),
    case("tune:out-trials-newer-schema", f"{TUNE} --out {{t_newer}}", 2, "schema_version 99", "upgrade"),
    case("tune:resume-nothing", f"{TUNE} --out {{tmp}}/fresh --resume", 2, "--resume", "no trials file"),
    case("tune:spec-is-a-bench-result", f"{TUNE} --spec {{newer}}", 2, "{newer}"),
    case("tune:spec-binary", f"{TUNE} --spec {{binary}}", 2, "{binary}"),
    case("tune:prompts-binary", f"{TUNE_BASE} --prompts {{binary}} --out {{tmp}}/tp", 2, "{binary}"),
    case("tune:prompts-folder", f"{TUNE_BASE} --prompts {{folder}} --out {{tmp}}/tp", 2, "{folder}"),
    # the catalog name is no folder: every start would fail alike, so the first one ends the tune
    # (was: --trials failed starts, then exit 1)
    case("tune:model-not-a-folder", f"{TUNE} --out {{tmp}}/tm", 2, "Qwen3-0.6B", "does not exist"),
    # past bench's bounds: were internal errors (a pydantic dump of the first trial's BenchRequest)
    case(
        "tune:num-prompts-huge",
        f"{TUNE} --num-prompts {10**17} --out {{tmp}}/tl",
        2,
        "--num-prompts",
        "100000",
    ),
    case("tune:concurrency-huge", f"{TUNE} -c {10**10} --out {{tmp}}/tl", 2, "--concurrency", "100000"),
    case("tune:num-turns-huge", f"{TUNE} --num-turns {10**9} --out {{tmp}}/tl", 2, "--num-turns", "10000"),
]


def _eval_tasks(tmp: Path) -> dict[str, str]:
    """Eval task folders broken in one way each."""
    specs: dict[str, dict[str, bytes | None]] = {
        "toml-broken": {"task.toml": b"x = [\n"},
        "toml-not-utf8": {"task.toml": b"\xff\xfe"},
        "toml-too-deep": {"task.toml": b"x = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"},
        "toml-huge-int": {"task.toml": b"[agent]\nmax_turns = " + b"1" * 5000 + b"\n"},
        "toml-wrong-type": {"task.toml": b'[agent]\nmax_turns = "lots"\n'},
        "toml-negative": {"task.toml": b"[verifier]\ntimeout_sec = -1\n"},
        "no-instruction": {"task.toml": b""},
        "instruction-folder": {"task.toml": b"", "instruction.md/": None},
        "instruction-binary": {"task.toml": b"", "instruction.md": b"\xff\xfe\x00"},
        "followup-binary": {"task.toml": b"", "instruction.md": b"Do it.", "followups/01.md": b"\xc3\x28"},
        "instruction-blank": {"task.toml": b"", "instruction.md": b" \n\t\n"},
        "followup-empty": {"task.toml": b"", "instruction.md": b"Do it.", "followups/01.md": b""},
        "no-tests": {"task.toml": b"", "instruction.md": b"Do it.", "tests/": False},
        "tests-a-file": {"task.toml": b"", "instruction.md": b"Do it.", "tests/": False, "tests": b"x"},
        "tests-empty": {"task.toml": b"", "instruction.md": b"Do it.", "tests/README.md": b"later"},
        "workspace-a-file": {
            "task.toml": b"",
            "instruction.md": b"Do it.",
            "workspace/": False,
            "workspace": b"",
        },
        "agent-not-a-table": {"task.toml": b'agent = "fast"\n'},
        "timeout-inf": {"task.toml": b"[agent]\ntimeout_sec = inf\n"},
    }
    names = {}
    for name, files in specs.items():
        root = tmp / "tasks" / name
        (root / "workspace").mkdir(parents=True)
        (root / "tests").mkdir()
        for rel, data in files.items():
            if data is False:
                (root / rel.rstrip("/")).rmdir()
            elif data is None:
                (root / rel.rstrip("/")).mkdir(parents=True)
            elif isinstance(data, bytes):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(data)
        names["task_" + name.replace("-", "_")] = str(root)
    return names


BENCH_RESULT = str(ROOT / "evidence" / "tune" / "agent-sessions-cpu-bench.json")  # a real bench result

EVAL_TASK_CASES = [
    case("eval:task-toml-broken", "eval -c opencode --task {task_toml_broken}", 2, "task.toml", "TOML"),
    case("eval:task-toml-not-utf8", "eval -c opencode --task {task_toml_not_utf8}", 2, "task.toml"),
    # tomllib recurses per level: was "internal error: RecursionError"
    case(
        "eval:task-toml-too-deep",
        "eval -c opencode --task {task_toml_too_deep}",
        2,
        "task.toml",
        "too deeply",
    ),
    # tomllib's int() past Python's 4,300-digit cap: a ValueError, no TOMLDecodeError
    case(
        "eval:task-toml-huge-int", "eval -c opencode --task {task_toml_huge_int}", 2, "task.toml", "too long"
    ),
    case("eval:task-toml-wrong-type", "eval -c opencode --task {task_toml_wrong_type}", 2, "max_turns"),
    case("eval:task-toml-negative", "eval -c opencode --task {task_toml_negative}", 2, "timeout_sec"),
    case("eval:task-no-instruction", "eval -c opencode --task {task_no_instruction}", 2, "instruction.md"),
    # were internal errors (IsADirectoryError, UnicodeDecodeError)
    case(
        "eval:task-instruction-folder",
        "eval -c opencode --task {task_instruction_folder}",
        2,
        "instruction.md",
    ),
    case(
        "eval:task-instruction-binary",
        "eval -c opencode --task {task_instruction_binary}",
        2,
        "instruction.md",
        "UTF-8",
    ),
    case("eval:task-followup-binary", "eval -c opencode --task {task_followup_binary}", 2, "01.md"),
    # an empty prompt had been sent: the agent asked nothing, then scored
    case(
        "eval:task-instruction-blank",
        "eval -c opencode --task {task_instruction_blank}",
        2,
        "instruction.md",
        "empty",
    ),
    case("eval:task-followup-empty", "eval -c opencode --task {task_followup_empty}", 2, "01.md", "empty"),
    case("eval:task-no-tests", "eval -c opencode --task {task_no_tests}", 2, "has no tests"),
    # a file for tests/ or workspace/ broke each run (NotADirectoryError); no test file scored nothing
    case("eval:task-tests-a-file", "eval -c opencode --task {task_tests_a_file}", 2, "tests", "not a folder"),
    case(
        "eval:task-tests-empty", "eval -c opencode --task {task_tests_empty}", 2, "no test file", "test_*.py"
    ),
    case(
        "eval:task-workspace-a-file",
        "eval -c opencode --task {task_workspace_a_file}",
        2,
        "workspace",
        "not a folder",
    ),
    # was "Input should be a valid dictionary or instance of AgentLimits" (a Python class named)
    case("eval:task-agent-not-a-table", "eval -c opencode --task {task_agent_not_a_table}", 2, "[agent]"),
    case("eval:task-timeout-inf", "eval -c opencode --task {task_timeout_inf}", 2, "timeout_sec", "finite"),
    case("eval:verify-task-broken", "eval verify --task {task_toml_broken}", 2, "task.toml"),
    case("eval:task-a-file", "eval -c opencode --task ./{a_file}", 2, "a_file"),
]


def _result_files(tmp: Path) -> dict[str, str]:
    """Result files of the wrong kind or version for `report`, eval's --out, netcheck's --result."""
    eval_ok_head = {"kind": "llmdeck.eval.result", "schema_version": 1}
    files = {
        "eval_invalid.json": json.dumps({**eval_ok_head, "client": 5}),
        "eval_compact.json": json.dumps({**eval_ok_head, "runs": "many"}, separators=(",", ":")),
        "eval_old.json": json.dumps({**eval_ok_head, "schema_version": 0}),
        "trials_as_result.jsonl": json.dumps({"kind": "llmdeck.tune.trials", "schema_version": 1}) + "\n",
        "nc_not_json.jsonl": '{"schema": "llmdeck.allreduce/1", size\n',
        "nc_bad_row.jsonl": json.dumps({"schema": "llmdeck.allreduce/1", "size_bytes": "big"}) + "\n",
        "nc_zero_rank.jsonl": json.dumps(
            {
                "schema": "llmdeck.allreduce/1",
                "backend": "gloo",
                "world_size": 1,
                "size_bytes": 8,
                "iters": 1,
                "time_us": 1.0,
                "algbw_gbps": 1.0,
                "busbw_gbps": 1.0,
            }
        )
        + "\n",
        "nc_other.jsonl": '{"a": 1}\nNCCL INFO hello\n',
        "vllm_as_list.json": "[]",
    }
    for name, text in files.items():
        (tmp / name).write_text(text)
    (tmp / "nc_binary.jsonl").write_bytes(b"{\xff\xfe\x00\x89" * 40)
    return {Path(n).stem: str(tmp / n) for n in [*files, "nc_binary.jsonl"]}


FILE_CASES = [
    case("report:eval-invalid", "report {eval_invalid}", 2, "{eval_invalid}", "not a valid eval result"),
    # compact JSON (no space after the colon): was taken for a bench file ("not a bench result")
    case("report:eval-compact-json", "report {eval_compact}", 2, "{eval_compact}", "eval result"),
    case("report:eval-older-schema", "report {eval_old}", 2, "{eval_old}", "eval schema version 0"),
    # were "[Errno 22] it is a named pipe (FIFO), not a regular file: '...'. Pick another --out." and
    # "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    case("report:tune-trials-a-fifo", "report {t_fifo}", 2, "named pipe", "the folder a tune wrote"),
    case("report:tune-trials-binary", "report {t_binary}", 2, "not UTF-8 text (byte 0xff at offset 0)"),
    # were "...: : Input should be a valid dictionary or instance of VllmBenchResult" (a class named)
    case(
        "report:against-a-list",
        ["report", BENCH_RESULT, "--against", "{vllm_as_list}"],
        2,
        ": [] is not a JSON object",
    ),
    # a trials file is read as one now (report reads tune folders back): its half header is named
    case(
        "report:tune-trials",
        "report {trials_as_result}",
        2,
        "{trials_as_result}",
        "llmdeck.tune.trials header",
    ),
    case("eval:out-is-a-bench-result", f"{EVAL} --out {{newer}} -s http://127.0.0.1:9", 2, "{newer}"),
    case("cluster:netcheck-result-not-json", "cluster netcheck --result {nc_not_json}", 2, "not JSON"),
    case("cluster:netcheck-result-bad-row", "cluster netcheck --result {nc_bad_row}", 2, "all-reduce row"),
    case("cluster:netcheck-result-one-rank", "cluster netcheck --result {nc_zero_rank}", 2, "world_size"),
    case("cluster:netcheck-result-no-rows", "cluster netcheck --result {nc_other}", 2, "no all-reduce rows"),
    # was an internal error (UnicodeDecodeError)
    case("cluster:netcheck-result-binary", "cluster netcheck --result {nc_binary}", 2, "not text"),
    case("cluster:netcheck-result-folder", "cluster netcheck --result {folder}", 2, "{folder}"),
    case("cluster:netcheck-result-missing", "cluster netcheck --result {missing}", 2, "{missing}"),
    case("cluster:netcheck-result-empty", "cluster netcheck --result {empty}", 2, "no all-reduce rows"),
]


# ---- cluster: hostile names, nothing recorded, corrupted records --------------------------------------

CLUSTER_CASES = [
    case(
        "cluster:interface-escape",
        ["cluster", "up", "--head", "10.0.0.1", "--interface", "e\x1b[31m0"],
        2,
        "--interface",
        "not a device name",
    ),
    case(
        "cluster:interface-traversal", "cluster netcheck --local 2 --interface ../../../etc", 2, "--interface"
    ),
    case(
        "cluster:hca-backticks",
        ["cluster", "up", "--head", "10.0.0.1", "--hca", "mlx`id`", "--dry-run"],
        2,
        "--hca",
    ),
    case(
        "cluster:worker-option-injection",
        "cluster up --head 10.0.0.1 --worker -oProxyCommand=x",
        2,
        "--worker",
    ),
    case("cluster:head-with-spaces", ["cluster", "up", "--head", "a b"], 2, "--head", "not a host"),
    case(
        "cluster:worker-ip-count",
        "cluster up --head 10.0.0.1 --worker 10.0.0.2 --worker-ip 1.1.1.1 --worker-ip 2.2.2.2 --dry-run",
        2,
        "--worker-ip",
    ),
    case("cluster:docker-without-image", "cluster up --head 10.0.0.1 --docker --dry-run", 2, "--image"),
    case(
        "cluster:hf-cache-relative",
        "cluster up --head 10.0.0.1 --docker --image vllm/vllm-openai:v0.22.0 --hf-cache rel/hf --dry-run",
        2,
        "--hf-cache",
        "absolute",
    ),
    case("cluster:netcheck-backend", "cluster netcheck --local 2 --backend mpi", 2, "--backend"),
    case("cluster:netcheck-nothing-recorded", "cluster netcheck", 2, "No multi-node cluster recorded"),
    case("cluster:status-nothing-recorded", "cluster status", 2, "No cluster started by llmdeck"),
    case("cluster:logs-nothing-recorded", "cluster logs", 2, "No cluster started by llmdeck"),
    case(
        "up:ray-cluster-nothing-recorded",
        "up --model {folder} --engine venv --ray-cluster",
        2,
        "--ray-cluster",
    ),
    case("plan:nodes-zero", "plan Qwen3-0.6B --machine h200 --nodes 0", 2, "--nodes"),
    case("plan:nodes-text", "plan Qwen3-0.6B --machine h200 --nodes two", 2, "--nodes"),
    case("plan:nodes-absurd", "plan Qwen3-0.6B --machine h200 --nodes 1000000", 2, "--nodes"),
    case(
        "plan:gpus-per-node-negative",
        "plan Qwen3-0.6B --machine h200 --gpus-per-node -1",
        2,
        "--gpus-per-node",
    ),
]


SETTINGS_CASES = [
    case(
        "tune:LLMDECK_PORT-text", f"{TUNE} --out {{tmp}}/ts", 2, "LLMDECK_PORT", env={"LLMDECK_PORT": "abc"}
    ),
    case("eval:LLMDECK_DEBUG-words", EVAL, 2, "LLMDECK_DEBUG", env={"LLMDECK_DEBUG": "very"}),
    case(
        "cluster:LLMDECK_STATE_DIR-a-file",
        "cluster down",
        2,
        "LLMDECK_STATE_DIR",
        env={"LLMDECK_STATE_DIR": "{a_file}"},
    ),
    case("cluster:LLMDECK_HOST-url", "cluster status", 2, "LLMDECK_HOST", env={"LLMDECK_HOST": "http://x"}),
    case(
        "tune:LLMDECK_WATCHDOG_FLOOR_GIB-negative",
        f"{TUNE} --out {{tmp}}/tw",
        2,
        "LLMDECK_WATCHDOG_FLOOR_GIB",
        env={"LLMDECK_WATCHDOG_FLOOR_GIB": "-1"},
    ),
    case(
        "eval:LLMDECK_RESULTS_DIR-a-file",
        EVAL,
        2,
        "LLMDECK_RESULTS_DIR",
        env={"LLMDECK_RESULTS_DIR": "{a_file}"},
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("c", TUNE_CASES + EVAL_TASK_CASES + FILE_CASES + CLUSTER_CASES + SETTINGS_CASES)
def test_bad_input(c: Case, fuzz_env: dict[str, str], tmp_path: Path, fuzz_run: FuzzRun) -> None:
    names = {**fuzz_env, **_tune_folders(tmp_path), **_eval_tasks(tmp_path), **_result_files(tmp_path)}
    fuzz_run(c, names)


def _corrupt(state: Path, which: str, text: str) -> Path:
    path = state / "cluster" / which
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


CORRUPTED = [(w, c) for w in ("local.json", "remote.json") for c in ("down", "status", "logs", "up-ray")]


@pytest.mark.parametrize(
    ("which", "command"),
    CORRUPTED,
    ids=[f"cluster:corrupted-{w.split('.')[0]}-record-{c}" for w, c in CORRUPTED],
)
def test_a_corrupted_cluster_record_is_reported_not_ignored(
    which: str, command: str, fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """cluster:corrupted-record — was read as "no cluster": `down` said nothing is recorded while the
    Ray processes it listed kept running. Now exit 2 naming the file and how to clean up."""
    path = _corrupt(Path(fuzz_env["tmp"]) / "state", which, '{"kind": "llmdeck.local-ray/1", "addr')
    argv = {"up-ray": ["up", "--model", fuzz_env["folder"], "--engine", "venv", "--ray-cluster"]}.get(
        command, ["cluster", command]
    )
    code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(str(path), "unreadable"), seconds=15)
    assert path.exists()  # nothing is deleted behind the user's back


def test_cluster_down_with_nothing_recorded_is_ok(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """cluster:down-nothing-recorded — exit 0 and says so (was exit 2), as `down --all` with no server."""
    code, out, err, _ = run_main(["cluster", "down"], capsys)
    assert code == 0 and "nothing to stop" in err and out == ""
    code, out, err, _ = run_main(["down", "--all"], capsys)
    assert code == 0 and out == "" and "nothing to stop" in err
    code, _out, err, elapsed = run_main(["down", "ghost"], capsys)  # a name that matches nothing: a typo
    assert_clean_failure(code, err, elapsed, want=2, needles=("ghost",), seconds=15)


def _printed_commands(out: str) -> list[list[str]]:
    """Each `ssh ...` command printed (continued by a trailing backslash), as bash itself parses it."""
    import subprocess

    commands, current = [], ""
    for line in out.splitlines():
        if line.startswith("ssh") or current:
            current += line[:-1] if line.endswith("\\") else line
            if not line.endswith("\\"):
                parsed = subprocess.run(["bash", "-c", "printf '%s\\0' " + current], capture_output=True)
                commands.append(parsed.stdout.decode().split("\0")[:-1])
                current = ""
    return commands


def test_cluster_dry_run_prints_hostile_values_quoted(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """cluster:dry-run-hostile-values — --python and --image with $(...), `;` and an ESC sequence:
    every printed command pastes back into bash as the argv llmdeck runs, the value one word of the
    remote command, nothing is run, and no raw ESC reaches the terminal (shown as $'\\x1b...')."""
    python = "/opt/x;$(touch /tmp/llmdeck-pwned)\x1b[2J"
    image = "vllm/x:1;`touch${IFS}/tmp/llmdeck-pwned`"
    argv = ["cluster", "up", "--head", "10.0.0.1", "--worker", "10.0.0.2", "--dry-run"]
    for extra, value in ((["--venv", "--python", python], python), (["--docker", "--image", image], image)):
        code, out, err, _ = run_main([*argv, *extra, "--hf-cache", "/hf"], capsys)
        assert code == 0, err
        assert "\x1b" not in out and "\x1b" not in err
        commands = _printed_commands(out)
        assert len(commands) >= 2 and all(c[:2] == ["ssh", "-o"] for c in commands)
        assert any(value in shlex.split(c[-1]) for c in commands), commands
    # an image with a space or an ESC is no image name (docker's one positional): refused, shown escaped
    code, out, err, _ = run_main([*argv, "--docker", "--image", "vllm/x:1 `id`\x1b[2J"], capsys)
    assert code == 2 and "is not an image name" in err and "\x1b" not in out + err
    assert not Path("/tmp/llmdeck-pwned").exists()


def test_tune_header_only_folder_is_taken_over(
    fuzz_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """tune:header-only-folder — a tune that ended before its first trial (here: its model is no folder)
    leaves a header and no trial; the same --out with another request is then not "another tune's"
    (nothing measured is lost), while one holding a trial still is (tests/unit/test_tune_parts.py)."""
    out = Path(fuzz_env["tmp"]) / "tune"
    code, _o, err, _ = run_main([*TUNE.split(), "--out", str(out)], capsys)
    assert code == 2 and "does not exist" in err
    lines = (out / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["kind"] == "llmdeck.tune.trials"
    code, _o, err, _ = run_main([*TUNE.split(), "--out", str(out), "--slo", "ttft_p99=9s"], capsys)
    assert code == 2 and "another tune" not in err and "does not exist" in err


@pytest.mark.parametrize(
    ("python", "says"),
    [("{missing}", "does not exist"), ("/bin/false", "cannot import vllm")],
    ids=["tune:python-missing", "tune:python-without-vllm"],
)
def test_tune_engine_python_refused_ends_at_the_first_start(
    python: str,
    says: str,
    fuzz_env: dict[str, str],
    tiny_model_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The venv engine's --python does not exist, or cannot import vllm: vLLM's defaults are refused at
    once, so every trial would be; exit 2 naming it, no trial recorded (was: --trials failed starts and
    exit 1; the vllm-not-importable refusal was also raised as "port in use", "port" being in "import")."""
    out = Path(fuzz_env["tmp"]) / "tpy"
    python = python.format(**fuzz_env)
    argv = ["tune", str(tiny_model_dir), "--machine", "h200", "--engine", "venv", "--python", python]
    argv += ["-w", "agent", "--slo", "ttft_p99=2s", "--trials", "3", "--out", str(out)]
    code, _out, err, elapsed = run_main(argv, capsys)
    assert_clean_failure(code, err, elapsed, want=2, needles=(python, says), seconds=30)
    assert "port" not in err.lower().replace("import", "")
    assert len((out / "trials.jsonl").read_text().splitlines()) == 1  # the header, no trial


# ---- eval's result: bench's header, old files still load -----------------------------------------------

EVIDENCE = ROOT / "evidence"


def test_eval_result_shares_benchs_header_and_old_files_load(tmp_path: Path) -> None:
    """The eval result is a bench ResultHeader (one TargetInfo, one HostFacts, one status/version
    block, not copies); the shape is unchanged, so version-1 files written before still load and write
    back the same keys, and any other version is refused with what to do."""
    from llmdeck.bench.result_schema import BenchResult, HostFacts, ResultHeader
    from llmdeck.errors import ResultFileError
    from llmdeck.evals.results import EvalResult, load_eval_result

    assert issubclass(EvalResult, ResultHeader) and issubclass(BenchResult, ResultHeader)
    assert EvalResult.model_fields["host"].annotation is HostFacts
    for name in ("opencode-tiny.json", "aider-tiny.json"):
        path = EVIDENCE / "eval" / "cpu" / name
        raw = json.loads(path.read_text())
        again = load_eval_result(path).model_dump(mode="json")
        assert set(again) == set(raw) and again["host"] == raw["host"]
        newer = tmp_path / name
        newer.write_text(json.dumps({**raw, "schema_version": 2}))
        with pytest.raises(ResultFileError, match="eval schema version 2") as info:
            load_eval_result(newer)
        assert "run the eval again" in info.value.render()
