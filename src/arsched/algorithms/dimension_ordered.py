"""Dimension-ordered AllReduce on BCube and tori: the hand-crafted designs of these networks,
which the RL paper wants to make unnecessary (registered as `bcube-native` and `torus-native`).

`bcube-native` (Guo et al., SIGCOMM'09, the BCube all-to-all/AllReduce construction): a
reduce-scatter level by level — within every group of n servers on one level-l switch, each
server adds 1/n of what it is responsible for into each group member — then the all-gather in
the reverse order of levels. k+1 copies run at once on equal shares of the data, copy j
starting at level j, so in every phase each server uses all its k+1 ports: the AllReduce
bound of BCube, 2(N−1)/N · M / ((k+1)B), up to latency.

`torus-native` (the bucket / dimension-ordered algorithm of tori): a ring reduce-scatter along
each dimension in turn, then all-gathers in reverse order; d copies run at once, one per
starting dimension, each using its ring both ways (`chains`: ⌊r/2⌋ steps per dimension instead
of the r − 1 of one-way rings, as many bytes), so every port of every server is busy. Where the
dimensions differ in size or speed the copies get unequal shares (`shares`) and the data goes
in pipelined pieces, chosen by simulation (`torus_native`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

import numpy as np
from scipy.optimize import linprog

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.fastest import (
    SIMULATE_INSTANTS,
    SIMULATE_TRANSFERS,
    check_channels,
    fastest,
    fastest_channels,
)
from arsched.algorithms.packing.pipeline import MAX_STAGES
from arsched.algorithms.registry import NotApplicable, register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import default_alpha
from arsched.errors import ArschedError
from arsched.topology.core import Topology, is_int

PIECES = (1, 2, 3, 4, 6, 8, 12, 16)  # torus-native's default pieces (uneven dimensions)


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
    step: int | np.ndarray,
    base: int | np.ndarray,
    per: int,
    op: str,
    ring_sign: int,
) -> int:
    """One dimension of a reduce-scatter (op 'reduce') or all-gather ('copy'); returns steps.

    A chunk of the copy is named by the digits of the server finally responsible for it;
    server s handles the chunks whose `fixed` digits equal its own. `ring_sign` 0: every member
    of s's group along `dim` talks to s directly (BCube: one switch per group, one step);
    ±1: a ring along `dim` in that direction (torus: r − 1 steps); `BOTH`: both directions of
    the ring at once (`chains`, ⌊r/2⌋ steps; `per` even). `step` and `base` may be arrays, one
    entry per piece of a pipeline: the same phase for every piece in one call per move.
    """
    r = radices[dim]
    if ring_sign == 0:  # direct exchange: peer h+1 along the dimension
        moves = [(0, h + 1, h + 1 if op == "reduce" else 0, 0, per) for h in range(r - 1)]
    elif ring_sign == BOTH:
        moves = chains(r, op, per)
    else:  # ring: reduce segment own−sign·(h+1) (ends owning `own`), then forward own−sign·h
        sign = ring_sign
        moves = [(h, sign, -sign * (h + 1) if op == "reduce" else -sign * h, 0, per) for h in range(r - 1)]
    n = int(np.prod(radices))
    servers = np.arange(n)
    sdig = _digits(servers, radices)
    weights = np.cumprod([1, *radices[:-1]])
    free = [d for d in range(len(radices)) if d not in fixed and d != dim]
    free_vals = _digits(np.arange(int(np.prod([radices[d] for d in free]))), [radices[d] for d in free])
    own = sdig[:, dim]
    for at, to, send, lo, hi in moves:
        peer_digit = (own + to) % r
        peer = servers + (peer_digit - own) * weights[dim]
        digits = sdig.copy()
        digits[:, dim] = (own + send) % r
        digits[:, free] = 0
        chunk = (free_vals @ weights[free])[:, None] + (digits @ weights)[None, :]  # (free values, servers)
        # every piece's, every free value's chunks, parts lo..hi-1, every server: one call, rows
        # in that order
        pieces = np.reshape(base, (-1, 1, 1, 1))
        shape = (len(pieces), len(free_vals), hi - lo, n)
        at_steps = np.asarray(step) + at
        b.add_rank_arrays(
            at_steps if at_steps.ndim == 0 else np.broadcast_to(at_steps.reshape(-1, 1, 1, 1), shape).ravel(),
            (pieces + chunk[None, :, None, :] * per + np.arange(lo, hi)[None, None, :, None]).ravel(),
            np.broadcast_to(servers, shape).ravel(),
            np.broadcast_to(peer, shape).ravel(),
            op,
        )
    return max(at for at, *_ in moves) + 1 if moves else 0


BOTH = 2
"""`phase`'s ring sign for a ring used both ways at once."""


def chains(r: int, op: str, per: int) -> list[tuple[int, int, int, int, int]]:
    """A ring of r used both ways at once, as moves (step, peer offset, segment offset, first
    part, end part): a server sends the peer at `own + peer offset` the parts [first, end) of the
    segment at `own + segment offset`, in that step.

    Every segment's parts fall in two halves; each half is reduced along two chains, one from
    either side, that meet at its owner (an all-gather: leave it), ⌈(r − 1)/2⌉ hops on one side
    and ⌊(r − 1)/2⌋ on the other, the long side clockwise for the first half and anticlockwise
    for the second. Every link carries (r − 1)/2 segments either way, as two opposite rings do,
    but a chain is only ⌊r/2⌋ steps long instead of r − 1: half the steps, each of which costs a
    connection α (a 4×4 torus: 8 steps instead of 12)."""
    half = per // 2
    long_, short = r // 2, (r - 1) // 2
    moves = []
    for lo, hi, cw in ((0, half, long_), (half, per, short)):
        for sign, length in ((1, cw), (-1, long_ + short - cw)):
            for k in range(length):
                # reduce: the server `length − k` hops before the owner sends on towards it;
                # copy: the server k hops after the owner sends on away from it
                segment = sign * (length - k) if op == "reduce" else -sign * k
                moves.append((k, sign, segment, lo, hi))
    return moves


def _dimension_ordered(
    b: ScheduleBuilder,
    radices: list[int],
    orders: list[tuple[list[int], int]],
    per: int,
    first: int | np.ndarray = 0,
    start: int | np.ndarray = 0,
) -> None:
    """Copy j (dimension order, ring sign) reduce-scatters dimension by dimension from step
    `start`, then all-gathers in reverse; it owns chunks first + [j·N·per, (j+1)·N·per). With
    arrays `first` and `start`, one such copy per entry (the pieces of a pipeline)."""
    n = int(np.prod(radices))
    for j, (order, sign) in enumerate(orders):
        base, step = first + j * n * per, start
        for i, dim in enumerate(order):
            step = step + phase(b, radices, dim, order[:i], step, base, per, "reduce", sign)
        for i, dim in reversed(list(enumerate(order))):
            step = step + phase(b, radices, dim, order[:i], step, base, per, "copy", sign)


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


@register("torus-native", "dimension-ordered reduce-scatter/all-gather, each ring used both ways")
def torus_native(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    chunks: int | None = None,
    pieces: int | None = None,
    alpha: float | None = None,
    channels: int | None = None,
) -> Schedule:
    """The torus's dimension-ordered AllReduce: rings along one dimension at a time, used both
    ways, one copy starting at each dimension with the share of the data (`shares`) that loads
    every dimension's links equally, in `pieces` pipelined pieces (each a scaled copy of the
    whole, entering one step after the other).

    `chunks` is a multiple of 2N (default: the fewest that give shares within 1 % of the best
    split, times the pieces). Where the dimensions differ in size or speed, a copy's phases take
    different times, and a link waits for the other copies' phases to end (the 5×3 torus at 256
    MB: 1.14× the bound in one piece, 1.02× in three; 12×6: 1.29× and 1.06× in sixteen): the
    default `pieces` is then the fastest of `PIECES` in the flow model at `alpha` (default: the
    flow model's), as many as fit in `SIMULATE_TRANSFERS`, each piece costing every connection a
    step (α); the time need not fall or rise steadily with the pieces (12×6 at 16 MB: two pieces
    slower than one, four faster), so all are timed. On a torus whose dimensions are alike every
    copy's phases take equal times, and one piece it is. The schedule goes over `channels`
    connections per rank pair (None: one or two, whichever is faster, `fastest_channels`)."""
    rs = check_ranks(topology, ranks, "torus-native")
    nbytes = check_nbytes(nbytes, "torus-native")
    radices = _grid(topology, rs, "torus")
    channels = check_channels(channels, "torus-native")
    a = default_alpha("flow") if alpha is None else float(alpha)
    if not (a >= 0 and math.isfinite(a)):
        raise ArschedError(f"torus-native: alpha must be a non-negative number of seconds, got {alpha!r}")
    if pieces is not None and not (is_int(pieces) and 1 <= pieces <= MAX_STAGES):
        raise ArschedError(f"torus-native: pieces must be an integer from 1 to {MAX_STAGES}, got {pieces!r}")
    dims = [d for d in range(len(radices)) if radices[d] > 1]
    n = len(rs)
    orders = [[dims[(j + i) % len(dims)] for i in range(len(dims))] for j in range(len(dims))]
    loads = _copy_loads(topology, rs, radices, orders)
    units = None if chunks is None else chunk_multiple(chunks, 2 * n, "torus-native", ranks=n) // (2 * n)
    phases = np.array([[loads[j, orders[0].index(dim)] for dim in order] for j, order in enumerate(orders)])
    alike = bool(np.allclose(phases, phases[0], rtol=1e-9, atol=0))
    counts = [int(pieces)] if pieces is not None else [1] if alike else list(PIECES)
    if units is not None:
        counts = [p for p in counts if units % p == 0]
        if not counts:
            raise ArschedError(f"torus-native: {chunks} chunks do not split into {pieces} pieces of 2N")

    split = shares(loads) if units is None else None  # the same for every count of pieces

    def make(count: int) -> Schedule:
        share = split if split is not None else shares(loads, units // count)
        total = chunk_multiple(2 * n * int(share.sum()) * count, 2 * n, "torus-native", ranks=n)
        params = {"chunks": total, "pieces": count}
        b = ScheduleBuilder(topology, rs, nbytes, total, "torus-native", {"params": params})
        starts = np.arange(count)
        offset = 2 * n * np.concatenate([[0], np.cumsum(share)])  # of each copy within a piece
        for order, k, at in zip(orders, share.tolist(), offset.tolist(), strict=False):
            if k:  # piece p's copies from chunk p · (its chunks) on, in copy order
                _dimension_ordered(b, radices, [(order, BOTH)], 2 * k, at + starts * int(offset[-1]), starts)
        return b.build()

    first = make(counts[0])
    best = fastest(
        first,
        [functools.partial(make, c) for c in counts[1:]],
        [len(first) * c / counts[0] for c in counts[1:]],
        a,
        SIMULATE_TRANSFERS,
        SIMULATE_INSTANTS,
    )
    return fastest_channels(best, a, channels)


def _copy_loads(
    topology: Topology, ranks: tuple[str, ...], radices: list[int], orders: list[list[int]]
) -> np.ndarray:
    """(copies, dimensions): seconds per byte of a copy's share that its reduce-scatter puts
    on each link of each dimension (each way; the all-gather puts as much again). A dimension of
    size r ≥ 3 carries (r − 1)/r of what reaches it over its two cables, one of size 2 over its
    single cable; what reaches the dimension is 1/r of the data for every dimension before it;
    a cable is as fast as its slower way."""
    weights = np.cumprod([1, *radices[:-1]])
    loads = np.zeros((len(orders), len(orders)))
    for j, order in enumerate(orders):
        reach = 1.0
        for dim in order:
            r = radices[dim]
            u, v = ranks[0], ranks[int(weights[dim])]
            speed = min(topology.link(u, v).bandwidth, topology.link(v, u).bandwidth)
            loads[j, orders[0].index(dim)] = reach * (r - 1) / r / (2 if r > 2 else 1) / speed
            reach /= r
    return loads


def shares(loads: np.ndarray, units: int | None = None, slack: float = 1.01, most: int = 16) -> np.ndarray:
    """Whole units of data per copy (copies × dimensions `loads`, as `_copy_loads`) that keep the
    busiest dimension's load least: the LP's split rounded by largest remainders, over `units`
    units, or else over the fewest units (from one per copy up to `most` per copy) whose load is
    within `slack` of the LP's (the least loaded of those tried where none is)."""
    copies, dims = loads.shape
    loads = loads / loads.max()  # seconds per byte are far below the LP solver's tolerances
    # minimise t over (m, t): loadsᵀ m ≤ t, Σ m = 1, m ≥ 0
    lp = linprog(
        np.r_[np.zeros(copies), 1.0],
        A_ub=np.c_[loads.T, -np.ones(dims)],
        b_ub=np.zeros(dims),
        A_eq=np.r_[np.ones(copies), 0.0][None, :],
        b_eq=[1.0],
        bounds=[(0, None)] * (copies + 1),
        method="highs",
    )
    split, best = lp.x[:copies], lp.x[-1]

    def rounded(total: int) -> np.ndarray:
        exact = split * total
        k = np.floor(exact).astype(np.int64)
        k[np.argsort(k - exact, kind="stable")[: total - int(k.sum())]] += 1
        return k

    if units is not None:
        return rounded(units)
    tried = [rounded(total) for total in range(copies, most * copies + 1)]
    worst = [float((loads.T @ k).max() / k.sum()) for k in tried]
    good = [i for i, w in enumerate(worst) if w <= slack * best]
    return tried[good[0] if good else int(np.argmin(worst))]
