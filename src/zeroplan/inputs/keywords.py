"""Options given as Python keyword arguments (the API): a name no command takes is an InputError with the
closest real one."""

from __future__ import annotations

import difflib
from typing import Any

from zeroplan.core.errors import InputError


def refuse_unknown(given: dict[str, Any], known: set[str], command: str) -> None:
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1)
            raise InputError(name, f"is not an option of {command}",
                             f"did you mean {close[0]}?" if close else f"see `zeroplan {command} --help`")
