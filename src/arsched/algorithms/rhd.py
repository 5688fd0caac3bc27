"""Recursive halving-doubling AllReduce (Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005).

For N = 2^k: k halving steps (reduce-scatter: exchange half of the current range with the
partner at distance 1, 2, 4, ...) then k doubling steps (all-gather in reverse), 2k steps in
all, bandwidth-optimal on a non-blocking network and logarithmic in latency. The nearest
partners come first, so the largest exchanges (half the vector) stay between neighbouring ranks
(one box, one edge switch) and only 1/2^i of it crosses the i-th level: on multi-GPU boxes
numbered box by box this is the box-then-rail hierarchy, on an oversubscribed fabric it keeps
the bulk below the oversubscribed level. Any other N: the
first 2r ranks (r = N − 2^⌊log2 N⌋) pair up, the even one of each pair first adds its whole
vector into the odd one, the 2^k remaining ranks run the power-of-two algorithm, and the odd
ones copy the result back: 2⌊log2 N⌋ + 2 steps.

Each step is a permutation of partners at one distance, which a fat-tree carries without
contention only if its switches spread the pairs over their equal-cost uplinks, as ECMP does:
transfers take spread routes (d-mod-k, `ScheduleBuilder(spread=True)`), not the lowest-index
route, on which every pair crossing the core met at one core switch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


@register("rhd", "recursive halving-doubling (Rabenseifner), any number of ranks")
def rhd(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Halving-doubling AllReduce: log-depth, bandwidth-optimal on non-blocking networks."""
    rs = check_ranks(topology, ranks, "rhd")
    nbytes = check_nbytes(nbytes, "rhd")
    n = len(rs)
    k = n.bit_length() - 1
    p2 = 1 << k
    extra = n - p2
    chunks = chunk_multiple(chunks, p2, "rhd", ranks=n)
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "rhd", {"params": {"chunks": chunks}}, spread=True)
    all_chunks = np.arange(chunks)
    # ranks 0..2·extra−1 pair up (2i, 2i+1); the odd ones and ranks 2·extra.. take part
    members = np.array([2 * i + 1 for i in range(extra)] + list(range(2 * extra, n)))
    step = 0
    if extra:
        for i in range(extra):
            b.add_rank_arrays(0, all_chunks, np.full(chunks, 2 * i), np.full(chunks, 2 * i + 1), "reduce")
        step = 1
    lo = np.zeros(p2, dtype=np.int64)  # owned chunk range [lo, lo + size) of every member
    size = chunks
    v = np.arange(p2)
    bits = [1 << i for i in range(k)]  # nearest partners first: the big exchanges stay local
    for m in bits:  # halving: keep the half on your side of the partner
        half = size // 2
        upper = (v & m) != 0
        send_lo = np.where(upper, lo, lo + half)  # the half the partner keeps
        for j in range(half):
            b.add_rank_arrays(step, send_lo + j, members, members[v ^ m], "reduce")
        lo = np.where(upper, lo + half, lo)
        size = half
        step += 1
    for m in bits[::-1]:  # doubling: send everything you own to the partner
        for j in range(size):
            b.add_rank_arrays(step, lo + j, members, members[v ^ m], "copy")
        lo = np.minimum(lo, lo[v ^ m])
        size *= 2
        step += 1
    if extra:
        for i in range(extra):
            b.add_rank_arrays(step, all_chunks, np.full(chunks, 2 * i + 1), np.full(chunks, 2 * i), "copy")
    return b.build()
