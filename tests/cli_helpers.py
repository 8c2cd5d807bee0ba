"""Running the llmdeck CLI in-process in tests: exit code, stdout, stderr."""

from __future__ import annotations

import pytest

from llmdeck.cli.app import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``llmdeck ARGS`` through the real entry point (error mapping included)."""
    with pytest.raises(SystemExit) as info:
        main(args)
    out, err = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 1), out, err
