"""An eval task folder, read in one place: ``task.toml`` (TOML, validated into the caller's model,
``evals.spec.TaskFile``), ``instruction.md`` and ``followups/NN.md`` (the prompts, UTF-8 text), and
the parts that must exist (``workspace/``, ``tests/``). Files are read only when they are regular
files of a bounded size (``util.localfile``); every failure is one :class:`ConfigError` naming the
file (exit 2). What the task means (running it, verifying it) is ``evals``'.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from llmdeck.errors import ConfigError
from llmdeck.util.localfile import kind_of, read_regular_text

MAX_TASK_FILE_BYTES = 1 << 20  # task.toml and each prompt: a few KB
MAX_TASK_ENTRIES = 20_000  # files and folders in one of workspace/, tests/, solution/, wrong/
LAYOUT_HINT = (
    "A task folder holds task.toml, instruction.md, workspace/, tests/ (hidden pytest files) and "
    "optionally followups/NN.md, solution/ and wrong/; see `llmdeck eval tasks`."
)
M = TypeVar("M", bound=BaseModel)


def read_task_folder(root: Path, model: type[M]) -> tuple[M, str, list[str]]:
    """(``task.toml`` as ``model``, the instruction, the follow-up prompts) of the task folder ``root``."""
    toml_path = root / "task.toml"
    if not toml_path.is_file():
        raise ConfigError(f"{root} is not an eval task: it has no task.toml.", hint=LAYOUT_HINT)
    try:
        config = model.model_validate(tomllib.loads(read_regular_text(toml_path, MAX_TASK_FILE_BYTES)))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{toml_path} cannot be read as TOML ({exc}).", hint=LAYOUT_HINT) from exc
    except ValidationError as exc:
        raise ConfigError(f"{toml_path}: {_problem(exc)}.", hint=LAYOUT_HINT) from exc
    except (RecursionError, ValueError) as exc:  # x = [[[[... (tomllib recurses); an int of 5,000 digits
        why = "it nests too deeply" if isinstance(exc, RecursionError) else "a number too long to read"
        raise ConfigError(f"{toml_path} cannot be read as TOML ({why}).", hint=LAYOUT_HINT) from None
    for part in ("instruction.md", "workspace", "tests"):
        if not (root / part).exists():
            raise ConfigError(f"The eval task {root} has no {part}.", hint=LAYOUT_HINT)
    for part in ("workspace", "tests"):  # copied as folders by every run: a file here broke the run
        if not (root / part).is_dir():
            raise ConfigError(f"The eval task's {part} {root / part} is not a folder.", hint=LAYOUT_HINT)
    for part in ("workspace", "tests", "solution", "wrong"):
        _check_copyable(root / part)
    followups = sorted((root / "followups").glob("*.md")) if (root / "followups").is_dir() else []
    prompts = read_prompt(root / "instruction.md"), [read_prompt(p) for p in followups]
    if not _has_tests(root / "tests"):
        raise ConfigError(
            f"The eval task's tests {root / 'tests'} hold no test file (test_*.py or *_test.py): no run "
            "could be scored.",
            hint=LAYOUT_HINT,
        )
    return config, *prompts


def _check_copyable(folder: Path) -> None:
    """Every run copies these folders into its sandbox: folders and regular files only (a FIFO had
    ended the run as an internal error; a symlink would bring in what it points to, or loop)."""
    if not folder.is_dir():
        return
    seen = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            seen += 1
            kind = _odd_kind(path)
            if kind is not None:
                raise ConfigError(
                    f"The eval task's {path} is {kind}: each run copies {folder.name}/ into its sandbox, "
                    "which takes folders and regular files only.",
                    hint="Replace it with a regular file (or remove it).",
                )
        if seen > MAX_TASK_ENTRIES:
            raise ConfigError(
                f"The eval task's {folder} holds more than {MAX_TASK_ENTRIES:,} files and folders.",
                hint="A task is a small repository: remove what the agent does not need.",
            )


def _odd_kind(path: Path) -> str | None:
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return None if stat.S_ISDIR(mode) or stat.S_ISREG(mode) else kind_of(mode)


def _problem(exc: ValidationError) -> str:
    """``where: what`` of the first problem, in TOML's words (a section, not a Python model)."""
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first.get("loc", ()))
    if first.get("type") in {"model_type", "model_attributes_type", "dict_type"}:
        return f"{where}: should be a table ([{where}] with keys under it), not {first.get('input')!r}"
    return f"{where}: {first.get('msg')}"


def _has_tests(folder: Path) -> bool:
    """Whether pytest's default discovery finds a test file under ``folder``."""
    return any(p.is_file() for pattern in ("test_*.py", "*_test.py") for p in folder.rglob(pattern))


def read_prompt(path: Path) -> str:
    """A prompt file's text; ConfigError when it is a folder, unreadable, not UTF-8 text or empty."""
    try:
        text = read_regular_text(path, MAX_TASK_FILE_BYTES).strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"The eval task prompt {path} cannot be read ({why}).", hint=LAYOUT_HINT) from exc
    if not text:
        raise ConfigError(
            f"The eval task prompt {path} is empty: the agent would be asked nothing and scored on it.",
            hint="Write the task's prompt in it (what the agent is to do), or remove the task.",
        )
    return text
