"""The schedule IR, its JSON format and its validators."""

from arsched.collective.schedule import COPY, OPS, REDUCE, Schedule, ScheduleBuilder, Transfer
from arsched.collective.serialize import FORMAT, dumps, load, loads, save
from arsched.collective.validate import (
    InvalidScheduleError,
    ValidationReport,
    numeric_check,
    validate,
)

__all__ = [
    "COPY",
    "FORMAT",
    "OPS",
    "REDUCE",
    "InvalidScheduleError",
    "Schedule",
    "ScheduleBuilder",
    "Transfer",
    "ValidationReport",
    "dumps",
    "load",
    "loads",
    "numeric_check",
    "save",
    "validate",
]
