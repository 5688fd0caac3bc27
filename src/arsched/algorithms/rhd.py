"""Recursive halving-doubling AllReduce (Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005).

For N = 2^k: k halving steps (reduce-scatter: exchange half of the current range with the
partner at distance N/2, N/4, ...) then k doubling steps (all-gather in reverse), 2k steps in
all, bandwidth-optimal on a non-blocking network and logarithmic in latency. Any other N: the
first 2r ranks (r = N − 2^⌊log2 N⌋) pair up, the even one of each pair first adds its whole
vector into the odd one, the 2^k remaining ranks run the power-of-two algorithm, and the odd
ones copy the result back: 2⌊log2 N⌋ + 2 steps.
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
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "rhd", {"params": {"chunks": chunks}})
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
    for i in range(k):  # halving: keep the half on your side of the partner
        m = p2 >> (i + 1)
        half = size // 2
        upper = (v & m) != 0
        send_lo = np.where(upper, lo, lo + half)  # the half the partner keeps
        for j in range(half):
            b.add_rank_arrays(step, send_lo + j, members, members[v ^ m], "reduce")
        lo = np.where(upper, lo + half, lo)
        size = half
        step += 1
    for i in range(k):  # doubling: send everything you own to the partner
        m = 1 << i
        for j in range(size):
            b.add_rank_arrays(step, lo + j, members, members[v ^ m], "copy")
        lo = np.minimum(lo, lo[v ^ m])
        size *= 2
        step += 1
    if extra:
        for i in range(extra):
            b.add_rank_arrays(step, all_chunks, np.full(chunks, 2 * i + 1), np.full(chunks, 2 * i), "copy")
    return b.build()
