"""The trials file (``trials.jsonl`` in the tune's folder): a header line, then one line per trial.

Each trial is appended with one ``write`` of one whole line on an ``O_APPEND`` descriptor, then
fsync'd: a reader sees whole trials only; a line cut short by a crash (no newline at the end) is
ignored and that trial runs again. An interrupted tune resumes from it: the header must match the
new request (model, engine, base flags, workload, load, SLOs), or the folder is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

from llmdeck.errors import UsageError
from llmdeck.formats.tune_trials import read_trials_file
from llmdeck.tune.schema import TRIAL_KIND, TRIALS_KIND, TRIALS_SCHEMA_VERSION, TrialRecord, TrialsHeader
from llmdeck.util.atomic import atomic_write_text
from llmdeck.util.owned import is_made_by_llmdeck, mark_made

TRIALS_NAME = "trials.jsonl"
MADE_WHAT = "llmdeck tune"


def read_trials(path: Path) -> tuple[TrialsHeader, list[TrialRecord]]:
    """The header and every whole trial; a torn last line (a crash mid-write) is dropped."""
    return read_trials_file(
        path, TrialsHeader, TrialRecord, kinds=(TRIALS_KIND, TRIAL_KIND), version=TRIALS_SCHEMA_VERSION
    )


def append_trial(path: Path, record: TrialRecord) -> None:
    """Append one trial as one line, atomically (one write on O_APPEND, then fsync). A torn last line
    (a crash in the middle of our own write) is cut off first: it holds no whole trial."""
    data = (record.model_dump_json() + "\n").encode("utf-8")
    _cut_torn_tail(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _cut_torn_tail(path: Path) -> None:
    with open(path, "rb+") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size == 0:
            return
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        keep = fh.read().rfind(b"\n") + 1
        fh.truncate(keep)


def write_header(path: Path, header: TrialsHeader) -> None:
    atomic_write_text(path, header.model_dump_json() + "\n")


def open_out_dir(out: Path, header: TrialsHeader, *, resume: bool) -> tuple[TrialsHeader, list[TrialRecord]]:
    """Create the tune's folder, or resume from its trials file. Exit 2 when the folder holds someone
    else's files, another tune's trials (another model, workload, load or SLO), or (with ``--resume``)
    no trials at all."""
    path = out / TRIALS_NAME
    if out.exists() and not out.is_dir():
        from llmdeck.util.localfile import kind_of

        raise UsageError(
            f"--out {out} is {kind_of(out.stat().st_mode)}, not a folder.",
            hint="Give a folder (new, or an earlier tune's) for the tune's results.",
        )
    if path.is_file():
        from llmdeck.util.gz import is_gzip

        # read_trials inflates it, but a plain line appended after the gzip stream makes it unreadable
        if is_gzip(path):
            raise UsageError(
                f"--out {out}: its {TRIALS_NAME} is gzipped; a tune appends to it.",
                hint=f"Unpack it in place (zcat {TRIALS_NAME} > t && mv t {TRIALS_NAME}) to resume, or pick "
                "another --out.",
            )
        old, records = read_trials(path)
        if old.fingerprint != header.fingerprint and not records:  # nothing measured: nothing to lose
            write_header(path, header)
            return header, []
        if old.fingerprint != header.fingerprint:
            raise UsageError(
                f"--out {out} holds the trials of another tune ({_what(old)}), not of this one "
                f"({_what(header)}); resuming would mix them.",
                hint="Pick another --out folder, or give the same model, workload, load and --slo "
                "to resume that tune.",
            )
        return old, records
    if resume:
        raise UsageError(f"--resume: {out} holds no trials file ({TRIALS_NAME}).", hint="Drop --resume.")
    if out.is_dir() and any(out.iterdir()) and not is_made_by_llmdeck(out):
        raise UsageError(
            f"--out {out} is a folder of other files, not a tune's.", hint="Pick a new or empty folder."
        )
    try:
        mark_made(out, MADE_WHAT, private=True)  # the trials' engine logs go there (logs/)
        write_header(path, header)
    except OSError as exc:  # a file on the way (--out notes.txt/sub), /proc, a read-only disk
        raise UsageError(
            f"--out {out}: cannot create the tune's folder there ({exc.strerror or exc}).",
            hint="Give a new folder in a place you can write to.",
        ) from exc
    return header, []


def _what(h: TrialsHeader) -> str:
    r = h.request
    slo = ",".join(f"{t.key}={t.limit_ms:g}ms" for t in r.slo)
    return f"{r.base.model}, {r.workload}, concurrency {r.load.concurrency}, --slo {slo}"


def trials_path_of(path: Path) -> Path | None:
    """The trials file ``path`` names — a tune folder holding one, or the file itself (its first line
    says so) — else None."""
    from llmdeck.util.kindsniff import has_kind

    candidate = path / TRIALS_NAME if path.is_dir() else path
    if has_kind(candidate, TRIALS_KIND):
        return candidate
    if path.is_dir() and candidate.exists():  # a tune folder whose trials file is broken: say how
        read_trials(candidate)
    return None
