"""Dimension-ordered AllReduce on BCube and tori: the hand-crafted designs of these networks,
which the RL paper wants to make unnecessary (registered as `bcube-native` and `torus-native`).

`bcube-native` (Guo et al., SIGCOMM'09, the BCube all-to-all/AllReduce construction): a
reduce-scatter level by level — within every group of n servers on one level-l switch, each
server adds 1/n of what it is responsible for into each group member — then the all-gather in
the reverse order of levels. k+1 copies run at once on equal shares of the data, copy j
starting at level j, so in every phase each server uses all its k+1 ports: the AllReduce
bound of BCube, 2(N−1)/N · M / ((k+1)B), up to latency.

`torus-native` (the bucket / dimension-ordered algorithm of tori): a ring reduce-scatter along
each dimension in turn, then all-gathers in reverse order; 2d copies run at once, one per
starting dimension and direction, so every port of every server is busy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.registry import NotApplicable, register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


def _digits(values: np.ndarray, radices: Sequence[int]) -> np.ndarray:
    """Mixed-radix digits (digit 0 least significant) of every value, shape (len, len(radices))."""
    out = np.empty((len(values), len(radices)), dtype=np.int64)
    rest = values.copy()
    for d, r in enumerate(radices):
        out[:, d] = rest % r
        rest //= r
    return out


def _grid(topology: Topology, ranks: tuple[str, ...], family: str) -> list[int]:
    """The radices of a BCube or torus built by arsched; NotApplicable otherwise."""
    if family == "bcube":
        m = re.fullmatch(r"bcube\((\d+),(\d+)\)", topology.name)
        radices = [int(m[1])] * (int(m[2]) + 1) if m else None
    else:
        # a two-way torus, also with another bandwidth the other way (`reverse=`)
        m = re.fullmatch(r"torus\(([\dx]+)(?:,reverse=[^)]*)?\)", topology.name)
        radices = [int(d) for d in m[1].split("x")][::-1] if m else None  # row-major digits
    if radices is None:
        what = "a two-way torus" if family == "torus" else "a BCube"
        raise NotApplicable(f"{family}-native needs {what} built by arsched, not {topology.name}")
    if ranks != topology.servers:
        raise NotApplicable(f"{family}-native needs all servers of {topology.name} as ranks, in order")
    return radices


def phase(
    b: ScheduleBuilder,
    radices: list[int],
    dim: int,
    fixed: list[int],
    step: int,
    base: int,
    per: int,
    op: str,
    ring_sign: int,
) -> int:
    """One dimension of a reduce-scatter (op 'reduce') or all-gather ('copy'); returns steps.

    A chunk of the copy is named by the digits of the server finally responsible for it;
    server s handles the chunks whose `fixed` digits equal its own. `ring_sign` 0: every member
    of s's group along `dim` talks to s directly (BCube: one switch per group, one step);
    ±1: a ring along `dim` in that direction (torus: r − 1 steps).
    """
    n = int(np.prod(radices))
    servers = np.arange(n)
    sdig = _digits(servers, radices)
    weights = np.cumprod([1, *radices[:-1]])
    free = [d for d in range(len(radices)) if d not in fixed and d != dim]
    free_vals = _digits(np.arange(int(np.prod([radices[d] for d in free]))), [radices[d] for d in free])
    r = radices[dim]
    own = sdig[:, dim]
    for h in range(r - 1):
        if ring_sign == 0:  # direct exchange: peer h+1 along the dimension
            peer_digit = (own + h + 1) % r
            send_digit = peer_digit if op == "reduce" else own
            at = step
        else:  # ring: reduce segment own−sign·(h+1) (ends owning `own`), then forward own−sign·h
            peer_digit = (own + ring_sign) % r
            send_digit = (own - ring_sign * (h + 1)) % r if op == "reduce" else (own - ring_sign * h) % r
            at = step + h
        peer = servers + (peer_digit - own) * weights[dim]
        digits = sdig.copy()
        digits[:, dim] = send_digit
        digits[:, free] = 0
        chunk = (free_vals @ weights[free])[:, None] + (digits @ weights)[None, :]  # (free values, servers)
        # every free value's chunks, each of its `per` parts, every server: one call, rows in that order
        shape = (len(free_vals), per, n)
        b.add_rank_arrays(
            at,
            (base + chunk[:, None, :] * per + np.arange(per)[None, :, None]).ravel(),
            np.broadcast_to(servers, shape).ravel(),
            np.broadcast_to(peer, shape).ravel(),
            op,
        )
    return 1 if ring_sign == 0 else r - 1


def _dimension_ordered(
    b: ScheduleBuilder, radices: list[int], orders: list[tuple[list[int], int]], per: int
) -> None:
    """Copy j (dimension order, ring sign) reduce-scatters dimension by dimension, then
    all-gathers in reverse; it owns chunks [j·N·per, (j+1)·N·per)."""
    n = int(np.prod(radices))
    for j, (order, sign) in enumerate(orders):
        base, step = j * n * per, 0
        for i, dim in enumerate(order):
            step += phase(b, radices, dim, order[:i], step, base, per, "reduce", sign)
        for i, dim in reversed(list(enumerate(order))):
            step += phase(b, radices, dim, order[:i], step, base, per, "copy", sign)


@register("bcube-native", "BCube's level-by-level reduce-scatter/all-gather, k+1 copies on all ports")
def bcube_native(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """BCube's dimension-ordered AllReduce: attains BCube's bandwidth bound (all ports busy in
    every phase)."""
    rs = check_ranks(topology, ranks, "bcube-native")
    nbytes = check_nbytes(nbytes, "bcube-native")
    radices = _grid(topology, rs, "bcube")
    levels = len(radices)
    n = len(rs)
    chunks = chunk_multiple(chunks, levels * n, "bcube-native", ranks=n)
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "bcube-native", {"params": {"chunks": chunks}})
    orders = [([(j + i) % levels for i in range(levels)], 0) for j in range(levels)]
    _dimension_ordered(b, radices, orders, chunks // (levels * n))
    return b.build()


@register("torus-native", "dimension-ordered ring reduce-scatter/all-gather, 2 copies per dimension")
def torus_native(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """The torus's dimension-ordered AllReduce: rings along one dimension at a time, every port
    busy."""
    rs = check_ranks(topology, ranks, "torus-native")
    nbytes = check_nbytes(nbytes, "torus-native")
    radices = _grid(topology, rs, "torus")
    dims = [d for d in range(len(radices)) if radices[d] > 1]
    n = len(rs)
    starts = [(j, sign) for j in range(len(dims)) for sign in (1, -1)]
    chunks = chunk_multiple(chunks, len(starts) * n, "torus-native", ranks=n)
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "torus-native", {"params": {"chunks": chunks}})
    orders = [([dims[(j + i) % len(dims)] for i in range(len(dims))], sign) for j, sign in starts]
    _dimension_ordered(b, radices, orders, chunks // (len(starts) * n))
    return b.build()
