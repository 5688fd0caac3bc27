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

import math
from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


def _halve(
    b: ScheduleBuilder, members: np.ndarray, names: np.ndarray, step: int
) -> tuple[np.ndarray, int, int]:
    """The halving steps over a power of two of `members` (rank indices): in each, exchange
    half of the range you own with the partner at distance 1, 2, 4, ... (nearest first: the
    big exchanges stay local) and keep your side. Ranges are of positions 0 .. len(names) − 1,
    position x being chunk names[x]. Returns each member's range start, its size and the next
    step."""
    p2, size = len(members), len(names)
    lo = np.zeros(p2, dtype=np.int64)
    v = np.arange(p2)
    for m in _bits(p2):
        half = size // 2
        upper = (v & m) != 0
        send_lo = np.where(upper, lo, lo + half)  # the half the partner keeps
        for j in range(half):
            b.add_rank_arrays(step, names[send_lo + j], members, members[v ^ m], "reduce")
        lo = np.where(upper, lo + half, lo)
        size = half
        step += 1
    return lo, size, step


def _double(
    b: ScheduleBuilder, members: np.ndarray, names: np.ndarray, lo: np.ndarray, size: int, step: int
) -> tuple[np.ndarray, int]:
    """The doubling steps, the halving's mirror: send everything you own to the partner at
    distance ..., 4, 2, 1. Returns the range starts (all 0) and the next step."""
    v = np.arange(len(members))
    for m in _bits(len(members))[::-1]:
        for j in range(size):
            b.add_rank_arrays(step, names[lo + j], members, members[v ^ m], "copy")
        lo = np.minimum(lo, lo[v ^ m])
        size *= 2
        step += 1
    return lo, step


def _bits(p2: int) -> list[int]:
    return [1 << i for i in range(p2.bit_length() - 1)]


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
    chunks = chunk_multiple(chunks, p2, "rhd", ranks=n, paths=n * (k + 2))  # a partner per level, the folds
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "rhd", {"params": {"chunks": chunks}}, spread=True)
    all_chunks = np.arange(chunks)
    # ranks 0..2·extra−1 pair up (2i, 2i+1); the odd ones and ranks 2·extra.. take part
    members = np.array([2 * i + 1 for i in range(extra)] + list(range(2 * extra, n)))
    step = 0
    if extra:
        for i in range(extra):
            b.add_rank_arrays(0, all_chunks, np.full(chunks, 2 * i), np.full(chunks, 2 * i + 1), "reduce")
        step = 1
    lo, size, step = _halve(b, members, np.arange(chunks), step)
    _, step = _double(b, members, np.arange(chunks), lo, size, step)
    if extra:
        for i in range(extra):
            b.add_rank_arrays(step, all_chunks, np.full(chunks, 2 * i + 1), np.full(chunks, 2 * i), "copy")
    return b.build()


def _sharded(collective: str):
    """Recursive halving (ReduceScatter) or doubling (AllGather) alone: log2 N steps for a power
    of two of ranks, the chunks named so that rank v ends with (starts from) its shard. Any
    other N folds the first 2r ranks in pairs as the AllReduce does: ReduceScatter first adds
    each even one's vector into its odd partner, halves over the 2^k members, and ends with each
    member copying its part of the even ranks' shards to them; AllGather mirrors it (the even
    ranks first copy their shards to the members, the odd ones last copy the vector back)."""

    def build(
        topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
    ) -> Schedule:
        rs = check_ranks(topology, ranks, "rhd")
        n = len(rs)
        p2 = 1 << (n.bit_length() - 1)
        extra = n - p2
        # every member's block: its shard and an equal part of the even ranks' shards
        chunks = chunk_multiple(chunks, n * p2 // math.gcd(extra, p2), "rhd", ranks=n)
        b = ScheduleBuilder(
            topology, rs, check_nbytes(nbytes, "rhd"), chunks, "rhd", {"params": {"chunks": chunks}},
            spread=True, collective=collective,
        )  # fmt: skip
        per, block = chunks // n, chunks // p2
        members = np.array([2 * i + 1 for i in range(extra)] + list(range(2 * extra, n)))
        folded = 2 * np.arange(extra)
        ends = np.zeros(p2, dtype=np.int64)  # where halving leaves each member: block ends[v]
        v = np.arange(p2)
        size = p2
        for m in _bits(p2):
            size //= 2
            ends = np.where(v & m, ends + size, ends)
        # block ends[j]: member j's shard, then its share of the folded ranks' shards
        spare = (folded[:, None] * per + np.arange(per)).reshape(p2, -1)  # member j's share: row j
        own = members[:, None] * per + np.arange(per)
        names = np.empty(chunks, dtype=np.int64)
        names.reshape(p2, block)[ends] = np.hstack([own, spare])
        owner = np.repeat(np.arange(p2), block - per)  # the member holding each spare chunk
        spare_from, spare_to = members[owner], spare.ravel() // per
        everything = np.arange(chunks)
        if collective == "reduce_scatter":
            for i in folded.tolist():
                b.add_rank_arrays(0, everything, np.full(chunks, i), np.full(chunks, i + 1), "reduce")
            step = _halve(b, members, names, int(extra > 0))[2]
            b.add_rank_arrays(step, spare.ravel(), spare_from, spare_to, "copy")
        else:
            b.add_rank_arrays(0, spare.ravel(), spare_to, spare_from, "copy")
            _, step = _double(b, members, names, ends * block, block, int(extra > 0))
            for i in folded.tolist():
                theirs = np.setdiff1d(everything, np.arange(i * per, (i + 1) * per))
                b.add_rank_arrays(step, theirs, np.full(len(theirs), i + 1), np.full(len(theirs), i), "copy")
        return b.build()

    build.__doc__ = f"Recursive {'halving' if collective == 'reduce_scatter' else 'doubling'} {collective}."
    return build


register("rhd", "", "reduce_scatter")(_sharded("reduce_scatter"))
register("rhd", "", "allgather")(_sharded("allgather"))
