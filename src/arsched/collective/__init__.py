"""The schedule IR, its JSON and columnar file formats and its validators."""

from arsched.collective.files import load, save
from arsched.collective.reverse import reverse
from arsched.collective.schedule import COPY, OPS, REDUCE, Schedule, ScheduleBuilder, Transfer
from arsched.collective.serialize import FORMAT, dumps, loads
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
    "reverse",
    "save",
    "validate",
]
