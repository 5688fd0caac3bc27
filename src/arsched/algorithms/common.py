"""Helpers shared by the algorithms: rank checks, chunk counts (within the memory limit), ring
orders."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from arsched.algorithms.registry import NotApplicable
from arsched.algorithms.routes import route
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError
from arsched.limits import check_schedule
from arsched.topology.core import Topology


def check_ranks(topology: Topology, ranks: Sequence[str] | None, name: str) -> tuple[str, ...]:
    """The rank tuple (all servers by default): unique servers of the topology, at least two."""
    rs = tuple(topology.servers if ranks is None else ranks)
    if len(set(rs)) != len(rs):
        raise ArschedError(f"{name}: the ranks contain a duplicate")
    for r in rs:
        if r not in topology or topology.kind(r) != "server":
            raise ArschedError(f"{name}: rank {r!r} is not a server of {topology.name}")
    if len(rs) < 2:
        raise NotApplicable(f"{name} needs at least two ranks")
    return rs


def check_root(ranks: tuple[str, ...], root: str | None, name: str) -> str:
    """The root of a rooted collective: the given rank, or the first one by default."""
    if root is None:
        return ranks[0]
    if root not in ranks:
        raise ArschedError(f"{name}: the root {root!r} is not one of the ranks")
    return root


def check_nbytes(nbytes: float, name: str) -> float:
    """The vector size in bytes as a float: a positive finite number (`name` for the message)."""
    if not (float(nbytes) > 0 and np.isfinite(nbytes)):
        raise ArschedError(f"{name}: the size must be a positive number of bytes, got {nbytes!r}")
    return float(nbytes)


def chunk_multiple(
    chunks: int | None,
    unit: int,
    name: str,
    *,
    ranks: int,
    transfers: Callable[[int], int] | None = None,
    paths: int | None = None,
) -> int:
    """A chunk count that is a positive multiple of `unit` (default: `unit`), for a schedule
    over `ranks` ranks that fits in the memory limit: one of so many chunks that its transfers
    (`transfers(chunks)`; by default the fewest an AllReduce needs, 2(ranks − 1) per chunk) and
    its distinct `paths` (where the algorithm knows how many at most) would not fit is refused
    before anything is built (`limits.check_schedule`)."""
    if chunks is None:
        chunks = unit
    elif not (isinstance(chunks, (int, np.integer)) and chunks >= unit and chunks % unit == 0):
        raise ArschedError(f"{name}: chunks must be a positive multiple of {unit}, got {chunks!r}")
    check_schedule(name, ranks, int(chunks), None if transfers is None else transfers(int(chunks)), paths)
    return int(chunks)


def pipeline_chunks(topology: Topology, ranks: Sequence[str], nbytes: float, hops: int) -> int:
    """Chunks for pipelining a buffer over `hops` hops in a row: c chunks take about (c + hops −
    1)(M / (c·B) + α) with B the slowest link leaving a rank, least at c = √((hops − 1)·M /
    (B·α)), with α the flow model's default (1 to 1,024)."""
    out = rank_out_capacity(topology, ranks)
    best = math.sqrt(max(hops - 1, 0) * nbytes / (float(out.min()) * DEFAULT_ALPHA))
    return int(min(max(round(best), 1), 1024))


TWO_OPT_WORK = 200_000_000
"""The most pair evaluations (n² per pass) `ring_order`'s 2-opt spends: a few seconds at most,
hundreds of passes at 512 ranks."""
TWO_OPT_BLOCK = 1 << 20  # pairs a 2-opt pass evaluates at once


def ring_order(topology: Topology, ranks: tuple[str, ...]) -> tuple[str, ...]:
    """A ring order with few shared links and short hops: of the given order, a
    nearest-neighbour tour from the first rank (lowest index at ties) and, where both put two
    hops on some link and hops are the same both ways, that tour shortened by 2-opt, the one
    whose hops load their most loaded directed link least, then with the fewest hops in total,
    then the earliest.

    A nearest-neighbour tour ends with long jumps back across the network, which on DCell and
    random fabrics put two of its hops on one link; 2-opt removes such crossings."""
    hops = topology.router.hop_matrix(ranks).astype(np.float64)
    if (hops < 0).any():
        raise NotApplicable(f"some ranks of {topology.name} cannot reach each other")
    n = len(ranks)

    def cost(order: np.ndarray) -> tuple[int, float]:
        nxt = np.roll(order, -1)
        links = route(topology, ranks, order, nxt, spread=False).links
        return int(np.bincount(links).max()), float(hops[order, nxt].sum())

    tour = [0]
    free = np.ones(n, dtype=bool)
    free[0] = False
    for _ in range(n - 1):
        nxt = int(np.argmin(np.where(free, hops[tour[-1]], np.inf)))
        tour.append(nxt)
        free[nxt] = False
    scored = [(cost(order), k, order) for k, order in enumerate((np.arange(n), np.array(tour)))]
    if min(scored)[0][0] > 1 and np.array_equal(hops, hops.T):
        shorter = two_opt(hops, np.array(tour), max(1, TWO_OPT_WORK // (n * n)))
        scored.append((cost(shorter), 2, shorter))
    return tuple(ranks[i] for i in min(scored, key=lambda s: s[:2])[2])


def two_opt(dist: np.ndarray, tour: np.ndarray, passes: int) -> np.ndarray:
    """`tour` (a cycle over the indices of the symmetric matrix `dist`) shortened by 2-opt: each
    pass reverses the segment whose reversal shortens the cycle most (the first such in row
    order), until none does or `passes` have run. A pass scans the segments a block of
    `TWO_OPT_BLOCK` at a time, so its memory stays below the distance matrix's."""
    tour = tour.copy()
    n = len(tour)
    rows = max(1, TWO_OPT_BLOCK // n)
    col = np.arange(n)
    for _ in range(passes):
        best, move = 1e-9, None
        nxt = np.roll(tour, -1)
        here = dist[tour, nxt]  # the length of each hop: tour[k] to the next
        for start in range(0, n, rows):
            i = np.arange(start, min(start + rows, n))[:, None]
            gain = here[i] + here[col] - dist[tour[i], tour[col]] - dist[nxt[i], nxt[col]]
            gain[(col <= i + 1) | ((i == 0) & (col == n - 1))] = -np.inf  # i < j − 1, not both at tour[0]
            k = int(np.argmax(gain))
            if gain.flat[k] > best:
                best, move = gain.flat[k], (start + k // n, k % n)
        if move is None:
            break
        a, b = move
        tour[a + 1 : b + 1] = tour[a + 1 : b + 1][::-1]
    return tour


def chain_floor(
    topology: Topology, ranks: Sequence[str], hops: int, transfer_bytes: float, alpha: float
) -> float:
    """Seconds a chain of `hops` transfers of `transfer_bytes` each, every one waiting for the
    one before it to arrive, takes at least in the flow model: each pays α and sends at no
    more than the fastest link leaving a rank (a `registry.Floor` for chained schemes)."""
    return hops * (alpha + transfer_bytes / float(rank_out_capacity(topology, ranks).max()))


def rank_out_capacity(topology: Topology, ranks: Sequence[str]) -> np.ndarray:
    """The capacities of the links leaving the ranks."""
    c = topology.compiled
    return c.capacity[np.isin(c.link_src, [c.index[r] for r in ranks])]
