"""Comma lists on the command line: '1,2,4' and 'cpu,nvme'."""

from __future__ import annotations

from typing import overload

from zeroplan.core.errors import InputError


@overload
def parse_int_list(text: str, flag: str, minimum: int = 1) -> tuple[int, ...]: ...
@overload
def parse_int_list(text: str | None, flag: str, minimum: int = 1) -> tuple[int, ...] | None: ...
def parse_int_list(text: str | None, flag: str, minimum: int = 1) -> tuple[int, ...] | None:
    """'1,2,4' -> (1, 2, 4); None stays None."""
    if text is None:
        return None
    values = []
    for part in (p.strip() for p in str(text).split(",")):
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
    values = tuple(dict.fromkeys(p.strip().lower() for p in str(text).split(",") if p.strip()))
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise InputError(flag, f"unknown value(s) {', '.join(bad) or '(none)'}", f"use any of {','.join(allowed)}")
    return values
