"""Terminals that cannot show Unicode (PYTHONIOENCODING=ascii, LANG=C on old systems) get ASCII
stand-ins for the few symbols zeroplan prints, instead of a UnicodeEncodeError; and text a user or a file
supplied (a preset name, a model's recorded name, a path) never reaches a terminal as control characters."""

from __future__ import annotations

import codecs
import re
import sys

ASCII_FALLBACK = {
    "·": "*", "×": "x", "→": "->", "←": "<-", "µ": "u", "≤": "<=", "≥": ">=", "≈": "~", "−": "-", "–": "-",
    "—": "-", "…": "...", "•": "*", "█": "#", "▶": ">", "─": "-", "│": "|", "Ψ": "Psi", "α": "alpha",
    "β": "beta", "²": "^2", "³": "^3", "‖": "||", "⋅": "*", "✓": "ok", "✗": "x", "°": "deg",
}
ERRORS = "zeroplan-ascii"


def _ascii_stand_in(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start:error.end]
    return "".join(ASCII_FALLBACK.get(char, "?") for char in text), error.end


codecs.register_error(ERRORS, _ascii_stand_in)


def make_streams_safe() -> None:
    """stdout and stderr replace what their encoding cannot hold (a no-op on UTF-8 terminals)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors=ERRORS)
            except (ValueError, OSError):  # a closed or detached stream: nothing to protect
                pass


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """Control characters (ESC, BEL, carriage return, C1 controls...) shown as escapes (\\x1b), so text from a
    presets file or a config cannot move the cursor, retitle the window, colour or hide what is printed;
    newlines and tabs stay. (render.terminal adds its own colour after this.)"""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)
