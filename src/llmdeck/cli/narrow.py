"""Tables on a terminal too narrow for them: one field per line instead.

rich squeezes a table into any width; at ``COLUMNS=20`` every cell of ``keys list``, ``status`` or
``models`` became "…" (exit 0, nothing readable). When a column would get fewer than
:data:`MIN_CELL` characters of a value longer than that, the table is printed as records instead:
each row a block of ``header: value`` lines, the rows apart by a blank line.
"""

from __future__ import annotations

from typing import Any

MIN_CELL = 3  # characters of a cell's text below which a value is no longer readable


def fit_to_width(console: Any, renderable: Any) -> Any:
    """``renderable`` itself, or a table too wide for ``console`` as its records (module docstring)."""
    from rich.table import Table

    if not isinstance(renderable, Table) or not renderable.columns or not renderable.row_count:
        return renderable
    if renderable.width is not None or not _squeezed(console, renderable):
        return renderable
    return _records(console, renderable)


def _squeezed(console: Any, table: Any) -> bool:
    """A column gets fewer than MIN_CELL characters of text it needs (rich's own width sharing)."""
    options = console.options
    try:  # rich's own arithmetic (stable since rich 10; any surprise keeps the table as it was)
        widths = table._calculate_column_widths(
            console, options.update_width(console.width - table._extra_width)
        )
        needs = [table._measure_column(console, options, col).maximum for col in table.columns]
    except Exception:
        return False
    pad = table.padding[1] + table.padding[3] if table.padding else 0
    return any(w - pad < min(n - pad, MIN_CELL) for w, n in zip(widths, needs, strict=False))


def _records(console: Any, table: Any) -> Any:
    from rich.console import Group
    from rich.text import Text

    def text(value: Any) -> Any:
        return console.render_str(value) if isinstance(value, str) else value

    lines: list[Any] = []
    if table.title:
        lines.append(text(table.title))
    for i in range(table.row_count):
        if lines:
            lines.append(Text(""))
        for col in table.columns:
            cell = list(col.cells)[i]
            label = text(col.header)
            label_plain = label.plain if isinstance(label, Text) else str(col.header)
            value = text(cell)
            if isinstance(value, Text):
                lines.append(Text.assemble((f"{label_plain}: " if label_plain else ""), value))
            else:
                lines += [Text(f"{label_plain}:"), value]
    return Group(*lines)
