"""Bruck's AllGather for any number of ranks (Bruck, Ho, Kipnis, Upfal & Weathersby, IEEE TPDS
1997).

⌈log2 N⌉ steps: in the step of distance d = 1, 2, 4, ... every rank i sends the shards it holds,
those of ranks i, i + 1, ..., i + m − 1 (mod N) with m = min(d, N − d), to rank i − d (mod N),
which then holds 2d consecutive shards, or all N after the last step. Latency-optimal for any N
(rhd's doubling needs a power of two), and every rank sends and receives (N − 1)/N of the
vector, bandwidth-optimal on a non-blocking network. Chunks keep their names, so the local
rotation of the paper's buffers is not needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


@register("bruck", "Bruck's AllGather: ⌈log2 N⌉ steps for any number of ranks", "allgather")
def bruck_allgather(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Bruck's AllGather (see the module docstring); rank v's shard is chunks v·c/N .. (v+1)·c/N − 1."""
    rs = check_ranks(topology, ranks, "bruck")
    n = len(rs)
    chunks = chunk_multiple(chunks, n, "bruck", ranks=n, transfers=lambda c: c * (n - 1))
    b = ScheduleBuilder(
        topology, rs, check_nbytes(nbytes, "bruck"), chunks, "bruck", {"params": {"chunks": chunks}},
        spread=True, collective="allgather",
    )  # fmt: skip
    per = chunks // n
    v = np.arange(n)
    d, step = 1, 0
    while d < n:
        for j in range(min(d, n - d)):
            shard = (v + j) % n  # the j-th shard each rank forwards
            for k in range(per):
                b.add_rank_arrays(step, shard * per + k, v, (v - d) % n, "copy")
        d, step = 2 * d, step + 1
    return b.build()
