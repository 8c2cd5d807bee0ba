"""Fuzz suite: bounds found by a bad-input sweep of status, models, model make-tiny and cluster up.

A timeout of 1e300 s was an internal error (OverflowError) once it reached the socket; make-tiny
--seed -1 was an internal error after the folder was made; a catalog path that is a pipe or a device
was said not to exist; cluster up --object-store-mb refused 78 to 81 (its help said 78) naming an
internal field, and took 1e300.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuzz_helpers import Case, FuzzRun, case

CASES = [
    case("status:timeout-huge", "status http://127.0.0.1:1 --timeout 1e300", 2, "--timeout", "2592000"),
    case(
        "cluster:step-timeout-huge",
        "cluster up --head 10.0.0.1 --step-timeout 1e300 --dry-run",
        2,
        "--step-timeout",
        "2592000",
    ),
    case(
        "cluster:object-store-under-ray-minimum",
        "cluster up --head 10.0.0.1 --object-store-mb 78 --dry-run",
        2,
        "--object-store-mb",
        "at least 82",
    ),
    case(
        "cluster:object-store-huge",
        "cluster up --head 10.0.0.1 --object-store-mb 1e300 --dry-run",
        2,
        "--object-store-mb",
        "at most 1000000000",
    ),
    case(
        "cluster:python-empty",
        ["cluster", "up", "--head", "10.0.0.1", "--python", "", "--dry-run"],
        2,
        "--python ''",
        "is not a program",
    ),
    case("make-tiny:negative-seed", "model make-tiny {tmp}/tiny --seed -1", 2, "--seed", "0 or more"),
    case(
        "models:catalog-a-fifo", "models", 2, "{fifo}", "named pipe", env={"LLMDECK_CATALOG_PATHS": "{fifo}"}
    ),
    case(
        "models:catalog-a-device",
        "models",
        2,
        "/dev/null",
        "device",
        env={"LLMDECK_CATALOG_PATHS": "/dev/null"},
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("c", CASES)
def test_bad_input(c: Case, fuzz_env: dict[str, str], tmp_path: Path, fuzz_run: FuzzRun) -> None:
    fifo = tmp_path / "catalog-fifo.yaml"
    os.mkfifo(fifo)
    fuzz_run(c, {**fuzz_env, "fifo": str(fifo)})
    assert not (tmp_path / "tiny").exists()  # make-tiny refuses before it makes the folder
