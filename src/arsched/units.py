"""Human units at the edge: '100MB', '1GiB', '100Gbps', '25GB/s', '5us' to bytes, B/s, seconds.

Inside arsched everything is bytes, bytes/second and seconds (design §3.1); these parsers are
used once, by the CLI and the topology spec parser.
"""

from __future__ import annotations

import math
import re

from arsched.errors import UnitError

_NUMBER = r"(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
# divisors, so that 5us is exactly the float 5e-6 (5 * 1e-6 is not)
_TIME_UNITS = {"": 1, "s": 1, "ms": 1e3, "us": 1e6, "µs": 1e6, "ns": 1e9}


def _split(text: str | float | int, what: str) -> tuple[float, str]:
    if isinstance(text, (int, float)):
        return _finite(text, text, what), ""
    m = re.fullmatch(_NUMBER + r"(?P<unit>[a-zA-Zµ/]*)", str(text).strip())
    if not m:
        raise UnitError(f"cannot read {what} {text!r}: expected a number with a unit, e.g. {_EXAMPLES[what]}")
    return float(m["num"]), m["unit"]


def _finite(value: float | int, text: str | float | int, what: str) -> float:
    """`value` as a float; a UnitError if it is infinite, not a number or beyond a float."""
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    if not math.isfinite(x):
        raise UnitError(f"cannot use {what} {text!r}: it is not a finite number (floats end at 1.8e308)")
    return x


_EXAMPLES = {
    "a size": "'100MB' or '1GiB'",
    "a bandwidth": "'100Gbps' or '25GB/s'",
    "a time": "'5us' or '1ms'",
}


def parse_size(text: str | float | int) -> float:
    """Bytes from '100MB' (decimal), '1GiB' (binary), '512' (plain bytes)."""
    num, unit = _split(text, "a size")
    factor = _SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise UnitError(f"unknown size unit {unit!r} in {text!r}: use B, KB, MB, GB, KiB, MiB or GiB")
    return _finite(num * factor, text, "a size")


def parse_bandwidth(text: str | float | int) -> float:
    """Bytes per second from bits ('100Gbps', '100Gb/s') or bytes ('25GB/s', '25GBps').

    The case of the b decides: lower-case b is bits, upper-case B bytes; a bare number is B/s.
    """
    num, unit = _split(text, "a bandwidth")
    if unit == "":
        return _finite(num, text, "a bandwidth")
    for suffix in ("/s", "ps"):
        if unit.endswith(suffix) and len(unit) > len(suffix):
            base = unit[: -len(suffix)]
            prefix = _SIZE_UNITS.get(base[:-1].lower() + "b")
            if base[-1] in "bB" and prefix is not None:
                return _finite(num * prefix / (8 if base[-1] == "b" else 1), text, "a bandwidth")
    raise UnitError(
        f"unknown bandwidth unit {unit!r} in {text!r}: use Gbps or Gb/s (bits), GB/s or GBps (bytes)"
    )


def parse_time(text: str | float | int) -> float:
    """Seconds from '5us', '1ms', '2ns', '0.5s'; a bare number is seconds."""
    num, unit = _split(text, "a time")
    factor = _TIME_UNITS.get(unit.lower() if unit != "µs" else unit)
    if factor is None:
        raise UnitError(f"unknown time unit {unit!r} in {text!r}: use s, ms, us or ns")
    return _finite(num / factor, text, "a time")
