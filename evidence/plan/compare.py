"""Compare `llmdeck plan` with the start-up lines of real vLLM runs (issue 4 acceptance).

Input: runs.jsonl written by device_plan_vs_vllm.sh (model, context, utilization, flags, log path).
For each run it parses the vLLM log (block size, Available KV cache memory, GPU KV cache size,
Maximum concurrency) and runs `python -m llmdeck plan MODEL_DIR --machine h200 ... --json -- FLAGS`
twice: once with llmdeck's own predicted KV memory, once with `--kv-cache-memory-gib` set to vLLM's
printed "Available KV cache memory" (isolating the KV math from the overhead model). Writes
compare.json and compare.md with relative errors and pass/fail at 2%.

`python evidence/plan/compare.py --selftest --out DIR` does the same on the committed fixture logs
(shared/fixtures/vllm-0.22.0-h200) with the bundled configs, without a GPU.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TOL = 0.02
REPO = Path(__file__).resolve().parents[2]
PATTERNS = {
    "block_size": r"Setting attention block size to (\d+) tokens",
    "backend_block_size": r"Setting kv cache block size to (\d+) for",
    "weights_gib": r"Model loading took ([\d.]+) GiB",
    "available_gib": r"Available KV cache memory: ([\d.]+) GiB",
    "kv_tokens": r"GPU KV cache size: ([\d,]+) tokens",
    "max_concurrency": r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x",
    "vllm_version": r"Initializing a V1 LLM engine \(v([\d.]+)\)",
    "error": r"((?:AssertionError|ValueError|RuntimeError|NotImplementedError|torch\.OutOfMemoryError): .+)",
}


def parse_log(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8", errors="replace")
    out: dict[str, Any] = {}
    for key, pat in PATTERNS.items():
        m = re.search(pat, text)
        if m:
            raw = m.group(1).replace(",", "")
            out[key] = raw if key in ("vllm_version", "error") else float(raw)
    if "block_size" not in out and "kv_tokens" in out:
        # not hybrid: the backend's size when it is not vLLM's default 16 (that one is not logged)
        out["block_size"] = out.get("backend_block_size", 16.0)
    return out


def run_plan(
    model_dir: Path, run: dict[str, Any], kv_gib: float | None, version: str = "0.22.0"
) -> dict[str, Any]:
    flags = shlex.split(run["flags"])
    cmd = [
        sys.executable,
        "-m",
        "llmdeck",
        "plan",
        str(model_dir),
        "--machine",
        "h200",
        "--engine",
        "venv",
        "--vllm-version",
        version,
        "--json",
    ]
    if kv_gib is not None:
        cmd += ["--kv-cache-memory-gib", str(kv_gib)]
    cmd += ["--", *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1, 2) or not proc.stdout.strip():
        return {"error": (proc.stderr or proc.stdout).strip()[-600:], "rc": proc.returncode}
    data = json.loads(proc.stdout)
    if "error" in data and "plan" in data:  # does not fit: the JSON error object
        data = data["plan"]
    mem = data["memory"]
    return {
        "block_size": mem["layout"]["block_size"],
        "available_gib": mem["available_kv_gib"],
        "weights_gib": mem["weights_gib"],
        "overhead_gib": sum(
            mem["overhead"][k] for k in ("non_torch_gib", "activation_gib", "sampler_gib", "cuda_graph_gib")
        ),
        "kv_tokens": mem["capacity"]["kv_cache_tokens"],
        "max_concurrency": mem["capacity"]["max_concurrency"],
        "lint": [f["rule"] for f in data["findings"] if f["severity"] == "error"],
    }


def rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return (a - b) / b


def compare(runs: list[dict[str, Any]], models_root: Path) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        row: dict[str, Any] = {
            k: run.get(k) for k in ("run", "model", "context", "utilization", "flags", "status")
        }
        log = parse_log(Path(run["log"])) if run.get("log") and Path(run["log"]).is_file() else {}
        row["vllm"] = log
        model_dir = models_root / run["model"]
        version = str(log.get("vllm_version") or "0.22.0")
        if run.get("status") != "ok" or "kv_tokens" not in log:
            if run.get("status") == "ok":
                row["status"] = "no-kv-lines"
            if log.get("error"):  # a failed start: did plan's lint see it coming?
                row["llmdeck_lint_errors"] = run_plan(model_dir, run, None, version).get("lint")
            rows.append(row)
            continue
        given = run_plan(model_dir, run, log.get("available_gib"), version)
        predicted = run_plan(model_dir, run, None, version)
        row["llmdeck_given_available"] = given
        row["llmdeck_predicted"] = predicted
        checks = {}
        for label, res in (("given", given), ("predicted", predicted)):
            if "error" in res:
                checks[label] = {"pass": False, "error": res["error"]}
                continue
            errs = {
                "block_size": rel(res["block_size"], log.get("block_size")),
                "kv_tokens": rel(res["kv_tokens"], log["kv_tokens"]),
                "max_concurrency": rel(res["max_concurrency"], log["max_concurrency"]),
            }
            if label == "predicted":
                errs["available_gib"] = rel(res["available_gib"], log.get("available_gib"))
                errs["weights_gib"] = rel(res["weights_gib"], log.get("weights_gib"))
            core = [errs["block_size"], errs["kv_tokens"], errs["max_concurrency"]]
            checks[label] = {
                "rel_errors": errs,
                "pass": all(e is not None and abs(e) <= TOL for e in core),
            }
        row["checks"] = checks
        rows.append(row)
    return rows


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.2f}%"


def _row_line(r: dict[str, Any]) -> str:
    """One run's row of compare.md."""
    if "checks" not in r:
        err = (r.get("vllm") or {}).get("error", "")
        lint = r.get("llmdeck_lint_errors")
        note = f"{r.get('status')}" + (f": {err[:90]}" if err else "")
        note += f" — plan's lint: {', '.join(lint)}" if lint else ""
        return f"| {r.get('run')} | {r['model']} | {r['context']} | {r['utilization']} | {note} |" + " |" * 8
    v, g, p = r["vllm"], r["checks"]["given"], r["checks"]["predicted"]
    pv = r["llmdeck_predicted"]
    ge, pe = g.get("rel_errors", {}), p.get("rel_errors", {})
    return (
        f"| {r['run']} | {r['model']} | {r['context']} | {r['utilization']} | "
        f"{int(v.get('block_size', 0))} | "
        f"{v.get('available_gib')} | {int(v['kv_tokens']):,} | {v['max_concurrency']:.2f}x | "
        f"{pct(ge.get('kv_tokens'))} / {pct(ge.get('max_concurrency'))} | "
        f"{'PASS' if g['pass'] else 'FAIL'} | "
        f"{pv.get('available_gib', float('nan')):.2f} ({pct(pe.get('available_gib'))}) | "
        f"{pct(pe.get('kv_tokens'))} / {pct(pe.get('max_concurrency'))} | "
        f"{'PASS' if p['pass'] else 'FAIL'} |"
    )


def write_outputs(rows: list[dict[str, Any]], out: Path, device: dict[str, Any], source: str) -> None:
    sys.path.insert(0, str(REPO / "src"))
    from llmdeck import __version__

    out.mkdir(parents=True, exist_ok=True)
    versions = sorted(
        {r["vllm"].get("vllm_version") for r in rows if r.get("vllm") and r["vllm"].get("vllm_version")}
    )
    doc = {
        "schema_version": 1,
        "llmdeck_version": __version__,
        "vllm_versions": versions,
        "device": device,
        "source": source,
        "tolerance": TOL,
        "rows": rows,
        "summary": {
            "runs": len(rows),
            "compared": sum(1 for r in rows if "checks" in r),
            "pass_given": sum(1 for r in rows if r.get("checks", {}).get("given", {}).get("pass")),
            "pass_predicted": sum(1 for r in rows if r.get("checks", {}).get("predicted", {}).get("pass")),
        },
    }
    (out / "compare.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        f"# llmdeck plan vs vLLM start-up lines ({source})",
        "",
        f"llmdeck {__version__}; vLLM {', '.join(versions) or '?'}; device {device.get('gpu', '?')}"
        + (
            f", cudaMemGetInfo total {device['gpu_total_bytes'] / 2**30:.2f} GiB"
            if device.get("gpu_total_bytes")
            else ""
        ),
        "",
        "Relative errors of llmdeck against vLLM's own lines. *given*: llmdeck's KV math fed vLLM's printed",
        "`Available KV cache memory`; *predicted*: llmdeck's own memory model. Pass = block "
        "size, KV tokens and",
        f"max concurrency all within {TOL:.0%}.",
        "",
        "| run | model | ctx | util | vLLM block | vLLM avail GiB | vLLM tokens | vLLM conc | "
        "given: tokens / conc | "
        "given | predicted avail GiB | predicted: tokens / conc | predicted |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row_line(r) for r in rows]
    s = doc["summary"]
    lines += [
        "",
        f"Compared {s['compared']} of {s['runs']} runs: given {s['pass_given']} pass, "
        f"predicted {s['pass_predicted']} pass.",
    ]
    (out / "compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


BUNDLED = {
    "qwen3-0.6b": "Qwen3-0.6B",
    "qwen3-30b-a3b": "Qwen3-30B-A3B",
    "qwen3-coder-30b-a3b": "Qwen3-Coder-30B-A3B-Instruct",
    "qwen3.6-35b-a3b": "Qwen3.6-35B-A3B",
}


def bundled_models(tmp: Path) -> Path:
    """gpu-lab's model folders (the same public configs), built from llmdeck's bundled copies."""
    configs = REPO / "src" / "llmdeck" / "catalog" / "data" / "configs"
    root = tmp / "models"
    for name, cfg in BUNDLED.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "config.json").write_bytes((configs / f"{cfg}.config.json").read_bytes())
    return root


def selftest_runs(tmp: Path) -> tuple[list[dict[str, Any]], Path]:
    fixtures = REPO.parent / "shared" / "fixtures" / "vllm-0.22.0-h200"
    configs = REPO / "src" / "llmdeck" / "catalog" / "data" / "configs"
    root = tmp / "models"
    for name, cfg in (("qwen3-0.6b", "Qwen3-0.6B"), ("qwen3.6-35b-a3b", "Qwen3.6-35B-A3B")):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "config.json").write_bytes((configs / f"{cfg}.config.json").read_bytes())
    runs = [
        {
            "run": 1,
            "model": "qwen3-0.6b",
            "context": 8192,
            "utilization": 0.92,
            "status": "ok",
            "flags": "--max-model-len 8192",
            "log": str(fixtures / "vllm-serve-startup-and-run.log"),
        },
        {
            "run": 2,
            "model": "qwen3.6-35b-a3b",
            "context": 131072,
            "utilization": 0.85,
            "status": "ok",
            "flags": "--max-model-len 131072 --gpu-memory-utilization 0.85 "
            "--enable-prefix-caching --kv-cache-dtype fp8 "
            "--max-num-seqs 8 --max-num-batched-tokens 4096 --language-model-only "
            "--gdn-prefill-backend triton",
            "log": str(fixtures / "hybrid-qwen3.6-35b-a3b-seed000-flags-startup-and-run.log"),
        },
    ]
    return runs, root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="?", type=Path, help="runs.jsonl from device_plan_vs_vllm.sh")
    ap.add_argument(
        "--models-root",
        type=Path,
        default=None,
        help="folders named like runs.jsonl's `model`, each with the config.json served "
        "(default /root/models; with --logs-dir: the bundled configs)",
    )
    ap.add_argument("--device", type=Path, default=None, help="device.json (GPU name and total)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--selftest", action="store_true", help="use the committed fixture logs (no GPU)")
    ap.add_argument(
        "--logs-dir",
        type=Path,
        default=None,
        help="re-run the comparison on logs copied here (each run's log is looked up by its file name), "
        "with the bundled configs as models: e.g. evidence/plan/results/logs, no GPU needed",
    )
    args = ap.parse_args()
    device: dict[str, Any] = {}
    if args.device and args.device.is_file():
        try:
            device = json.loads(args.device.read_text() or "{}")
        except json.JSONDecodeError:
            device = {}
    if args.selftest:
        with tempfile.TemporaryDirectory() as tmp:
            runs, root = selftest_runs(Path(tmp))
            rows = compare(runs, root)
        write_outputs(
            rows, args.out, {"gpu": "H200 (fixture logs)"}, "selftest on shared/fixtures/vllm-0.22.0-h200"
        )
    else:
        if args.runs is None:
            ap.error("give runs.jsonl or --selftest")
        runs = [json.loads(line) for line in args.runs.read_text().splitlines() if line.strip()]
        if args.logs_dir is None:
            rows = compare(runs, args.models_root or Path("/root/models"))
            write_outputs(rows, args.out, device, "device run")
            return 0
        for run in runs:
            if run.get("log"):
                run["log"] = str(args.logs_dir / Path(run["log"]).name)
        with tempfile.TemporaryDirectory() as tmp:
            root = args.models_root or bundled_models(Path(tmp))
            rows = compare(runs, root)
        write_outputs(rows, args.out, device, f"device logs in {args.logs_dir}, re-compared")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
