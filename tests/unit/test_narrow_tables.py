"""A table on a terminal too narrow for it: at ``COLUMNS=20`` every cell of `keys list`, `status` and
`models` had been "…" (exit 0, nothing readable). Such a table is printed one field per line."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from llmdeck.cli.output import _console_class


def _keys_table() -> Table:
    table = Table(title="keys")
    for col in ("name", "starts with", "models", "rpm", "created"):
        table.add_column(col)
    table.add_row("alice", "sk-llmdeck-8qlS…", "all", "-", "2026-12-06 06:43 UTC")
    table.add_row("bob", "sk-llmdeck-x2Pq…", "[green]coder[/]", "60", "2026-12-07 10:00 UTC")
    return table


def _shown(width: int) -> str:
    buf = io.StringIO()
    _console_class()(file=buf, width=width, soft_wrap=True).print(_keys_table())
    return buf.getvalue()


def test_a_table_too_narrow_for_its_columns_prints_one_field_per_line() -> None:
    text = _shown(20)
    assert "name: alice" in text and "created: 2026-12-06 06:43 UTC" in text, text
    assert "models: coder" in text and "rpm: 60" in text, text
    assert "┃" not in text and "│" not in text


@pytest.mark.parametrize("width", [80, 200])
def test_a_table_that_fits_stays_a_table(width: int) -> None:
    text = _shown(width)
    assert "┃ name" in text and "alice" in text and "name: alice" not in text, text
