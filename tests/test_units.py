"""Parsing counts and sizes exactly; formatting round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zeroplan.core.errors import InputError
from zeroplan.core.units import GIB, format_bytes, parse_bytes, parse_count, parse_rate


@pytest.mark.parametrize("text,expected", [
    ("13e9", 13_000_000_000), ("13000000000", 13_000_000_000), ("13B", 13_000_000_000),
    ("6.7b", 6_700_000_000), ("350M", 350_000_000), ("1.5T", 1_500_000_000_000), ("7_000", 7000),
    ("124,439,808", 124_439_808), (" 70B ", 70_000_000_000), ("1e12", 10**12),
])
def test_parse_count(text, expected):
    assert parse_count(text) == expected


@pytest.mark.parametrize("text", ["0", "-5", "abc", "1.5", "13X", "", "1e-3", "nan"])
def test_parse_count_rejects(text):
    with pytest.raises(InputError) as info:
        parse_count(text)
    assert str(info.value).startswith("params:")


@pytest.mark.parametrize("text,expected", [
    ("256GB", 256 * 10**9), ("80GiB", 80 * GIB), ("2TB", 2 * 10**12), ("81920MiB", 81920 * 2**20),
    ("7e9", 7 * 10**9), ("0", 0), ("1.5TiB", 3 * 2**39),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text, "--x") == expected


@pytest.mark.parametrize("text,expected", [
    ("25GB/s", 25 * 10**9), ("400Gb/s", 50 * 10**9), ("200Gb/s", 25 * 10**9), ("7e9", 7 * 10**9),
])
def test_parse_rate(text, expected):
    assert parse_rate(text, "--x") == expected


def test_format_labels_are_honest():
    assert format_bytes(80 * GIB) == "80.0 GiB"
    assert format_bytes(80 * GIB, "si") == "85.9 GB"


@given(st.integers(1, 10**15))
def test_count_round_trip(value):
    assert parse_count(str(value)) == value
    assert parse_count(f"{value}e0") == value


@given(st.integers(0, 2**50))
def test_iec_si_bytes_round_trip(value):
    assert parse_bytes(f"{value}B", "--x") == value
    gib = value // GIB
    assert parse_bytes(f"{gib}GiB", "--x") == gib * GIB
