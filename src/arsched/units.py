"""Human units at the edge: '100MB', '1GiB', '100Gbps', '25GB/s', '5us' to bytes, B/s, seconds.

Inside arsched everything is bytes, bytes/second and seconds (design §3.1); these parsers are
used once, by the CLI and the topology spec parser.
"""

from __future__ import annotations

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
_RATE_BITS = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12}
_TIME_UNITS = {"": 1, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def _split(text: str | float | int, what: str) -> tuple[float, str]:
    if isinstance(text, (int, float)):
        return float(text), ""
    m = re.fullmatch(_NUMBER + r"(?P<unit>[a-zA-Zµ/]*)", str(text).strip())
    if not m:
        raise UnitError(f"cannot read {what} {text!r}: expected a number with a unit, e.g. {_EXAMPLES[what]}")
    return float(m["num"]), m["unit"]


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
    return num * factor


def parse_bandwidth(text: str | float | int) -> float:
    """Bytes per second from '100Gbps' (bits) or '25GB/s' (bytes); a bare number is B/s."""
    num, unit = _split(text, "a bandwidth")
    low = unit.lower()
    if low in _RATE_BITS:
        return num * _RATE_BITS[low] / 8
    if low.endswith("/s") and low[:-2] in _SIZE_UNITS:
        return num * _SIZE_UNITS[low[:-2]]
    if low == "":
        return num
    raise UnitError(f"unknown bandwidth unit {unit!r} in {text!r}: use Gbps, Mbps, GB/s or MB/s")


def parse_time(text: str | float | int) -> float:
    """Seconds from '5us', '1ms', '2ns', '0.5s'; a bare number is seconds."""
    num, unit = _split(text, "a time")
    factor = _TIME_UNITS.get(unit.lower() if unit != "µs" else unit)
    if factor is None:
        raise UnitError(f"unknown time unit {unit!r} in {text!r}: use s, ms, us or ns")
    return num * factor
