"""Help screens that read at 80 columns: option names are never cut ("--allgather-bucket-si…") and the
help text keeps most of the width. typer builds its option tables with rich's Table and no column
settings, so rich shrinks whichever column it likes; this keeps the flag columns whole and puts a
boolean's negative form (--no-flash-attention) under its positive one instead of in a column of its
own that would take 24 characters from every row."""

from __future__ import annotations

from typing import Any


def keep_option_names_whole() -> None:
    try:  # rich comes with typer (zeroplan's own output never uses it); without it typer draws plain help
        import typer.rich_utils as rich_utils
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        return

    if getattr(rich_utils.Table, "_zeroplan_whole_names", False):
        return

    class OptionsTable(Table):
        _zeroplan_whole_names = True

        def add_row(self, *renderables: Any, **kwargs: Any) -> None:
            cells = list(renderables)
            first = len(cells) - 6  # typer's row: [required], long, short, negative long, negative short, type, help
            if first >= 0 and all(isinstance(cell, Text) for cell in cells[first:first + 4]):
                long_names, negative = cells[first], cells[first + 2]
                if negative.plain:
                    long_names = Text.assemble(long_names, "\n", negative)
                cells[first], cells[first + 2] = long_names, Text("")
            super().add_row(*cells, **kwargs)
            for column in self.columns[:-1]:  # flags, metavars and markers: never wrapped or cut
                column.no_wrap = True
                column.overflow = "ignore"

    rich_utils.Table = OptionsTable  # type: ignore[misc]  # typer help draws rich_utils.Table: swap in ours
