"""The HTML page of eval results (`report --html`, `eval --html`): one self-contained file, no script.

One result: the environment (model, server flags, client), a row per task run, and per run its hidden
tests, turns (tokens, tools, the server's TTFT) and transcript. Several results: serving configurations
side by side on the same tasks — each task's hidden tests passed per file, the server's metrics per file,
and the server flags that differ between them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llmdeck import __version__
from llmdeck.evals.results import EvalResult, TaskRun
from llmdeck.evals.tables import run_row


def _plain(cell: str) -> str:
    """A rich-markup cell as plain text (the template escapes it)."""
    import re

    return re.sub(r"\[/?[a-z ]*\]", "", cell)


def environment(result: EvalResult, file: str) -> dict[str, str]:
    t, h = result.target, result.host
    return {
        "File": file,
        "Model": t.model,
        "Server": t.base_url + (f" ({t.server_name})" if t.server_name else ""),
        "Server version": t.server_version or "unknown",
        "Server flags": " ".join(t.server_args)
        if t.server_args
        else "not known (the server was given as a URL)",
        "Max model len": str(t.max_model_len or "unknown"),
        "Client": f"{result.client} {result.client_version or ''}".strip(),
        "Thinking": result.thinking,
        "KV cache (/metrics)": ", ".join(f"{k}={v}" for k, v in (result.server_cache_config or {}).items())
        or "-",
        "Suite": result.suite or ", ".join(i.name for i in result.tasks),
        "Host": f"{h.hostname} · {h.platform} · {h.cpu_count} CPUs · {', '.join(h.gpus) or 'no GPU'}",
        "Written": f"{result.created_at:%Y-%m-%d %H:%M UTC} by llmdeck {result.llmdeck_version}",
        "Status": result.status,
    }


def _run_view(run: TaskRun, letter: str) -> dict[str, Any]:
    a = run.agent
    return {
        "title": f"{run.task} #{run.repeat}",
        "anchor": f"run-{letter}-{run.task}-{run.repeat}",
        "row": [_plain(c) for c in run_row(run)],
        "passed": run.passed,
        "status": run.status,
        "error": run.error,
        "tests": run.tests.tests if run.tests else [],
        "turns": a.turns if a else [],
        "transcript": a.transcript if a else [],
        "argv": " ".join(a.argv) if a else "",
        "diff": a.diff_stat if a else "",
        "stderr": a.stderr_tail if a else "",
        "verifier_tail": run.tests.output_tail if run.tests and not run.passed else "",
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _file_stats(result: EvalResult) -> dict[str, str]:
    runs = [r for r in result.runs if r.status == "done"]
    ttft = [t.server_ttft_ms for r in runs if r.agent for t in r.agent.turns if t.server_ttft_ms is not None]
    hits = [r.server_metrics.prefix_cache_hit_rate_pct for r in runs if r.server_metrics]
    kv = [r.server_metrics.kv_cache_usage_max_pct for r in runs if r.server_metrics]
    s = result.summary

    def fmt(v: float | None, unit: str = "") -> str:
        return f"{v:.0f}{unit}" if v is not None else "-"

    return {
        "Score": f"{s.score:.2f}" if s.score is not None else "-",
        "Runs passed": f"{s.runs_passed}/{s.runs}",
        "Runs that failed to reach the model": str(s.runs_unreachable),
        "Hidden tests": f"{s.tests_passed}/{s.tests_total}",
        "Tokens (mean per run)": fmt(_mean([float(r.agent.tokens.total) for r in runs if r.agent])),
        "Turns (mean per run)": fmt(_mean([float(len(r.agent.turns)) for r in runs if r.agent])),
        "Wall s (mean per run)": fmt(_mean([r.agent.wall_s for r in runs if r.agent])),
        "Server TTFT ms (mean per turn)": fmt(_mean(ttft)),
        "Prefix-cache hits (mean)": fmt(_mean([h for h in hits if h is not None]), "%"),
        "KV cache max": fmt(max([k for k in kv if k is not None], default=None), "%"),
    }


def _flag_diff(results: list[EvalResult]) -> list[list[str]]:
    """Server flags not shared by every file: one row per flag, its value per file."""
    parsed = [
        _flags(r.target.server_args or [])
        | {f"KV cache: {k}": v for k, v in (r.server_cache_config or {}).items()}
        for r in results
    ]
    keys = sorted({k for p in parsed for k in p})
    rows = []
    for k in keys:
        vals = [p.get(k, "(not set)") for p in parsed]
        if len(set(vals)) > 1:
            rows.append([k, *vals])
    return rows


def _flags(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            name, eq, val = a.partition("=")
            if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                val, i = argv[i + 1], i + 1
            out[name] = val or "(on)"
        i += 1
    return out


def _matrix(results: list[EvalResult]) -> list[list[str]]:
    names = list(dict.fromkeys(i.name for r in results for i in r.tasks))
    rows = []
    for name in names:
        row = [name]
        for r in results:
            runs = [x for x in r.runs if x.task == name and x.tests is not None]
            if not runs:
                row.append("-")
                continue
            passed = sum(x.passed for x in runs)
            tests = sum(x.tests.passed for x in runs if x.tests)
            total = sum(x.tests.total for x in runs if x.tests)
            row.append(f"{passed}/{len(runs)} runs · {tests}/{total} tests")
        rows.append(row)
    return rows


def render_eval_html(results: list[EvalResult], files: list[str]) -> str:
    import jinja2

    from llmdeck.bench.html.page import visible_controls

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("llmdeck.evals", "templates"),
        autoescape=True,
        finalize=visible_controls,  # transcripts and tool output are an agent's data
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    css_path = Path(__file__).resolve().parents[1] / "bench" / "html" / "templates" / "report.css"
    css = css_path.read_text(encoding="utf-8")
    made = f"llmdeck {__version__}, {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}"
    letters = [chr(ord("A") + i) for i in range(len(results))]
    tasks = [sorted({i.name for i in r.tasks}) for r in results]
    return env.get_template("eval.html.jinja").render(
        css=css,
        made=made,
        compare=len(results) > 1,
        letters=letters,
        envs=[environment(r, f) for r, f in zip(results, files, strict=True)],
        stats=[_file_stats(r) for r in results],
        verdicts=[r.summary.verdict for r in results],
        flag_diff=_flag_diff(results) if len(results) > 1 else [],
        matrix=_matrix(results),
        same_tasks=all(t == tasks[0] for t in tasks),
        runs=[[_run_view(run, k) for run in r.runs] for k, r in zip(letters, results, strict=True)],
        columns=[
            "Task",
            "Verdict (limit)",
            "Hidden tests",
            "Turns",
            "Tokens",
            "Wall s",
            "Server TTFT ms",
            "Prefix-cache hits",
            "KV max",
            "Queue max",
        ],
    )


def write_eval_report(results: list[EvalResult], files: list[str], out: Path) -> int:
    """Write the page atomically (the bench page's writer: its checks and modes); its size in bytes."""
    from llmdeck.bench.html.page import write_html

    html = render_eval_html(results, files)
    write_html(out, html)
    return len(html.encode("utf-8"))
