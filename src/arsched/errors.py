"""Error types: every bad input raises a ValueError subclass with one clear sentence."""


class ArschedError(ValueError):
    """Base class of every error arsched raises for bad input."""


class TopologyError(ArschedError):
    """A topology, its parameters or its file is invalid."""


class ScheduleFormatError(ArschedError):
    """A schedule file or object is malformed (not a semantic violation)."""


class UnitError(ArschedError):
    """A human-unit quantity such as '100MB' or '5us' cannot be parsed."""


class OutOfTime(ArschedError):
    """A computation given a deadline (auto's simulation of a candidate) passed it."""
