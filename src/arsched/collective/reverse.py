"""The time reversal of a schedule: every transfer runs backwards, from its destination to its
source along its route reversed, in the mirrored step, and copies become sums and sums copies.

Reversed, a Broadcast from a root is a Reduce to that root, a Reduce a Broadcast, an AllGather a
ReduceScatter and a ReduceScatter an AllGather (the data each rank must end with flows back to
where it came from, where every rank receives each piece once, as along trees; the validator
checks the result), with the same bytes on every link's reverse. On a network where every link
has a reverse of the same bandwidth the reversal has the same bound, but not the same dynamics:
a pipelined out-tree's chunks leave the root one after another, while reversed, a rank adds its
children's sums in the order the leaves send them. So a builder may weigh a schedule against
the reversal of its dual (tree packing does for Broadcast and Reduce, `packing.collectives`).
"""

from __future__ import annotations

import dataclasses

from arsched.collective.kinds import TITLES
from arsched.collective.schedule import Schedule
from arsched.errors import ArschedError

DUAL = {
    "broadcast": "reduce",
    "reduce": "broadcast",
    "allgather": "reduce_scatter",
    "reduce_scatter": "allgather",
}


def reverse(schedule: Schedule) -> Schedule:
    """`schedule` reversed (see the module docstring): a schedule of `DUAL[schedule.collective]`
    with the same root. An ArschedError where the collective has no dual (AllReduce sums and
    copies the same data) or a route has no link back."""
    s = schedule
    if s.collective not in DUAL:
        only = ", ".join(TITLES[c] for c in DUAL)
        raise ArschedError(f"{TITLES[s.collective]} schedules cannot be reversed (only {only})")
    paths = tuple(tuple(reversed(p)) for p in s.paths)
    if (s.topology.compiled.paths_links(paths)[1] < 0).any():
        raise ArschedError(
            f"{s.topology.name}: a route of the schedule has no link back, so it cannot be reversed"
        )
    last = int(s.step.max()) if len(s) else 0
    return dataclasses.replace(
        s,
        step=last - s.step,
        src=s.dst,
        dst=s.src,
        op=1 - s.op,
        paths=paths,
        collective=DUAL[s.collective],
        meta={**s.meta, "reversed": s.collective},
    )
