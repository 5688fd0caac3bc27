"""Gandiva-style locality migration: rigid, first come first served with backfilling, and running
jobs migrated onto rings with fewer hops when the time that saves pays for the restart.

Source: Xiao et al., "Gandiva: Introspective Cluster Scheduling for Deep Learning", OSDI'18.
Gandiva packs jobs by affinity, time-slices GPUs among jobs (suspend-resume), and migrates
running jobs to defragment the cluster and improve their locality.

What we keep and what we simplify (our assumptions, not the paper's):
- No time-slicing and no packing of several jobs on one GPU (out of scope: a GPU runs one job).
- Placement of new jobs: arrival order, non-preemptive, backfilling (a job that does not fit lets
  later ones start), consolidated (one server, else the fewest servers under one ToR, else the
  fewest anywhere); rigid, every job at its request whatever the elasticity setting.
- Migration, each slot after the new jobs are placed: running jobs whose ring crosses servers,
  most inter-server hops first, look for the most consolidated ring of the same size on the free
  GPUs plus their own; a job moves when the new ring crosses fewer links (summed over its hops)
  and the time it saves over its remaining run at the ring's contention-free bandwidth exceeds
  its restart cost, R / r_old - R / r_new > c (a shorter ring on the same bandwidth is not worth
  a move). At most MAX_MIGRATIONS moves per slot. Gandiva's
  introspection (measuring a job's speed after a move and undoing a bad one) is replaced by this
  estimate.
"""

from __future__ import annotations

import numpy as np

from arsched.cluster.network import Placement, hops, ring_bandwidth, throughput
from arsched.cluster.placement import fewest_servers, take
from arsched.cluster.schedulers.base import Decision, Scheduler, SlotState
from arsched.cluster.schedulers.rigid import place_rigid

MAX_MIGRATIONS = 4  # moves per slot (our bound: migration is an occasional defragmentation)


def ring_length(state: SlotState, p: Placement) -> int:
    """Links a ring crosses, summed over its inter-server hops (0 inside one server)."""
    return sum(len(state.cluster.hop_links(a, b)) for a, b in hops(p))


class Gandiva(Scheduler):
    name = "gandiva"
    about = "Gandiva-style: FIFO with backfilling, consolidated, rigid, locality-improving migration"

    def decide(self, state: SlotState) -> Decision:
        if not len(state.active):
            return []
        running = [j for j in state.active if j in state.previous]
        waiting = [j for j in state.active if j not in state.previous]
        out = place_rigid(state, np.array(running + waiting, dtype=np.int64), strict=False)
        return self.migrate(state, out)

    def wake(self, state: SlotState, decision: Decision) -> float:
        """After a migration, one interval later (the GPUs it freed may let another job move);
        otherwise only an arrival or completion changes anything (the time a move would save only
        shrinks as jobs progress)."""
        moved = any(j in state.previous and state.previous[j] != p for j, p in decision)
        return state.now + state.dt if moved else np.inf

    def migrate(self, state: SlotState, out: Decision) -> Decision:
        """Move running multi-server rings onto shorter ones (see the module docstring)."""
        c, wl = state.cluster, state.workload
        free = np.full(c.num_servers, c.gpus_per_server, dtype=np.int64)
        for _, p in out:
            take(free, p)
        where = {j: i for i, (j, _) in enumerate(out)}
        movers = [(len(p), j) for j, p in out if len(p) > 1 and state.previous.get(j) == p]
        moved = 0
        for _, j in sorted(movers, reverse=True):
            if moved == MAX_MIGRATIONS:
                break
            old = out[where[j]][1]
            take(free, old, +1)
            new = fewest_servers(free, int(wl.gpus[j]), c.group)
            if new is not None and new != old and ring_length(state, new) < ring_length(state, old):
                b_old, b_new = ring_bandwidth(c, [old, new], "ideal")
                r_old, r_new = throughput(wl.tau[j], wl.grad_bytes[j], wl.gpus[j], np.array([b_old, b_new]),
                                          state.alpha)  # fmt: skip
                left = state.remaining[j]
                cost = state.restart[j] if state.restart is not None else 0.0
                if r_new > 0 and left / r_old - left / r_new > cost:
                    out[where[j]] = (j, new)
                    take(free, new)
                    moved += 1
                    continue
            take(free, old)
        return out
