"""Where a command's data goes: stdout, or --output FILE. Errors never go here."""

from __future__ import annotations

import sys
from pathlib import Path

from zeroplan.core.errors import InputError

FORMATS = ("table", "json", "csv", "markdown")


def check_format(name: str, allowed: tuple[str, ...] = FORMATS) -> str:
    key = name.strip().lower()
    if key not in allowed:
        raise InputError("--format", f"unknown format '{name}'", f"use one of {', '.join(allowed)}")
    return key


def write_text(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError("--output", f"cannot write {output}: {exc.strerror}", "choose a writable path") from None


def console_for(output: str | None):
    """A rich Console on stdout, or one that records for a file (plain text, no colour)."""
    from rich.console import Console

    # markup/emoji off: every string here is data, and parsing it for [tags] and :emoji: costs start-up time.
    if output is None:
        return Console(highlight=False, markup=False, emoji=False)
    return Console(record=True, width=160, force_terminal=False, color_system=None, file=_NullFile(),
                   highlight=False, markup=False, emoji=False)


class _NullFile:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
