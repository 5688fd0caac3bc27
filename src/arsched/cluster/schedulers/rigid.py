"""Rigid baselines: every job runs on exactly the GPUs it requested, consolidated (fewest
servers, one ToR when possible), or waits.

- FIFO: arrival order, non-preemptive, strict (a head job that does not fit blocks the rest).
- SJF: shortest remaining compute time first, non-preemptive, backfilling.
- Tiresias: discretised two-dimensional least-attained-service (Gu et al., NSDI'19): queues by
  attained GPU-seconds, FIFO inside a queue, preemptive; a job kept from one slot to the next
  keeps its GPUs.

FIFO and SJF change their choices only when a job arrives or finishes; Tiresias also when a
running job's attained service crosses a queue threshold (its `wake`, for the events engine).
"""

from __future__ import annotations

import numpy as np

from arsched.cluster.placement import fewest_servers, take
from arsched.cluster.schedulers.base import Decision, Scheduler, SlotState

TIRESIAS_THRESHOLDS = np.array([3200.0, 25600.0])  # GPU-seconds between the priority queues
# GPU-seconds: attained service this close under a threshold has crossed it (the events engine
# wakes at the crossing, where rounding may leave it a hair short)
THRESHOLD_SLACK = 1e-6


def place_rigid(state: SlotState, order: np.ndarray, strict: bool) -> Decision:
    """Run jobs in `order` at their requested size; running jobs keep their GPUs when chosen."""
    c, wl = state.cluster, state.workload
    free = np.full(c.num_servers, c.gpus_per_server, dtype=np.int64)
    chosen: list[int] = []
    budget = c.num_gpus
    for j in order:  # pick by GPU count in priority order
        if wl.gpus[j] <= budget:
            chosen.append(int(j))
            budget -= int(wl.gpus[j])
        elif strict:
            break
    out: Decision = []
    for j in chosen:  # those placed last slot keep their GPUs
        p = state.previous.get(j)
        if p is not None:
            take(free, p)
            out.append((j, p))
    for j in chosen:
        if j in state.previous:
            continue
        p = fewest_servers(free, int(wl.gpus[j]), c.group)
        if p is None:
            if strict:
                break
            continue
        take(free, p)
        out.append((j, p))
    return out


class _EventDriven(Scheduler):
    """A scheduler whose choices change only when a job arrives or finishes."""

    def wake(self, state: SlotState, decision: Decision) -> float:
        return np.inf


class FIFO(_EventDriven):
    name = "fifo"
    about = "first come first served, consolidated first-fit, rigid, non-preemptive"

    def decide(self, state: SlotState) -> Decision:
        running = [j for j in state.active if j in state.previous]
        waiting = [j for j in state.active if j not in state.previous]
        return place_rigid(state, np.array(running + waiting, dtype=np.int64), strict=True)


class SJF(_EventDriven):
    name = "sjf"
    about = "shortest remaining compute time first, consolidated, rigid, non-preemptive, backfilling"

    def decide(self, state: SlotState) -> Decision:
        wl = state.workload
        a = state.active
        left = state.remaining[a] * wl.tau[a] / wl.gpus[a]
        running = np.array([j in state.previous for j in a])
        order = a[np.lexsort((a, left, ~running))]
        return place_rigid(state, order, strict=False)


class Tiresias(Scheduler):
    name = "tiresias"
    about = "discretised 2D least-attained-service (Tiresias), consolidated, rigid, preemptive"

    def decide(self, state: SlotState) -> Decision:
        a = state.active
        queue = np.searchsorted(TIRESIAS_THRESHOLDS, state.attained[a] + THRESHOLD_SLACK, side="right")
        order = a[np.lexsort((a, state.workload.arrival[a], queue))]
        return place_rigid(state, order, strict=False)

    def wake(self, state: SlotState, decision: Decision) -> float:
        """When the first running job's attained service reaches its next threshold (it grows by
        w GPU-seconds per second while the job holds w GPUs)."""
        if not decision:
            return np.inf
        js = np.array([j for j, _ in decision])
        w = np.array([sum(g for _, g in p) for _, p in decision], dtype=float)
        got = state.attained[js]
        q = np.searchsorted(TIRESIAS_THRESHOLDS, got + THRESHOLD_SLACK, side="right")
        nxt = np.append(TIRESIAS_THRESHOLDS, np.inf)[q]
        return state.now + float(((nxt - got) / w).min())
