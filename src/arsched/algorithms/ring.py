"""Ring AllReduce (Patarasuk & Yuan 2009; NCCL's ring): reduce-scatter then all-gather.

The vector is cut into N segments (or a multiple: `chunks` = N·p moves p chunks per hop);
in step t rank r adds segment r−t into its successor, then the completed segments travel once
more around the ring as copies. 2(N−1) steps, bandwidth-optimal when every hop has its own
link. The ring order is topology-aware (`order='auto'`): the given order or a nearest-neighbour
tour, whichever has fewer hops in total.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple, ring_order
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology


def add_ring(b: ScheduleBuilder, positions: np.ndarray, first_chunk: int, per: int, step0: int = 0) -> int:
    """Append a ring over rank indices `positions` (in ring order) carrying chunks
    first_chunk ... first_chunk + n·per − 1; returns the number of steps used."""
    n = len(positions)
    pos = np.arange(n)
    src, dst = positions, positions[(pos + 1) % n]
    for t in range(n - 1):
        for k in range(per):  # reduce-scatter: position i adds segment i−t into i+1
            b.add_rank_arrays(step0 + t, first_chunk + ((pos - t) % n) * per + k, src, dst, "reduce")
    for t in range(n - 1):
        for k in range(per):  # all-gather: position i forwards its finished segment i+1−t
            b.add_rank_arrays(
                step0 + n - 1 + t, first_chunk + ((pos + 1 - t) % n) * per + k, src, dst, "copy"
            )
    return 2 * (n - 1)


@register("ring", "NCCL-style ring: reduce-scatter then all-gather over a short-hop ring order")
def ring(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    chunks: int | None = None,
    order: str = "auto",
) -> Schedule:
    """Ring AllReduce; `order='given'` keeps the rank order, 'auto' picks a short-hop ring."""
    rs = check_ranks(topology, ranks, "ring")
    nbytes = check_nbytes(nbytes, "ring")
    if order not in ("auto", "given"):
        raise ArschedError(f"ring: order must be 'auto' or 'given', got {order!r}")
    n = len(rs)
    chunks = chunk_multiple(chunks, n, "ring", ranks=n)
    cycle = ring_order(topology, rs) if order == "auto" else rs
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "ring", {"params": {"chunks": chunks, "order": list(cycle)}}
    )
    index = {r: i for i, r in enumerate(rs)}
    add_ring(b, np.array([index[r] for r in cycle]), 0, chunks // n)
    return b.build()
