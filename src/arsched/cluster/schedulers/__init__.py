"""Schedulers by name."""

from __future__ import annotations

from arsched.cluster.schedulers.base import Decision, Scheduler, SlotState
from arsched.cluster.schedulers.gadget import GADGET, Optimus, RandomPlacement
from arsched.cluster.schedulers.gandiva import Gandiva
from arsched.cluster.schedulers.pollux import Pollux
from arsched.cluster.schedulers.rigid import FIFO, SJF, Tiresias
from arsched.cluster.schedulers.themis import Themis
from arsched.errors import ArschedError

SCHEDULERS: dict[str, type[Scheduler]] = {
    cls.name: cls for cls in (GADGET, FIFO, SJF, Tiresias, Optimus, RandomPlacement, Pollux, Themis, Gandiva)
}


def get_scheduler(name: str) -> Scheduler:
    try:
        return SCHEDULERS[name.strip().lower()]()
    except KeyError:
        raise ArschedError(f"unknown scheduler {name!r}; choose from {', '.join(SCHEDULERS)}") from None


__all__ = ["SCHEDULERS", "Decision", "Scheduler", "SlotState", "get_scheduler"]
