"""Multi-ring AllReduce: several rings over disjoint ports, each carrying a share of the data.

Server-centric networks give every server several ports, and a single ring uses one of them:
on BCube(n,k) and tori a single ring is 2–4× off the bandwidth bound. Here ring l visits the
servers in a reflected (snake) mixed-radix Gray order whose fastest digit is dimension l, so
consecutive servers differ in one digit and almost every hop of ring l uses level-l (BCube)
or dimension-l (torus) links: k+1 rings on BCube, 2 per dimension (both directions) on a
torus. On any other network, or a subset of the servers, two rings run in opposite directions
around the low-contention ring order (full-duplex links give each direction its own link).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple, ring_order
from arsched.algorithms.registry import register
from arsched.algorithms.ring import add_ring
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


def snake(radices: Sequence[int], fastest: int) -> list[int]:
    """Row-major indices (digit 0 least significant) in reflected Gray order, `fastest` first."""
    order = [fastest] + [d for d in range(len(radices)) if d != fastest]
    seq: list[tuple[int, ...]] = [()]
    for d in order:  # grow from the fastest digit outwards
        grown = []
        for v in range(radices[d]):
            inner = seq if v % 2 == 0 else seq[::-1]
            grown += [(*prefix, v) for prefix in inner]
        seq = grown
    weights = np.cumprod([1, *radices[:-1]])
    return [int(sum(digits[order.index(d)] * weights[d] for d in range(len(radices)))) for digits in seq]


FLOW_SELECT_LIMIT = 20_000


def _structured_orders(topology: Topology, ranks: tuple[str, ...]) -> list[list[int]] | None:
    """Ring orders (as server indices) for BCube and tori built by arsched, else None."""
    if ranks != topology.servers:
        return None
    m = re.fullmatch(r"bcube\((\d+),(\d+)\)", topology.name)
    if m:
        n, k = int(m[1]), int(m[2])
        return [snake([n] * (k + 1), level) for level in range(k + 1)]
    m = re.fullmatch(r"torus\(([\dx]+)\)", topology.name)
    if m:
        dims = [int(d) for d in m[1].split("x")][::-1]  # row-major: the last dimension is digit 0
        orders = []
        for d in range(len(dims)):
            if dims[d] > 1:
                fwd = snake(dims, d)
                orders += [fwd, fwd[::-1]]
        return orders
    return None


def _build(
    topology: Topology, rs: tuple[str, ...], nbytes: float, orders: list[list[int]], chunks: int | None
) -> Schedule:
    n = len(rs)
    chunks = chunk_multiple(chunks, len(orders) * n, "multi-ring", ranks=n)
    per = chunks // (len(orders) * n)
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "multi-ring", {"params": {"chunks": chunks, "rings": len(orders)}}
    )
    for i, order in enumerate(orders):
        add_ring(b, np.array(order), i * n * per, per)
    return b.build()


@register("multi-ring", "several rings over disjoint ports/dimensions (BCube, torus), or two opposite rings")
def multi_ring(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Multi-ring AllReduce: each ring takes an equal share of the chunks.

    Candidates: the per-dimension rings (BCube, torus), two opposite rings, and one ring; the
    fastest is kept, timed in the flow model (α = 5 µs) up to `FLOW_SELECT_LIMIT` transfers and
    in the round model above, so it does no worse than a single ring by that measure. With
    `chunks` given, only candidates whose ring count divides it are considered.
    """
    from arsched.sim import simulate_flow, simulate_rounds

    rs = check_ranks(topology, ranks, "multi-ring")
    nbytes = check_nbytes(nbytes, "multi-ring")
    n = len(rs)
    index = {r: i for i, r in enumerate(rs)}
    one = [index[r] for r in ring_order(topology, rs)]
    candidates = [
        c for c in (_structured_orders(topology, rs), [one, one[::-1]] if n > 2 else None, [one]) if c
    ]
    if chunks is not None:
        chunk_multiple(chunks, n, "multi-ring", ranks=n)
        candidates = [c for c in candidates if chunks % (len(c) * n) == 0] or candidates[-1:]
    built = [_build(topology, rs, nbytes, c, chunks) for c in candidates]

    def timed(s: Schedule) -> float:
        return (simulate_flow(s) if len(s) <= FLOW_SELECT_LIMIT else simulate_rounds(s)).time_s

    return min(built, key=timed)
