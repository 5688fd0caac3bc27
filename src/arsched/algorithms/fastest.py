"""The fastest of a builder's few candidate schedules in the default flow model (in-order
connections), for builders whose choice depends on how their transfers share links in time,
which a closed form does not see. The work is bounded by transfers and event instants, not by a
clock, so the choice is the same on every machine."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import numpy as np

from arsched.collective.schedule import MAX_CHANNELS, Schedule
from arsched.errors import ArschedError, NotFaster, OutOfTime
from arsched.limits import LimitError
from arsched.topology.core import is_int

SIMULATE_TRANSFERS = 12_000_000  # the most transfers the timed candidates hold in all
SIMULATE_INSTANTS = 2_000  # a candidate's simulation stops after this many event instants
CHANNELS = 2  # channels per rank pair tried besides one (`Schedule.channels`)


def fastest(
    first: Schedule,
    rest: Sequence[Callable[[], Schedule]],
    sizes: Sequence[float],
    alpha: float,
    most_transfers: float,
    max_instants: int,
) -> Schedule:
    """`first` or the candidate of `rest` (builders, with `sizes` their transfer counts, known
    before building) that is fastest in the flow model at `alpha`, among the first candidates
    whose transfers add up to `most_transfers` at most; `first` where fewer than two fit or its
    simulation takes more than `max_instants` event instants or more memory than the limit
    allows (a later candidate cut there, or too large to build, is left out). One schedule is
    held besides the best."""
    from arsched.sim import simulate_flow

    fit = np.cumsum([len(first), *sizes]) <= most_transfers
    if len(fit) < 2 or not fit[1]:  # nothing to choose from
        return first
    try:
        best_s = simulate_flow(first, alpha, max_instants=max_instants).time_s
    except (OutOfTime, LimitError):  # too long, or too large for the memory limit, to time
        return first
    best = first
    for make in rest[: int(fit.sum()) - 1]:
        try:
            schedule = make()
            t = simulate_flow(schedule, alpha, give_up_above=best_s, max_instants=max_instants).time_s
        except (NotFaster, OutOfTime, LimitError):
            continue
        if t < best_s:
            best, best_s = schedule, t
    return best


def check_channels(channels: object, name: str) -> int | None:
    """A builder's `channels` parameter: None (choose) or 1 to `MAX_CHANNELS`; an ArschedError
    naming the builder otherwise."""
    if channels is not None and not (is_int(channels) and 1 <= channels <= MAX_CHANNELS):
        raise ArschedError(f"{name}: channels must be an integer from 1 to {MAX_CHANNELS}, got {channels!r}")
    return None if channels is None else int(channels)


def fastest_channels(
    schedule: Schedule,
    alpha: float,
    channels: int | None = None,
    most_transfers: float = SIMULATE_TRANSFERS,
    max_instants: int = SIMULATE_INSTANTS,
) -> Schedule:
    """`schedule` on `channels` channels per rank pair (`Schedule.channels`), or where that is
    None on one or `CHANNELS`, whichever the flow model at `alpha` times faster (`fastest`; one
    on a tie, or where the simulations are cut): a second channel lets a connection's next step
    pay its α while the last one still sends, but the two then share links, so only timing
    tells."""
    if channels is not None:
        return dataclasses.replace(schedule, channels=int(channels))
    return fastest(
        schedule,
        [functools.partial(dataclasses.replace, schedule, channels=CHANNELS)],
        [len(schedule)],
        alpha,
        most_transfers,
        max_instants,
    )
