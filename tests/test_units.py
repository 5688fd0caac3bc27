"""Human units at the edge: sizes, bandwidths and times."""

from __future__ import annotations

import pytest

from arsched.errors import ArschedError, UnitError
from arsched.units import parse_bandwidth, parse_size, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100MB", 100 * 10**6),
        ("1GiB", 2**30),
        ("1GB", 10**9),
        ("512", 512),
        ("512B", 512),
        ("4KiB", 4 * 1024),
        ("4kb", 4000),
        ("2MiB", 2 * 2**20),
        ("1.5GB", 1.5e9),
        ("0.5 MiB", 2**19),
        ("1TiB", 2**40),
        ("3TB", 3e12),
        ("1e3KB", 1e6),
        ("  7 B ", 7),
        (1024, 1024),
        (2.5, 2.5),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100Gbps", 100e9 / 8),
        ("400Gbps", 50e9),
        ("25GB/s", 25e9),
        ("10Mbps", 10e6 / 8),
        ("1Tbps", 1e12 / 8),
        ("8bps", 1),
        ("1kbps", 125),
        ("1MB/s", 1e6),
        ("1GiB/s", 2**30),
        ("2 GB/s", 2e9),
        ("1000", 1000),
        (1e9, 1e9),
    ],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


def test_parse_bandwidth_exact_values():
    assert parse_bandwidth("100Gbps") == 12.5e9
    assert parse_bandwidth("25GB/s") == 25e9
    assert parse_size("100MB") == 1e8
    assert parse_size("1GiB") == 2**30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5us", 5e-6),
        ("5µs", 5e-6),
        ("1ms", 1e-3),
        ("2ns", 2e-9),
        ("0.5s", 0.5),
        ("3", 3.0),
        ("10 us", 1e-5),
        (0.25, 0.25),
    ],
)
def test_parse_time(text, expected):
    assert parse_time(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "text", ["", "MB", "abc", "10 parsecs", "1.2.3MB", "-5MB", "5 M B", "1e", "GiB1", "100Gbps"]
)
def test_bad_sizes(text):
    with pytest.raises(UnitError) as info:
        parse_size(text)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ArschedError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("text", ["", "fast", "100Gb", "100 Gbit", "25GB/h", "100MB", "5us"])
def test_bad_bandwidths(text):
    with pytest.raises(UnitError):
        parse_bandwidth(text)


@pytest.mark.parametrize("text", ["", "soon", "5min", "5 h", "1e-3x", "5GB", "-1s"])
def test_bad_times(text):
    with pytest.raises(UnitError):
        parse_time(text)


def test_gigabits_per_second_with_slash_is_not_gigabytes():
    # a lower-case b is bits, an upper-case B bytes, whether written 'ps' or '/s'
    assert parse_bandwidth("100Gb/s") == 100e9 / 8
    assert parse_bandwidth("100Gbps") == 100e9 / 8
    assert parse_bandwidth("25GBps") == 25e9
    assert parse_bandwidth("25GB/s") == 25e9
    assert parse_bandwidth("8Mb/s") == 1e6
    assert parse_bandwidth("1KiB/s") == 1024


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_size, "1e400"),
        (parse_size, "1e308TB"),
        (parse_size, 10**400),
        (parse_size, float("nan")),
        (parse_time, "1e400s"),
        (parse_time, float("inf")),
        (parse_bandwidth, "1e400"),
        (parse_bandwidth, "1e308Gbps"),
    ],
)
def test_numbers_past_a_float_are_refused(parse, text):
    with pytest.raises(UnitError, match="it is not a finite number"):
        parse(text)
