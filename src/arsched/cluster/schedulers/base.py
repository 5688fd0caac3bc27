"""What a scheduler sees each slot and what it returns.

A scheduler's `decide(state)` returns the placements of the jobs to run this slot, in the order
it committed them (the `reserved` network mode reserves bandwidth in that order). A job left
out is paused. Placements must fit the servers' GPUs; the simulator checks. A job that has run
before (`attained` > 0) pays its `restart` cost whenever its placement differs from `previous`.

The events engine asks `wake(state, decision)` after each decision: the time by which the
scheduler wants to decide again even if no job arrives or finishes. The default, one interval
later, suits a scheduler whose choices drift with time; one whose choices change only at known
instants (a priority threshold, a lease round) names the first of them, or inf for none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arsched.cluster.cluster import Cluster
from arsched.cluster.jobs import Workload
from arsched.cluster.network import Placement
from arsched.cluster.utility import Objective


@dataclass
class SlotState:
    now: float
    dt: float
    active: np.ndarray  # job indices, arrived and unfinished, by arrival
    remaining: np.ndarray  # work left, per job (all jobs)
    attained: np.ndarray  # GPU-seconds received so far, per job
    previous: dict[int, Placement]  # last slot's placements
    workload: Workload
    cluster: Cluster
    objective: Objective
    alpha: float
    seed: int
    restart: np.ndarray | None = None  # s each job loses when its GPUs change (None: free)


Decision = list[tuple[int, Placement]]


class Scheduler:
    """Base class: `name`, a one-line `about`, and `decide`."""

    name = "base"
    about = ""
    uses_seed = False  # True if `decide` draws random numbers from `state.seed`

    def decide(self, state: SlotState) -> Decision:  # pragma: no cover - interface
        raise NotImplementedError

    def wake(self, state: SlotState, decision: Decision) -> float:
        """The latest time of the next decision if nothing arrives or finishes (events engine)."""
        return state.now + state.dt
