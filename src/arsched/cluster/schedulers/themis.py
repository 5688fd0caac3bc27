"""Themis-style finish-time fairness: the jobs with the worst finish-time fairness ratio run first,
rigid, in lease rounds.

Source: Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI'20. A job's
finish-time fairness is rho = T_shared / T_ideal, its finish time in the shared cluster over its
finish time on a dedicated 1/N share of it; Themis offers the GPUs whose lease expired to the jobs
with the largest rho (through a partial-information auction among them) and grants leases.

What we keep and what we simplify (our assumptions, not the paper's):
- rho estimated from attained service and remaining work, with the job running at its request:
  T_ideal = D, the job's compute-only duration at its request (the dedicated share taken to be its
  request, not 1/N of the cluster); T_shared = its age plus its remaining compute time at its
  request. A job that waited or was paused longer, relative to its length, has the larger rho.
- No auction and no fairness knob f: the worst rho wins outright (as if every job bid its true
  valuation and f offered the GPUs to the worst jobs only); ties by arrival.
- Leases: rounds of LEASE_S seconds from time 0. At a round's start every job is placed afresh by
  rho (a running job chosen again keeps its GPUs); inside a round running jobs keep theirs and
  only the free GPUs go to waiting jobs, worst rho first (backfilling).
- Rigid like FIFO, SJF and Tiresias: every job runs at its request whatever the elasticity
  setting (Themis allocates gangs of the requested size); consolidated placement (one server, else
  the fewest servers under one ToR, else the fewest anywhere).
"""

from __future__ import annotations

import math

import numpy as np

from arsched.cluster.schedulers.base import Decision, Scheduler, SlotState
from arsched.cluster.schedulers.rigid import place_rigid

LEASE_S = 600.0  # s per lease round (our choice; the paper's leases are of the order of minutes)


def fairness_ratio(state: SlotState) -> np.ndarray:
    """rho = T_shared / T_ideal of every active job (see the module docstring)."""
    wl, a = state.workload, state.active
    ideal = np.maximum(wl.duration[a], 1e-9)
    left = state.remaining[a] * wl.tau[a] / wl.gpus[a]
    return (state.now - wl.arrival[a] + left) / ideal


class Themis(Scheduler):
    name = "themis"
    about = "Themis-style: worst finish-time fairness ratio first, 600 s leases, consolidated, rigid"

    def decide(self, state: SlotState) -> Decision:
        a = state.active
        if not len(a):
            return []
        rho = fairness_ratio(state)
        order = a[np.lexsort((a, -rho))]
        if state.now % LEASE_S >= state.dt - 1e-9:  # inside a round: running jobs keep their leases
            running = np.array([j in state.previous for j in order], dtype=bool)
            order = np.concatenate([order[running], order[~running]])
        return place_rigid(state, order, strict=False)

    def wake(self, state: SlotState, decision: Decision) -> float:
        """The next round's start: inside a round only arrivals and completions change anything
        (free GPUs go to waiting jobs by rho; those that did not fit still do not)."""
        return (math.floor(state.now / LEASE_S) + 1) * LEASE_S
