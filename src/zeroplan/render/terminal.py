"""zeroplan's one terminal renderer: a text canvas with aligned, titled tables, wrapped paragraphs, ANSI
colour when the output is a terminal, and a one-line progress display on stderr.

Every command draws its table view here rather than through rich: importing rich.console and rich.table
costs about 80-100 ms per run, this module about 20 ms (numbers in CHANGELOG 'Unreleased').
Colour follows the usual conventions: NO_COLOR turns it off, FORCE_COLOR on, otherwise a TTY decides.
Text for a file (-o) is 160 columns wide and has no colour.
"""

from __future__ import annotations

import os
import sys
import textwrap
import time
from typing import TextIO

from zeroplan.render.encoding import visible

_OWN_ESCAPE = "\ue000"  # stands for ESC in the canvas's own colour sequences until text()
_STYLES = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36", "bold cyan": "1;36",
           "bold red": "1;31", "dim": "2"}


class Canvas:
    """Lines of text with optional colour, written at the end to stdout or returned for a file."""

    def __init__(self, width: int, color: bool) -> None:
        self.width = width
        self.color = color
        self.lines: list[str] = []

    @classmethod
    def for_output(cls, to_file: bool) -> Canvas:
        if to_file:
            return cls(160, color=False)
        return cls(_terminal_width(), color_wanted(sys.stdout))

    @classmethod
    def for_stream(cls, stream: TextIO, min_width: int = 0) -> Canvas:
        """For text written to `stream`: the terminal's width and colour on a TTY; otherwise no colour and at
        least `min_width` columns (a file or a pipe has no width to fit)."""
        if _isatty(stream):
            return cls(_terminal_width(stream), color_wanted(stream))
        return cls(max(_terminal_width(stream), min_width), color=False)

    def style(self, text: str, style: str | None) -> str:
        """The text in a colour: marked with a private-use character that text() turns into ESC once every
        control character that came in with the text has been escaped (a user's own ESC never passes)."""
        if not style or not self.color:
            return text
        return f"{_OWN_ESCAPE}[{_STYLES[style]}m{text}{_OWN_ESCAPE}[0m"

    def line(self, text: str = "") -> None:
        self.lines.append(text)

    def wrapped(self, text: str, indent: str = "  ", first: str | None = None) -> None:
        """A paragraph wrapped to the width, continuation lines indented under the first."""
        lead = indent if first is None else first
        for line in textwrap.wrap(text, width=max(40, self.width), initial_indent=lead,
                                  subsequent_indent=" " * len(lead), break_on_hyphens=False) or [lead]:
            self.lines.append(line)

    def print(self, item: str | Table = "", style: str | None = None) -> None:
        """A table, or text: each line wrapped to the width, continuation lines under its indentation."""
        if isinstance(item, Table):
            item.draw(self)
            return
        for raw in item.split("\n"):
            indent = " " * (len(raw) - len(raw.lstrip(" ")))
            pieces = textwrap.wrap(raw, width=max(20, self.width), subsequent_indent=indent,
                                   break_on_hyphens=False, drop_whitespace=True) or [""]
            self.lines.extend(self.style(piece, style) for piece in pieces)

    def text(self) -> str:
        """The lines, with any control character that came in with the text (a preset name from a file, a
        model's recorded name) shown as an escape; the canvas's own colour kept."""
        return visible("\n".join(self.lines)).replace(_OWN_ESCAPE, "\033") + "\n"


class Table:
    """Rows of cells under bold headers and a rule, columns two spaces apart, optional title and caption, a blank
    line after.

    align holds 'l' or 'r' per column; `wrap` names the columns that may be wrapped (at word boundaries, long
    words folded) when the table is wider than the canvas; the others keep their widest cell. A cell is a
    string (newlines start new lines in the cell) or (string, style)."""

    def __init__(self, headers: list[str], align: str | None = None, title: str | None = None,
                 caption: str | None = None, wrap: tuple[str, ...] = ()) -> None:
        self.headers = list(headers)
        self.align = align or "l" * len(headers)
        if len(self.align) != len(self.headers):
            raise ValueError("one alignment per column")
        self.title = title
        self.caption = caption
        self.wrap = [index for index, name in enumerate(self.headers) if name in wrap]
        self.rows: list[list[tuple[str, str | None]]] = []

    @property
    def row_count(self) -> int:
        return len(self.rows)

    def add_row(self, *cells) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"{len(cells)} cells for {len(self.headers)} columns")
        self.rows.append([cell if isinstance(cell, tuple) else (str(cell), None) for cell in cells])

    def widths(self, width: int) -> list[int]:
        """Each column's width: its widest line, then the wrappable ones narrowed (widest first) to fit."""
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            for index, (text, _) in enumerate(row):
                widths[index] = max(widths[index], *(len(line) for line in text.split("\n")))
        floor = {index: max(8, len(self.headers[index])) for index in self.wrap}
        while 1 + sum(widths) + 2 * (len(widths) - 1) > width:
            narrowable = [index for index in self.wrap if widths[index] > floor[index]]
            if not narrowable:
                break
            widest = max(narrowable, key=lambda index: widths[index])
            widths[widest] -= 1
        return widths

    def draw(self, canvas: Canvas) -> None:
        widths = self.widths(canvas.width)
        if self.title:
            canvas.print(self.title)
        canvas.lines.append(self._line(canvas, [(h, "bold") for h in self.headers], widths))
        canvas.lines.append(" " + "─" * (sum(widths) + 2 * (len(widths) - 1)))
        for row in self.rows:
            columns = [_cell_lines(text, widths[index], index in self.wrap) for index, (text, _) in enumerate(row)]
            for depth in range(max(len(lines) for lines in columns)):
                cells = [(lines[depth] if depth < len(lines) else "", row[index][1])
                         for index, lines in enumerate(columns)]
                canvas.lines.append(self._line(canvas, cells, widths))
        if self.caption:
            canvas.print(self.caption, style="dim")
        canvas.line()

    def _line(self, canvas: Canvas, cells: list[tuple[str, str | None]], widths: list[int]) -> str:
        parts = []
        for index, (text, style) in enumerate(cells):
            padded = text.rjust(widths[index]) if self.align[index] == "r" else text.ljust(widths[index])
            parts.append(canvas.style(padded, style) if text else padded)
        return (" " + "  ".join(parts)).rstrip()


def _cell_lines(text: str, width: int, wrap: bool) -> list[str]:
    lines = text.split("\n")
    if not wrap:
        return lines
    wrapped: list[str] = []
    for line in lines:
        wrapped += textwrap.wrap(line, width=width, break_on_hyphens=False) or [""]
    return wrapped


def color_wanted(stream: TextIO) -> bool:
    """NO_COLOR off, FORCE_COLOR on, otherwise colour on a terminal that is not TERM=dumb."""
    if os.environ.get("FORCE_COLOR"):
        return True
    return not os.environ.get("NO_COLOR") and _isatty(stream) and os.environ.get("TERM") != "dumb"


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _terminal_width(stream: TextIO | None = None) -> int:
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size((stream or sys.stdout).fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


class ProgressLine:
    """'label  [#####-----]  12/40  0:03' redrawn in place on stderr, at most ten times a second; close()
    erases it. Disabled (a no-op) unless `enabled` and stderr is a terminal."""

    def __init__(self, label: str, total: int, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and _isatty(self.stream)
        self.label = label
        self.total = max(1, total)
        self.done = 0
        self.start = time.perf_counter()
        self.drawn_at = 0.0
        self.shown = False

    def update(self, done: int | None = None, label: str | None = None, advance: int = 0,
               force: bool = False) -> None:
        if done is not None:
            self.done = done
        self.done += advance
        if label is not None:
            self.label = label
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and self.shown and now - self.drawn_at < 0.1:
            return
        self.drawn_at = now
        elapsed = int(now - self.start)
        counts = f"{self.done}/{self.total}"
        width = _terminal_width(self.stream) - 1
        bar_width = max(0, min(40, width - len(self.label) - len(counts) - 15))
        filled = bar_width * min(self.done, self.total) // self.total
        bar = f"[{'#' * filled}{'-' * (bar_width - filled)}]  " if bar_width >= 5 else ""
        text = f"{self.label}  {bar}{counts}  {elapsed // 60}:{elapsed % 60:02d}"[:max(1, width)]
        self.stream.write("\r" + text + "\033[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


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


class LateProgress:
    """A ProgressLine on stderr for long work that appears only after `after_s` seconds and only on a terminal
    (a quick run, a pipe or a file never sees it); call it with (done, total), then close()."""

    def __init__(self, label: str, enabled: bool = True, after_s: float = 0.3, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and _isatty(self.stream)
        self.label, self.after_s = label, after_s
        self.start = time.perf_counter()
        self.bar: ProgressLine | None = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.start < self.after_s or done >= total:
                return
            self.bar = ProgressLine(self.label, total, stream=self.stream)
        self.bar.update(done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
