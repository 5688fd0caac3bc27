"""Lower bounds on AllReduce time: the bandwidth (cut) bound and the latency bound.

Bandwidth bound (ForestColl, arXiv 2402.06787): without in-network reduction an AllGather of
M bytes per rank over N ranks needs at least

    T*_AG = (M/N) * max_S |S ∩ ranks| / egress(S)

over node sets S that hold some but not all ranks (the ingress form is the same family, taken
over complements), and an AllReduce (a reduce-scatter plus an all-gather) needs 2·T*_AG.

It is computed exactly by Dinkelbach iterations over max-flow tests: for a ratio a/b, add a
source with an arc of capacity b to every rank and give every link a·capacity; some S beats a/b
exactly when the max flow from the source to some rank v is below b·N, and the source side of
that min cut is such an S. scipy's max flow takes int32 capacities, so bandwidths are scaled to
small integers (exactly when they share a unit, e.g. 100 and 400 Gb/s); the returned bound is
always evaluated in floating point on the cut it found, so it is a true lower bound, and it is
the optimum up to `tolerance`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, dijkstra, maximum_flow

from arsched.errors import ArschedError
from arsched.topology.core import Topology

_INT_LIMIT = 2**31 - 1
_SCALE_EXACT = 1000  # largest common multiplier tried to make all bandwidth ratios integral
_SCALE_APPROX = 1000  # resolution when they are not
_MAX_CAP = 2**15  # largest integer link capacity, so that a·cap stays in int32 for a <= 2**16


class BoundError(ArschedError):
    """The ranks given for a bound are invalid (not servers, duplicates, fewer than two)."""


@dataclass(frozen=True)
class CutBound:
    """The binding cut: AllGather time per byte of the full vector is `ranks_inside/N/egress`."""

    seconds_per_byte: float  # T*_AG / M
    cut: tuple[str, ...] = field(repr=False)  # the node set S
    ranks_inside: int
    egress: float  # bytes/s leaving S
    exact: bool  # False if bandwidths had to be rounded to find the cut
    tolerance: float  # relative distance to the optimum the search guarantees
    maxflows: int  # max-flow computations used


def _ranks(topology: Topology, ranks: Sequence[str] | None) -> tuple[str, ...]:
    rs = tuple(topology.servers if ranks is None else ranks)
    if len(set(rs)) != len(rs):
        raise BoundError("the ranks for a bound contain a duplicate")
    for r in rs:
        if r not in topology or topology.kind(r) != "server":
            raise BoundError(f"rank {r!r} is not a server of {topology.name}")
    if len(rs) < 2:
        raise BoundError("a bound needs at least two ranks")
    return rs


def _integer_capacities(bw: np.ndarray) -> tuple[np.ndarray, bool]:
    """Small positive integers proportional to the bandwidths; exact if they share a unit."""
    with np.errstate(over="ignore"):
        ratios = bw / bw.min()
    if not np.isfinite(ratios).all():  # bandwidths over 1e308 apart: only a rounded scale fits
        return np.maximum(np.round(bw / bw.max() * _MAX_CAP), 1).astype(np.int64), False
    uniq = np.unique(ratios)
    mult = 1
    for r in uniq:
        mult = math.lcm(mult, Fraction(float(r)).limit_denominator(_SCALE_EXACT).denominator)
        if mult > _SCALE_EXACT:
            break
    scaled = uniq * mult
    if mult <= _SCALE_EXACT and np.allclose(scaled, np.round(scaled), rtol=0, atol=1e-9 * scaled.max()):
        caps = np.round(ratios * mult)
        if caps.max() <= _MAX_CAP:
            return caps.astype(np.int64), True
    resolution = min(_SCALE_APPROX, _MAX_CAP / ratios.max())
    caps = np.maximum(np.round(ratios * resolution), 1)
    return caps.astype(np.int64), False


class _CutSearch:
    """Dinkelbach search for max |S ∩ R| / cap(S) with max-flow tests (see the module doc)."""

    def __init__(self, topology: Topology, ranks: tuple[str, ...]) -> None:
        c = topology.compiled
        self.c = c
        self.n = c.num_nodes
        self.rank_idx = np.array([c.index[r] for r in ranks], dtype=np.int64)
        self.is_rank = np.zeros(self.n + 1, dtype=bool)
        self.is_rank[self.rank_idx] = True
        self.caps, self.exact = _integer_capacities(c.capacity)
        src = self.n
        rows = np.concatenate([c.link_src, np.full(len(ranks), src)])
        cols = np.concatenate([c.link_dst, self.rank_idx])
        self.graph = sp.csr_array(
            (np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(self.n + 1, self.n + 1)
        )
        self.graph.sort_indices()
        # where each link and each source arc landed in the CSR data array
        pos = sp.csr_array((np.arange(1, len(rows) + 1), (rows, cols)), shape=(self.n + 1, self.n + 1))
        pos.sort_indices()
        order = pos.data - 1
        self.slot_of = np.empty(len(rows), dtype=np.int64)
        self.slot_of[order] = np.arange(len(rows))
        self.num_links = c.num_links
        self.maxflows = 0

    def ratio(self, inside: np.ndarray) -> tuple[int, int]:
        """(|S ∩ R|, integer egress capacity) of the node set given as a boolean mask."""
        cut = inside[self.c.link_src] & ~inside[self.c.link_dst]
        return int(inside[: self.n][self.rank_idx].sum()), int(self.caps[cut].sum())

    def set_ratio(self, a: int, b: int) -> None:
        """Capacities a·cap(e) on links and b on source arcs (test 'does S beat a/b?')."""
        data = np.empty(len(self.slot_of), dtype=np.int64)
        data[self.slot_of[: self.num_links]] = a * self.caps
        data[self.slot_of[self.num_links :]] = b
        self.graph.data = data.astype(np.int32)

    def source_side(self, flow: sp.csr_array) -> np.ndarray:
        """Nodes reachable from the source in the residual graph of a max flow."""
        residual = (self.graph.astype(np.int64) - flow.astype(np.int64)).tocsr()
        residual.data = (residual.data > 0).astype(np.int8)
        residual.eliminate_zeros()
        reach = breadth_first_order(residual, self.n, directed=True, return_predecessors=False)
        inside = np.zeros(self.n + 1, dtype=bool)
        inside[reach] = True
        inside[self.n] = False
        return inside

    def start(self) -> np.ndarray:
        """The best single-node cut: one rank alone, or everything but one rank."""
        best, best_val = None, -1.0
        for v in self.rank_idx:
            for inside in (np.arange(self.n + 1) == v, np.arange(self.n + 1) != v):
                inside = inside.copy()
                inside[self.n] = False
                a, b = self.ratio(inside)
                if b > 0 and a > 0 and a / b > best_val:
                    best, best_val = inside, a / b
        assert best is not None
        return best

    def run(self) -> tuple[np.ndarray, float]:
        """The maximising cut (as a mask) and the guaranteed relative tolerance."""
        best = self.start()
        a, b = self.ratio(best)
        n_ranks = len(self.rank_idx)
        tolerance = 0.0
        since, k = 0, 0
        while since < n_ranks:
            g = math.gcd(a, b)
            ta, tb = a // g, b // g
            limit = _INT_LIMIT // (4 * n_ranks)
            if tb > limit:
                shrink = math.ceil(tb / limit)
                tb = max(1, tb // shrink)  # a slightly larger ratio: a test that may miss by ~1/limit
                tolerance = max(tolerance, ta / tb / (a / b) - 1)
            self.set_ratio(ta, tb)
            v = int(self.rank_idx[k % n_ranks])
            k += 1
            self.maxflows += 1
            res = maximum_flow(self.graph, self.n, v)
            if res.flow_value < tb * n_ranks:
                inside = self.source_side(res.flow)
                na, nb = self.ratio(inside)
                if nb > 0 and na * b > a * nb:
                    best, a, b = inside, na, nb
                    since = 0
                    continue
            since += 1
        return best[: self.n], tolerance


_CACHE: weakref.WeakKeyDictionary[Topology, dict[tuple[str, ...], CutBound]] = weakref.WeakKeyDictionary()


def allgather_cut(topology: Topology, ranks: Sequence[str] | None = None) -> CutBound:
    """The binding cut of the AllGather bandwidth bound, with its value per byte of M.

    Cached per topology and rank tuple: simulators ask for it with every result.
    """
    rs = _ranks(topology, ranks)
    per_topology = _CACHE.setdefault(topology, {})
    if rs not in per_topology:
        per_topology[rs] = _search_cut(topology, rs)
    return per_topology[rs]


def _search_cut(topology: Topology, rs: tuple[str, ...]) -> CutBound:
    search = _CutSearch(topology, rs)
    inside, tol = search.run()
    c = topology.compiled
    cut_links = inside[c.link_src] & ~inside[c.link_dst]
    egress = float(c.capacity[cut_links].sum())
    k = int(inside[search.rank_idx].sum())
    return CutBound(
        seconds_per_byte=k / len(rs) / egress,
        cut=tuple(c.node_ids[i] for i in np.flatnonzero(inside)),
        ranks_inside=k,
        egress=egress,
        exact=search.exact and tol == 0.0,
        tolerance=tol if search.exact else max(tol, 1.0 / _SCALE_APPROX),
        maxflows=search.maxflows,
    )


def allgather_bound(topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1.0) -> float:
    """T*_AG in seconds for `nbytes` per rank (the full vector each rank ends with)."""
    return allgather_cut(topology, ranks).seconds_per_byte * nbytes


def allreduce_bound(topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1.0) -> float:
    """2·T*_AG: the bandwidth lower bound of AllReduce in seconds, no in-network reduction."""
    return 2.0 * allgather_bound(topology, ranks, nbytes)


def latency_bound(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    alpha: float = 0.0,
    port_model: bool = False,
) -> float:
    """Seconds any AllReduce needs whatever the size: data of the farthest pair must meet.

    Flow model (default): α plus the largest rank-to-rank path latency (the fastest path).
    With `port_model=True` (the round model: a directed link carries one flow per round) also
    at least ⌈log_{k+1} N⌉ sequential transfers, each costing α plus the smallest rank-to-rank
    latency, where k is the most in-ports of any rank.
    """
    rs = _ranks(topology, ranks)
    c = topology.compiled
    weights = np.maximum(c.latency, 1e-300)  # csgraph drops explicit zeros
    g = sp.csr_array((weights, (c.link_src, c.link_dst)), shape=(c.num_nodes, c.num_nodes))
    idx = [c.index[r] for r in rs]
    dist = dijkstra(g, directed=True, indices=idx)[:, idx]
    off = ~np.eye(len(rs), dtype=bool)
    if np.isinf(dist[off]).any():
        raise BoundError(f"some ranks of {topology.name} cannot reach each other")
    dist = np.where(dist < 1e-200, 0.0, dist)
    bound = alpha + float(dist[off].max())
    if port_model:
        k = int(np.bincount(c.link_dst, minlength=c.num_nodes)[idx].max())
        levels = math.ceil(math.log(len(rs)) / math.log(k + 1) - 1e-12)
        bound = max(bound, levels * (alpha + float(dist[off].min())))
    return bound


def lower_bound(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1.0, alpha: float = 0.0
) -> float:
    """max(bandwidth bound, latency bound): no AllReduce of `nbytes` can finish sooner."""
    return max(allreduce_bound(topology, ranks, nbytes), latency_bound(topology, ranks, alpha))
