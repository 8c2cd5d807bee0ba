"""Parts of `llmdeck bench`: option parsing (sampling flags, comma lists) and the live progress on stderr."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from llmdeck.util.safetext import safe_text


def sampling(temperature: float | None, top_p: float | None, top_k: int | None) -> dict[str, float | int]:
    """The sampling flags that were given, checked like vLLM checks them (a bad one is exit 2 here,
    not a failed request for every prompt of the run)."""
    from llmdeck.errors import UsageError

    if temperature is not None and temperature < 0:
        raise UsageError(
            f"--temperature must be 0 or more, not {temperature:g}.", hint="Use 0 for greedy decoding."
        )
    if top_p is not None and not 0 < top_p <= 1:
        raise UsageError(f"--top-p must be in (0, 1], not {top_p:g}.", hint="Use e.g. --top-p 0.95.")
    if top_k is not None and top_k < -1:
        raise UsageError(f"--top-k must be -1 (off) or more, not {top_k}.", hint="Use e.g. --top-k 20.")
    given = {"temperature": temperature, "top_p": top_p, "top_k": top_k}
    return {k: v for k, v in given.items() if v is not None}


def check_local_inputs(prompts: Any, tokenizer: str | None) -> None:
    """--prompts and --tokenizer, checked before the server is asked anything: a missing file, a folder,
    a pipe or a device had been reported as "Cannot connect" (exit 1) when the server was down too."""
    from llmdeck.bench.workloads import check_tokenizer_path, read_prompt_rows

    if prompts is not None:
        read_prompt_rows(prompts)
    if tokenizer is not None:
        check_tokenizer_path(tokenizer)


def counts(values: list[str], flag: str) -> list[int | None]:
    """A comma list of whole numbers (inf/none/max: no limit), e.g. --max-concurrency 1,4,16."""
    from llmdeck.errors import UsageError

    out: list[int | None] = []
    for part, value in zip(_parts(values), floats(values, flag), strict=True):
        if value is not None and not value.is_integer():  # 2.5, and 1e400 (a float's inf)
            raise UsageError(
                f"{flag} {part!r} is not a whole number.", hint=f"Use e.g. {flag} 1,4,16 or inf."
            )
        out.append(None if value is None else int(value))
    return out


def _parts(values: list[str]) -> list[str]:
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def floats(values: list[str], flag: str) -> list[float | None]:
    """A comma list of positive numbers (inf/none/max: no limit); a flag given with no number at all
    (``--max-concurrency ','``) is refused, not read as its default."""
    from llmdeck.errors import UsageError

    if values and not _parts(values):
        raise UsageError(f"{flag} was given no number.", hint=f"Use e.g. {flag} 1,4,16 or inf.")
    out: list[float | None] = []
    for v in values:
        for part in v.split(","):
            p = part.strip().lower()
            if not p:
                continue
            if p in {"inf", "none", "max"}:
                out.append(None)
                continue
            try:
                f = float(p)
                if f != f:  # nan
                    raise ValueError(p)
            except ValueError:
                raise UsageError(
                    f"{flag} {part!r} is not a number.", hint=f"Use e.g. {flag} 1,2,4 or inf."
                ) from None
            if f <= 0:
                raise UsageError(f"{flag} must be positive, not {part!r}.", hint=f"Use e.g. {flag} 1 or inf.")
            out.append(f)
    return out


class RichProgress:
    """Live progress on stderr."""

    def __init__(self, console: Any) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task: Any = None

    def __enter__(self) -> RichProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def scenario_start(self, index: int, total: int, spec: Any) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(
            f"[{index + 1}/{total}] {escape(safe_text(spec.label()))}",  # TextColumn parses markup
            total=spec.num_prompts if spec.duration_s is None else None,
            failed=0,
        )

    def request_done(self, done: int, failed: int, total: int) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=done, failed=failed)

    def scenario_end(self, result: Any) -> None:
        from llmdeck.bench.tables import scenario_row

        row = [escape(safe_text(cell)) for cell in scenario_row(result)]  # names and errors are data
        self.console.print(
            f"[bold]{row[0]}[/]: {row[1]} ok/failed, TTFT mean {row[2]} p99 {row[3]}, TPOT mean {row[4]}, "
            f"{row[5]} tok/s -> {row[6]}",
            highlight=False,
        )

    def message(self, text: str) -> None:
        self.console.print(f"[dim]{escape(safe_text(text))}[/]", highlight=False)


# BenchRequest fields whose option has another name
_FLAGS = {
    "request_rates": "--request-rate",
    "max_concurrencies": "--max-concurrency",
    "duration_s": "--duration",
    "metrics_interval_s": "--metrics-interval",
}


def parse_request(fields: dict[str, Any]) -> Any:
    """The BenchRequest of the CLI's options (normalized); exit 2 naming the option that is wrong, and
    for a bad --prompts or --tokenizer (checked here, before any question to a server)."""
    from pydantic import ValidationError

    from llmdeck.bench.request import BenchRequest
    from llmdeck.errors import UsageError

    try:
        req = BenchRequest.model_validate(fields).normalized()
        check_local_inputs(fields["prompts"], fields["tokenizer"])
        return req
    except ValidationError as exc:
        first = exc.errors()[0]
        where = str(first["loc"][0]) if first.get("loc") else "option"
        flag = _FLAGS.get(where, "--" + where.replace("_", "-"))
        raise UsageError(
            f"{flag} {first.get('input')!r}: {first['msg']}.",
            hint="See `llmdeck bench --help`.",
        ) from exc
