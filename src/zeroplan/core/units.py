"""Counts and byte sizes: parsing user text exactly, and formatting for people.

Parsing goes through Decimal so "6.7B" is exactly 6,700,000,000 and never 6,699,999,999.
Memory shows in GiB (2**30, labelled "GiB") by default, or SI GB (1e9) with units="si";
bandwidth always in GB/s (1e9 bytes per second), as nccl-tests reports it.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from zeroplan.core.errors import InputError

KIB = 2**10
MIB = 2**20
GIB = 2**30
TIB = 2**40
GB = 10**9
TB = 10**12
# Far beyond any real model or machine, and small enough that byte counts times factors stay exact
# and their float conversions (for seconds) never overflow.
MAX_COUNT = 10**18
MAX_BYTES = 2**80

_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_BYTE_SUFFIXES = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
    "kib": KIB, "mib": MIB, "gib": GIB, "tib": TIB, "pib": 2**50,
}
_NUMBER_WITH_SUFFIX = re.compile(r"^\s*([0-9][0-9_,]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


# Longer number texts, or magnitudes above 1e30, are refused before any arithmetic: Decimal would
# otherwise build a million-digit integer for "1e999999" (minutes) or overflow on "1e999999999".
MAX_NUMBER_TEXT = 64
MAX_MAGNITUDE_EXPONENT = 30
_THOUSANDS = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?")


def shown(text: object, limit: int = 40) -> str:
    """User text quoted in a message, shortened so one line stays one line."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _exact_integer(text: str, multiplier: int, input_name: str, what: str) -> int:
    cleaned = text.replace("_", "")
    if "," in cleaned:
        if not _THOUSANDS.fullmatch(cleaned):  # "1,3,0,0" is a typo, not 1300
            raise InputError(input_name, f"'{shown(text)}' has commas that are not thousands separators",
                             f"write {what}")
        cleaned = cleaned.replace(",", "")
    if len(cleaned) > MAX_NUMBER_TEXT:
        raise InputError(input_name, f"'{shown(text)}' is {len(text)} characters long, beyond any real value",
                         f"write {what}")
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        raise InputError(input_name, f"'{shown(text)}' is not a number", f"write {what}") from None
    if value and value.adjusted() + len(str(multiplier)) - 1 > MAX_MAGNITUDE_EXPONENT:
        raise InputError(input_name, f"'{shown(text)}' is beyond any real value (more than 1e30)", f"write {what}")
    value *= multiplier
    if value != value.to_integral_value():
        raise InputError(input_name, f"'{shown(text)}' is not a whole number", f"write {what}")
    return int(value)


def parse_count(text: str | int, input_name: str = "params") -> int:
    """A positive whole count from '13e9', '13000000000', '13B', '6.7b', '350M', '1.5T', '7_000'."""
    example = "a positive count such as 13e9, 13B, 6.7b or 350M"
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _NUMBER_WITH_SUFFIX.match(str(text))
        if not match or match.group(2).lower() not in _COUNT_SUFFIXES:
            raise InputError(input_name, f"'{shown(text)}' is not a count", f"write {example}")
        value = _exact_integer(match.group(1), _COUNT_SUFFIXES[match.group(2).lower()], input_name, example)
    if value <= 0:
        raise InputError(input_name, f"must be positive, got {text}", f"write {example}")
    if value > MAX_COUNT:
        raise InputError(input_name, f"{text} is beyond any real model (more than 1e18)", f"write {example}")
    return value


def parse_bytes(text: str | int, input_name: str) -> int:
    """A non-negative byte size from '256GB' (SI), '80GiB' (binary), '2TB', '7e9' (bytes)."""
    example = "a size such as 256GB, 80GiB, 2TB or 7e9 (bytes)"
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = _NUMBER_WITH_SUFFIX.match(str(text))
        if not match or match.group(2).lower() not in _BYTE_SUFFIXES:
            raise InputError(input_name, f"'{shown(text)}' is not a byte size", f"write {example}")
        value = _exact_integer(match.group(1), _BYTE_SUFFIXES[match.group(2).lower()], input_name, example)
    if value < 0:
        raise InputError(input_name, f"must not be negative, got {text}", f"write {example}")
    if value > MAX_BYTES:
        raise InputError(input_name, f"{text} is beyond any real machine (more than 2^80 bytes)", f"write {example}")
    return value


def parse_rate(text: str | int, input_name: str) -> int:
    """Bytes per second from '25GB/s', '400Gb/s' (bits), '7e9' (bytes per second)."""
    raw = str(text).strip()
    if raw.lower().endswith("/s"):
        raw = raw[:-2]
    # Network links are quoted in bits (400Gb/s = 50 GB/s): bits need an upper-case prefix and a
    # lower-case b ("Gb", "Gbit"); "7gb/s" could mean either, so it is refused rather than guessed.
    bits_match = re.fullmatch(r"(.*[0-9.\s])([KMGT])(?:b|bit)", raw)
    if bits_match is None and re.fullmatch(r".*[0-9.\s][kmgt]b", raw):
        raise InputError(input_name, f"'{text}' is ambiguous: bits or bytes?",
                         "write GB/s for bytes or Gb/s (Gbit/s) for bits per second")
    if bits_match is not None:
        value = parse_bytes(bits_match.group(1) + bits_match.group(2) + "B", input_name)
        if value % 8:
            raise InputError(input_name, f"'{text}' is not a whole number of bytes per second")
        value //= 8
    else:
        value = parse_bytes(raw, input_name)
    if value <= 0:
        raise InputError(input_name, f"must be positive, got {text}", "write a rate such as 25GB/s or 400Gb/s")
    return value


def memory_unit(units: str) -> tuple[int, str]:
    """(divisor, label) for memory display: iec -> GiB, si -> GB."""
    if units == "iec":
        return GIB, "GiB"
    if units == "si":
        return GB, "GB"
    raise InputError("units", f"unknown units '{units}'", "use iec (GiB) or si (GB)")


def format_bytes(value: int, units: str = "iec", digits: int = 1) -> str:
    """'66.6 GiB' (iec) or '71.5 GB' (si)."""
    divisor, label = memory_unit(units)
    return f"{value / divisor:.{digits}f} {label}"


def format_rate(bytes_per_second: int | float, digits: int = 1) -> str:
    """Bandwidth in GB/s (1e9), as nccl-tests reports it."""
    return f"{bytes_per_second / GB:.{digits}f} GB/s"


def format_count(value: int) -> str:
    """13000000000 -> '13.0B', 124439808 -> '124.4M', 999999999 -> '1.0B' (never '1000.0M');
    beyond 999T in scientific notation ('1.00e+18'), never a 20-digit 'T' figure."""
    if round(value / 10**12, 1) >= 1000:
        return f"{value:.2e}"
    for limit, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if round(value / limit, 1) >= 1:
            return f"{value / limit:.1f}{suffix}"
    return str(value)


def format_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)
