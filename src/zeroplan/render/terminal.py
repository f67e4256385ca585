"""A small text canvas for the estimate view: aligned columns, ANSI colour when the output is a terminal.

`zeroplan estimate` is the command people run at a prompt, so its table is drawn here directly rather
than through rich (whose import and layout cost about a third of the command's start-up time).
Colour follows the usual conventions: NO_COLOR turns it off, FORCE_COLOR on, otherwise a TTY decides.
"""

from __future__ import annotations

import os
import sys
import textwrap

_STYLES = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36", "bold cyan": "1;36",
           "bold red": "1;31", "dim": "2"}


class Canvas:
    """Lines of text with optional colour, written at the end to stdout or returned for a file."""

    def __init__(self, width: int, color: bool) -> None:
        self.width = width
        self.color = color
        self.lines: list[str] = []

    @classmethod
    def for_output(cls, to_file: bool) -> "Canvas":
        if to_file:
            return cls(160, color=False)
        width = _terminal_width()
        color = bool(os.environ.get("FORCE_COLOR")) or (
            not os.environ.get("NO_COLOR") and sys.stdout.isatty() and os.environ.get("TERM") != "dumb")
        return cls(width, color)

    def style(self, text: str, style: str | None) -> str:
        if not style or not self.color:
            return text
        return f"\033[{_STYLES[style]}m{text}\033[0m"

    def line(self, text: str = "") -> None:
        self.lines.append(text)

    def wrapped(self, text: str, indent: str = "  ", first: str | None = None) -> None:
        """A paragraph wrapped to the width, continuation lines indented under the first."""
        lead = indent if first is None else first
        for line in textwrap.wrap(text, width=max(40, self.width), initial_indent=lead,
                                  subsequent_indent=" " * len(lead), break_on_hyphens=False) or [lead]:
            self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _terminal_width() -> int:
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


def grid(canvas: Canvas, headers: list[str], rows: list[list[tuple[str, str | None]]], align: str) -> None:
    """Columns sized to their widest cell, two spaces apart; align holds 'l' or 'r' per column."""
    widths = [len(h) for h in headers]
    for row in rows:
        for index, (text, _) in enumerate(row):
            widths[index] = max(widths[index], len(text))

    def render(cells: list[tuple[str, str | None]]) -> str:
        parts = []
        for index, (text, style) in enumerate(cells):
            padded = text.rjust(widths[index]) if align[index] == "r" else text.ljust(widths[index])
            parts.append(canvas.style(padded, style))
        return " " + "  ".join(parts).rstrip()

    canvas.line(render([(h, "bold") for h in headers]))
    canvas.line(" " + "─" * (sum(widths) + 2 * (len(widths) - 1)))
    for row in rows:
        canvas.line(render(row))


def grid_width(headers: list[str], rows: list[list[tuple[str, str | None]]]) -> int:
    widths = [len(h) for h in headers]
    for row in rows:
        for index, (text, _) in enumerate(row):
            widths[index] = max(widths[index], len(text))
    return 1 + sum(widths) + 2 * (len(widths) - 1)
