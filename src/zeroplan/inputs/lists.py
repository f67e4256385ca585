"""Comma lists on the command line: '1,2,4' and 'cpu,nvme' (a list or tuple from Python is the same list).
The parsers at the end are the input sections' field parsers (value, field) -> tuple."""

from __future__ import annotations

from typing import Callable, overload

from zeroplan.core.errors import InputError
from zeroplan.core.memory.activations import RECOMPUTE_MODES


@overload
def parse_int_list(text: str, flag: str, minimum: int = 1) -> tuple[int, ...]: ...
@overload
def parse_int_list(text: str | None, flag: str, minimum: int = 1) -> tuple[int, ...] | None: ...
def parse_int_list(text: str | None, flag: str, minimum: int = 1) -> tuple[int, ...] | None:
    """'1,2,4' -> (1, 2, 4); None stays None."""
    if text is None:
        return None
    values = []
    for part in (p.strip() for p in _joined(text).split(",")):
        if not part.isdigit() or int(part) < minimum:
            kind = "positive whole number" if minimum == 1 else f"whole number of at least {minimum}"
            raise InputError(flag, f"'{part}' is not a {kind}", "write a comma list such as 1,2,4")
        values.append(int(part))
    if not values:
        raise InputError(flag, "is empty", "write a comma list such as 1,2,4")
    return tuple(dict.fromkeys(values))


def parse_choice_list(text: str | None, allowed: tuple[str, ...], flag: str) -> tuple[str, ...] | None:
    if text is None:
        return None
    values = tuple(dict.fromkeys(p.strip().lower() for p in _joined(text).split(",") if p.strip()))
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise InputError(flag, f"unknown value(s) {', '.join(bad) or '(none)'}", f"use any of {','.join(allowed)}")
    return values


def _joined(text: object) -> str:
    return ",".join(map(str, text)) if isinstance(text, (list, tuple)) else str(text)


def parse_text_list(text: object, name: str = "list") -> tuple[str, ...]:
    """'a,b' -> ('a', 'b'), duplicates dropped; an empty item ('a,,b' or '') is an error, not skipped."""
    parts = [part.strip() for part in _joined(text).split(",")]
    if not all(parts):
        raise InputError(name, f"'{text}' has an empty item", "write a comma list such as a,b")
    return tuple(dict.fromkeys(parts))


def whole_numbers(minimum: int = 1) -> Callable[[object, str], tuple[int, ...]]:
    """A section's parser for a comma list of whole numbers of at least `minimum`."""
    def parse(text: object, name: str) -> tuple[int, ...]:
        return parse_int_list(_joined(text), name, minimum)

    return parse


def zero_stages(text: object, name: str) -> tuple[int, ...]:
    """A comma list of ZeRO stages, each 0-3."""
    stages = parse_int_list(_joined(text), name, minimum=0)
    for stage in stages:
        if stage > 3:
            raise InputError(name, f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
    return stages


def recompute_modes(text: object, name: str) -> tuple[str, ...]:
    """A comma list of activation recompute modes."""
    return parse_choice_list(_joined(text), RECOMPUTE_MODES, name) or ()
