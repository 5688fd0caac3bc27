"""The fastest of a builder's few candidate schedules in the default flow model (in-order
connections), for builders whose choice depends on how their transfers share links in time,
which a closed form does not see. The work is bounded by transfers and event instants, not by a
clock, so the choice is the same on every machine."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.errors import NotFaster, OutOfTime
from arsched.limits import LimitError


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
    allows (a later candidate cut there is left out). One schedule is held besides the best."""
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
        schedule = make()
        try:
            t = simulate_flow(schedule, alpha, give_up_above=best_s, max_instants=max_instants).time_s
        except (NotFaster, OutOfTime, LimitError):
            continue
        if t < best_s:
            best, best_s = schedule, t
    return best
