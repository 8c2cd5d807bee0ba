"""CLI group: eval — a real coding agent on tasks with hidden tests, against a server (and its config)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from llmdeck.cli import options
from llmdeck.cli.output import JSON_OPTION, err_console, get_settings, out_console, print_json
from llmdeck.cli.validate import api_key_option, nonempty

EVAL_HELP = """Run a real coding agent (opencode, aider, claude-code, codex) headless on coding tasks, then
score its work with hidden tests it never saw; the server's flags, model and /metrics during the run go
in the result.

Each task runs in a fresh scratch workspace (a git repo of the task's starting files) with the client
configured as `llmdeck connect` configures it; follow-up prompts go to the same session. The agent runs
on this host with its permissions auto-approved, in the scratch folder: run evals as a user (or on a
machine) you would let an agent loose on. The first limit a task sets (wall time, turns, tokens) stops
the agent. Then the hidden tests run with pytest in a fresh copy of the workspace, in their own process.
The result (versioned JSON, --out) is rewritten after every task; Ctrl-C keeps the finished ones.
A run whose client never reached the model (key refused, no connection, no such model) is stopped at
once and not scored. Exit 0 when the eval ran (the score is data, even 0), 1 when it could not run or
a run never reached the model, 2 for bad input.

Examples:

  llmdeck eval tasks           # the built-in tasks and suites

  llmdeck eval verify          # each reference passes, each seeded wrong solution fails

  llmdeck eval --client opencode --suite core --server coder --out core.json

  llmdeck eval --client opencode --task fem-poisson-1d --server http://127.0.0.1:8000 --repeat 3

  llmdeck eval --client aider --task fix-intervals --server coder --max-turns 10

  llmdeck eval --client claude-code --task fix-intervals --server coder   # Messages API, 32K+ context

  llmdeck eval --client codex --suite core --server coder --out codex.json   # Responses API

  llmdeck eval --client opencode --task ./my-task --server http://gpu-box:8000 --timeout-probe 60

  llmdeck report fp8.json bf16.json --html kv.html    # two serving configs side by side
"""


def register(app: typer.Typer) -> None:
    """Add this group's commands to the root app."""
    from llmdeck.cli.app import reflow_help

    ev = typer.Typer(
        name="eval", help=reflow_help(EVAL_HELP), invoke_without_command=True, no_args_is_help=True
    )
    ev.callback()(eval_run)
    ev.command("tasks", help="List the built-in tasks and suites (--json: the tasks' definitions).")(
        eval_tasks
    )
    ev.command(
        "verify",
        help="Run each task's reference solution and seeded wrong solution against its hidden tests: the "
        "reference must pass all of them, the wrong one fail those task.toml names. No model needed; "
        "exit 1 if a task does not hold.",
    )(eval_verify)
    app.add_typer(ev)


def eval_run(
    ctx: typer.Context,
    client: str | None = typer.Option(
        None, "--client", "-c", help="The agent: opencode, aider, claude-code or codex."
    ),
    task: list[str] = typer.Option([], "--task", "-t", help="A task name or folder (repeatable)."),
    suite: str | None = typer.Option(
        None, "--suite", callback=nonempty, help="A suite of tasks (see `llmdeck eval tasks`)."
    ),
    server: str | None = typer.Option(None, "--server", "-s", help="Server URL or llmdeck server name."),
    model: str | None = typer.Option(
        None, "--model", "-m", callback=nonempty, help="Served model name (default: the first)."
    ),
    repeat: int = typer.Option(1, "--repeat", min=1, max=100, help="Run every task N times."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the result JSON here (as it goes)."),
    html: Path | None = typer.Option(None, "--html", help="Also write the HTML page of the result."),
    api_key: str | None = api_key_option(),
    agent_bin: Path | None = typer.Option(None, "--agent-bin", help="The client's executable."),
    python: str | None = typer.Option(
        None, "--python", callback=nonempty, help="Interpreter for the hidden tests."
    ),
    thinking: str = typer.Option("server", "--thinking", help="server, on or off (as `connect`)."),
    timeout: float | None = options.task_timeout(None, " (default: the task's own)"),
    timeout_probe: float = options.probe_timeout(30.0, " (/v1/models, the client's setup)"),
    max_turns: int | None = typer.Option(None, "--max-turns", min=1, help="Agent turns per task."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="Agent tokens per task."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep each run's final workspace under DIR."),
    json_out: bool = JSON_OPTION,
) -> None:
    """Run the agent on the tasks (see EVAL_HELP)."""
    if ctx.invoked_subcommand is not None:
        return
    opts = dict(
        client=client, task=task, suite=suite, server=server, model=model, repeat=repeat, out=out,
        html=html, api_key=api_key, agent_bin=agent_bin, python=python, thinking=thinking,
        limits={"timeout_sec": timeout, "max_turns": max_turns, "max_tokens": max_tokens}, keep=keep,
        timeout_probe=timeout_probe,
    )  # fmt: skip
    _eval(ctx, opts, json_out)


def _options(opts: dict[str, Any], settings: Any) -> Any:
    import sys

    from llmdeck.connect.run import THINKING_CHOICES
    from llmdeck.errors import UsageError
    from llmdeck.evals.agents import eval_client, find_binary
    from llmdeck.evals.runner import EvalOptions

    client = eval_client(opts["client"])
    if opts["thinking"] not in THINKING_CHOICES:
        raise UsageError(f"--thinking {opts['thinking']!r} is not valid.", hint="Use server, on or off.")
    if client in ("aider", "claude-code", "codex") and opts["thinking"] != "server":
        raise UsageError(
            f"{client} sends no chat_template_kwargs, so --thinking on/off cannot reach the server "
            "through it.",
            hint="Drop --thinking, or restart the server with --default-chat-template-kwargs "
            "'{\"enable_thinking\": false}' (or true).",
        )
    binary = find_binary(client, opts["agent_bin"])
    request = {k: (str(v) if isinstance(v, Path) else v) for k, v in opts.items() if k != "api_key"}
    return EvalOptions(
        client=client,
        binary=binary,
        model=opts["model"],
        api_key=opts["api_key"] if opts["api_key"] is not None else getattr(settings, "api_key", None),
        repeat=opts["repeat"],
        out_path=opts["out"],
        python=opts["python"] or sys.executable,
        thinking=opts["thinking"],
        limits=opts["limits"],
        keep_dir=opts["keep"],
        suite=opts["suite"],
        request=request,
        probe_timeout=opts["timeout_probe"],
    )


def _check_outputs(opts: dict[str, Any], tasks: list[str]) -> None:
    """Before any agent runs: --html is no input nor the user's file, --keep's run folders are llmdeck's."""
    import os

    from llmdeck.bench.html.page import refuse_foreign_page
    from llmdeck.errors import UsageError
    from llmdeck.util.owned import refuse_unless_made

    out, html, keep = opts["out"], opts["html"], opts["keep"]
    if out is not None and html is not None and os.path.realpath(out) == os.path.realpath(html):
        raise UsageError(f"--out and --html are the same file ({out}).", hint="Give the page its own name.")
    if html is not None:
        refuse_foreign_page(Path(html))
    if keep is None:
        return
    keep = Path(keep)
    if keep.exists() and not keep.is_dir():
        from llmdeck.util.localfile import kind_of

        raise UsageError(
            f"--keep {keep} is {kind_of(keep.stat().st_mode)}, not a folder.",
            hint="Give a folder (new or empty).",
        )
    for name in tasks:
        for n in range(1, opts["repeat"] + 1):
            refuse_unless_made(keep / f"{name}-{n}", "kept eval workspace")


def _eval(ctx: typer.Context, opts: dict[str, Any], json_out: bool) -> None:
    import asyncio

    from llmdeck.bench.runner import resolve_target
    from llmdeck.evals.agents import eval_client
    from llmdeck.evals.runner import EvalInterrupted, run_eval
    from llmdeck.evals.spec import select_tasks
    from llmdeck.util.atomic import check_writable
    from llmdeck.util.filelock import sole_writer
    from llmdeck.util.localfile import file_stamp

    settings = get_settings(ctx)
    eval_client(opts["client"])  # an unknown agent is named before any task is looked up
    tasks = select_tasks(opts["task"], opts["suite"])
    options = _options(opts, settings)
    for path in (opts["out"], opts["html"]):
        if path is not None:
            check_writable(Path(path))
    _check_outputs(opts, [t.name for t in tasks])
    target = resolve_target(opts["server"] or "", settings, model=opts["model"])
    before = file_stamp(Path(opts["out"])) if opts["out"] else None
    try:
        with sole_writer(settings.locks_dir, options.out_path, "eval"):
            result = asyncio.run(run_eval(tasks, target, options, settings, _Progress()))
    except KeyboardInterrupt:  # named only once this run wrote it (not an earlier file, not none at all)
        written = opts["out"] and file_stamp(Path(opts["out"])) not in (before, None)
        where = f"; the finished runs are in {opts['out']}" if written else " before anything was written"
        raise EvalInterrupted(f"The eval was interrupted{where}.") from None
    if opts["html"] is not None:
        from llmdeck.evals.html import write_eval_report

        write_eval_report([result], [str(opts["out"] or "(not saved)")], Path(opts["html"]))
    if json_out:
        print_json(result)
    else:
        from llmdeck.evals.tables import render_result

        render_result(result, out_console())
    _refuse_unreached(result, opts)


def _refuse_unreached(result: Any, opts: dict[str, Any]) -> None:
    """Exit 1 when a run's client never reached the model: its 0 is not the model's score."""
    from llmdeck.errors import OperationError

    bad = [r for r in result.runs if r.status == "unreachable"]
    if not bad:
        return
    where = f" (the result is in {opts['out']})" if opts["out"] else ""
    first = bad[0].agent.unreached if bad[0].agent else None
    raise OperationError(
        f"{len(bad)} of {len(result.runs)} task run(s) never reached the model{where}: "
        f"{first.reason() if first else 'see the transcript'}.",
        hint="Check --api-key (or LLMDECK_API_KEY), --server and --model against what the server serves "
        "(`llmdeck check URL --client CLIENT` tries the client's own requests).",
    )


class _Progress:
    """Live progress on stderr."""

    def __init__(self) -> None:
        self.err = err_console()

    def message(self, text: str) -> None:
        self.err.print(f"[dim]{text}[/]", highlight=False, markup=True)

    def run_start(self, run: Any, index: int, total: int) -> None:
        self.err.print(f"[{index + 1}/{total}] {run.task} #{run.repeat} …", markup=False, highlight=False)

    def turn(self, run: Any, turn: Any) -> None:
        ttft = f", server TTFT {turn.server_ttft_ms:.0f} ms" if turn.server_ttft_ms is not None else ""
        tools = f", tools {', '.join(turn.tools)}" if turn.tools else ""
        line = f"    turn {turn.index}: {turn.tokens.total:,} tokens{tools}{ttft}"
        self.err.print(line, markup=False, highlight=False)

    def run_end(self, run: Any) -> None:
        t = run.tests
        tests = f"{t.passed}/{t.total} hidden tests pass" if t else (run.error or run.status)
        limit = f" (stopped: {run.agent.limit_hit} limit)" if run.agent and run.agent.limit_hit else ""
        self.err.print(f"    → {tests}{limit}", markup=False, highlight=False)


def eval_tasks(json_out: bool = JSON_OPTION) -> None:
    from llmdeck.evals.spec import builtin_task_names, find_task, suites
    from llmdeck.evals.tables import render_tasks

    tasks = [find_task(n) for n in builtin_task_names()]
    if json_out:
        print_json(
            {"tasks": tasks, "suites": {k: {"description": d, "tasks": t} for k, (d, t) in suites().items()}}
        )
    else:
        render_tasks(tasks, out_console())


def eval_verify(
    task: list[str] = typer.Option([], "--task", "-t", help="A task name or folder (repeatable)."),
    suite: str | None = typer.Option(
        None, "--suite", callback=nonempty, help="A suite (default: every built-in task)."
    ),
    python: str | None = typer.Option(
        None, "--python", callback=nonempty, help="Interpreter for the hidden tests."
    ),
    json_out: bool = JSON_OPTION,
) -> None:
    import sys

    from llmdeck.errors import CheckFailedError
    from llmdeck.evals.runner import check_pytest
    from llmdeck.evals.spec import builtin_task_names, find_task, select_tasks
    from llmdeck.evals.tables import render_verify
    from llmdeck.evals.verifier import verify_task

    py = python or sys.executable
    check_pytest(py)
    tasks = select_tasks(task, suite) if task or suite else [find_task(n) for n in builtin_task_names()]
    checks = [verify_task(t, python=py) for t in tasks]
    if json_out:
        print_json([c.model_dump(mode="json") | {"ok": c.ok} for c in checks])
    else:
        render_verify(checks, out_console())
    bad = [c.task for c in checks if not c.ok]
    if bad:
        raise CheckFailedError(
            f"{len(bad)} task(s) do not hold: {', '.join(bad)}.", hint="See the table above."
        )
