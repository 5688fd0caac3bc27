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
    """A computation given a deadline or a limit on its work (auto's simulation of a candidate)
    passed it; `floor_s`, where known, a lower bound on the time it was computing (else 0)."""

    def __init__(self, message: str, floor_s: float = 0.0) -> None:
        super().__init__(message)
        self.floor_s = floor_s


class NotFaster(ArschedError):
    """A flow simulation told to give up above a time (auto's best so far) found the schedule
    no faster: its busiest link's bytes at the link's capacity, or its time without contention,
    already take that long; `floor_s` is that lower bound."""

    def __init__(self, floor_s: float) -> None:
        super().__init__(f"at least {floor_s:.9g} s by its busiest link or its time without contention")
        self.floor_s = floor_s
