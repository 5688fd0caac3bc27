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
from scipy.sparse.csgraph import breadth_first_order, connected_components, dijkstra, maximum_flow

from arsched.errors import ArschedError
from arsched.topology.compiled import CompiledTopology
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


def bound_ranks(topology: Topology, ranks: Sequence[str] | None) -> tuple[str, ...]:
    rs = tuple(topology.servers if ranks is None else ranks)
    if len(set(rs)) != len(rs):
        raise BoundError("the ranks for a bound contain a duplicate")
    for r in rs:
        if r not in topology or topology.kind(r) != "server":
            raise BoundError(f"rank {r!r} is not a server of {topology.name}")
    if len(rs) < 2:
        raise BoundError("a bound needs at least two ranks")
    return rs


def integer_capacities(bw: np.ndarray) -> tuple[np.ndarray, bool]:
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
    """Dinkelbach search for max |S ∩ R| / cap(S) with max-flow tests (see the module doc).

    `run(shortcuts=False)` is the plain search: Dinkelbach iterations from the best single-node
    cut, one max flow per rank in turn until N tests in a row find nothing better. The default
    `shortcuts=True` returns the very same cut, tolerance and value, with fewer max flows:

    1. Certificate (no search). Let a/b be the best single-node cut's ratio (integer
       capacities) and x0 a rank with the most egress. Arborescences T_i rooted at x0 that
       reach every rank, weighted w_i with Σ_{i: e∈T_i} w_i <= cap(e) on every link, show that
       every node set S holding x0 and missing some rank y has egress(S) >= W = Σ w_i (the
       path x0 → y of each T_i leaves S by a link of its own); in-arborescences into x0 show
       the same for every S without x0 that holds a rank. If both weights reach W with
       a·W >= b·(N−1), then a·egress(S) >= b·(N−1) >= b·|S ∩ R| for every S holding some but
       not all ranks: no S beats a/b, so every max-flow test of the plain search would pass and
       it returns the starting cut. (For S without x0 one max flow to x0 replaces the
       in-arborescences where they fall short: it is the plain search's own test for x0.) On
       a network whose servers hang on one link each behind a fabric that carries a server's
       rate, both packings are one breadth-first tree each.
    2. Symmetry. A rank's test at ratio r asks whether some S without it beats r. It has the
       same answer for every rank of its orbit under the automorphisms of the flow network
       (permutations of the nodes that keep the rank set and every link's integer capacity,
       hence the source's arcs), and a test that passes at r passes at every larger r. The
       automorphisms used are transpositions of twin ranks (same in- and out-neighbours at the
       same capacities; an automorphism by inspection) and maps that `_Symmetry` proposes by
       colour refinement and then checks link by link; the orbits are the connected
       components of the ranks joined to their images. The search keeps the plain order of
       tests and skips a test whose rank's orbit already passed at a ratio no larger than the
       current one: each skipped test would have passed, so the sequence of cuts, and the
       result, is the plain search's.
    """

    def __init__(self, topology: Topology, ranks: tuple[str, ...]) -> None:
        c = topology.compiled
        self.c = c
        self.n = c.num_nodes
        self.rank_idx = np.array([c.index[r] for r in ranks], dtype=np.int64)
        self.caps, self.exact = integer_capacities(c.capacity)
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
        self._graph_ratio: tuple[int, int] | None = None
        self._memo: tuple[tuple[int, int, int], object] | None = None
        self.out_cap = np.bincount(c.link_src, weights=self.caps, minlength=self.n).astype(np.int64)
        self.in_cap = np.bincount(c.link_dst, weights=self.caps, minlength=self.n).astype(np.int64)

    def ratio(self, inside: np.ndarray) -> tuple[int, int]:
        """(|S ∩ R|, integer egress capacity) of the node set given as a boolean mask."""
        cut = inside[self.c.link_src] & ~inside[self.c.link_dst]
        return int(inside[: self.n][self.rank_idx].sum()), int(self.caps[cut].sum())

    def set_ratio(self, a: int, b: int) -> None:
        """Capacities a·cap(e) on links and b on source arcs (test 'does S beat a/b?')."""
        if self._graph_ratio == (a, b):
            return
        data = np.empty(len(self.slot_of), dtype=np.int64)
        data[self.slot_of[: self.num_links]] = a * self.caps
        data[self.slot_of[self.num_links :]] = b
        self.graph.data = data.astype(np.int32)
        self._graph_ratio = (a, b)

    def passes(self, a: int, b: int, v: int) -> bool:
        """One max-flow test: no S without rank v beats a/b (the flow to v saturates)."""
        if self._memo is not None and self._memo[0] == (a, b, v):
            self._flow = self._memo[1]  # the certificate's test, asked again by the search
        else:
            self.set_ratio(a, b)
            self.maxflows += 1
            self._flow = maximum_flow(self.graph, self.n, v)
            self._memo = (a, b, v), self._flow
        return self._flow.flow_value >= b * len(self.rank_idx)

    def source_side(self, flow: sp.csr_array, start: int | None = None) -> np.ndarray:
        """Nodes reachable from the source (or from node `start`) in the residual graph of a
        max flow."""
        residual = (self.graph.astype(np.int64) - flow.astype(np.int64)).tocsr()
        residual.data = (residual.data > 0).astype(np.int8)
        residual.eliminate_zeros()
        origin = self.n if start is None else start
        reach = breadth_first_order(residual, origin, directed=True, return_predecessors=False)
        inside = np.zeros(self.n + 1, dtype=bool)
        inside[reach] = True
        inside[self.n] = False
        return inside

    def start(self) -> np.ndarray:
        """The best single-node cut: one rank alone, or everything but one rank.

        Candidates in the order {r0}, V∖{r0}, {r1}, ...; the first of the largest ratios wins.
        A rank alone has egress out_cap(r), all but r has egress in_cap(r) (no self-loops).
        """
        n_ranks = len(self.rank_idx)
        num = np.empty(2 * n_ranks, dtype=np.int64)
        den = np.empty(2 * n_ranks, dtype=np.int64)
        num[0::2], num[1::2] = 1, n_ranks - 1
        den[0::2], den[1::2] = self.out_cap[self.rank_idx], self.in_cap[self.rank_idx]
        ok = (num > 0) & (den > 0)
        value = np.full(2 * n_ranks, -1.0)
        value[ok] = num[ok].astype(np.float64) / den[ok].astype(np.float64)
        best = int(np.argmax(value))
        assert value[best] > 0
        v = int(self.rank_idx[best // 2])
        inside = np.arange(self.n + 1) == v if best % 2 == 0 else np.arange(self.n + 1) != v
        inside[self.n] = False
        return inside

    def test_ratio(self, a: int, b: int) -> tuple[int, int, float]:
        """The ratio the max flows test for a/b (reduced, denominators kept within int32 flows),
        and the relative tolerance that rounding costs."""
        n_ranks = len(self.rank_idx)
        g = math.gcd(a, b)
        ta, tb = a // g, b // g
        limit = _INT_LIMIT // (4 * n_ranks)
        if tb > limit:
            shrink = math.ceil(tb / limit)
            tb = max(1, tb // shrink)  # a slightly larger ratio: a test that may miss by ~1/limit
            return ta, tb, ta / tb / (a / b) - 1
        return ta, tb, 0.0

    def run(self, shortcuts: bool = True) -> tuple[np.ndarray, float]:
        """The maximising cut (as a mask) and the guaranteed relative tolerance."""
        best = self.start()
        a, b = self.ratio(best)
        n_ranks = len(self.rank_idx)
        if shortcuts and self.certified(a, b):
            return best[: self.n], self.test_ratio(a, b)[2]
        orbit = self.orbits() if shortcuts else np.arange(n_ranks)
        passed: list[tuple[int, int] | None] = [None] * (int(orbit.max()) + 1)
        tolerance = 0.0
        since, k = 0, 0
        while since < n_ranks:
            ta, tb, tol = self.test_ratio(a, b)
            tolerance = max(tolerance, tol)
            pos = k % n_ranks
            k += 1
            seen = passed[orbit[pos]]
            if seen is not None and ta * seen[1] >= seen[0] * tb:
                since += 1  # a twin passed at this ratio or a smaller one: so would this test
                continue
            if self.passes(ta, tb, int(self.rank_idx[pos])):
                passed[orbit[pos]] = (ta, tb)
            else:
                inside = self.source_side(self._flow.flow)
                na, nb = self.ratio(inside)
                if nb > 0 and na * b > a * nb:
                    best, a, b = inside, na, nb
                    since = 0
                    continue
            since += 1
        return best[: self.n], tolerance

    # ---- shortcuts (see the class doc) ---------------------------------------------------------

    def certified(self, a: int, b: int) -> bool:
        """True if no node set beats a/b, shown by arborescence packings at a rank x0."""
        n_ranks = len(self.rank_idx)
        need = -(-b * (n_ranks - 1) // a)  # the least integer W with a·W >= b·(N−1)
        x0 = int(self.rank_idx[np.argmax(self.out_cap[self.rank_idx])])
        c = self.c
        if not self._packs(c.link_src, c.link_dst, x0, need):
            return False
        if self._packs(c.link_dst, c.link_src, x0, need):
            return True
        ta, tb, _ = self.test_ratio(a, b)
        return self.passes(ta, tb, x0)

    def _packs(self, tail: np.ndarray, head: np.ndarray, root: int, need: int) -> bool:
        """Greedy: arborescences from `root` along tail → head links, each reaching every rank,
        of total weight >= need within the integer capacities (False if the greedy falls short).
        Each tree first tries only links that can carry all that is still needed."""
        n = self.n
        order = np.lexsort((head, tail))
        t, h = tail[order], head[order]
        key = t.astype(np.int64) * n + h
        residual = self.caps[order].copy()
        have = 0
        for _ in range(min(64, 2 * int((tail == root).sum()) + 2)):
            for least in (need - have, 1):
                use = residual >= least
                ptr = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(np.bincount(t[use], minlength=n), out=ptr[1:])
                g = sp.csr_array((np.ones(int(use.sum()), dtype=np.int8), h[use], ptr), shape=(n, n))
                _, pred = breadth_first_order(g, root, directed=True, return_predecessors=True)
                if (pred[self.rank_idx[self.rank_idx != root]] >= 0).all():
                    break
            else:
                return False
            needed = np.zeros(n, dtype=bool)  # the ranks and every node on their tree paths
            needed[self.rank_idx] = True
            needed[root] = False
            frontier = needed.copy()
            while frontier.any():
                up = pred[frontier]
                up = up[(up >= 0) & (up != root)]
                frontier = np.zeros(n, dtype=bool)
                frontier[up[~needed[up]]] = True
                needed |= frontier
            nodes = np.flatnonzero(needed)
            tree = np.searchsorted(key, pred[nodes].astype(np.int64) * n + nodes)
            w = min(int(residual[tree].min()), need - have)
            residual[tree] -= w
            have += w
            if have >= need:
                return True
        return False

    def twin_orbits(self) -> np.ndarray:
        """Per rank position, the id of its class of twins (ranks with the same out- and
        in-neighbours at the same integer capacities; twins are never linked to each other,
        since a rank is not its own neighbour). Ranks with more than 32 links stay alone."""
        c, n_ranks = self.c, len(self.rank_idx)
        pos_of = np.full(self.n, -1, dtype=np.int64)
        pos_of[self.rank_idx] = np.arange(n_ranks)
        degree = np.maximum(
            np.bincount(c.link_src, minlength=self.n), np.bincount(c.link_dst, minlength=self.n)
        )
        width = min(32, int(degree[self.rank_idx].max()))
        rows = np.full((n_ranks, 2 + 4 * width), -1, dtype=np.int64)
        for col, (mine, other) in enumerate(((c.link_src, c.link_dst), (c.link_dst, c.link_src))):
            at = pos_of[mine]
            sel = np.flatnonzero(at >= 0)
            sel = sel[np.lexsort((other[sel], at[sel]))]
            deg = np.bincount(at[sel], minlength=n_ranks)
            rows[:, col] = deg
            first = np.cumsum(deg) - deg
            slot = np.arange(len(sel)) - np.repeat(first, deg)
            keep = slot < width
            base = 2 + col * 2 * width + 2 * slot[keep]
            rows[at[sel][keep], base] = other[sel][keep]
            rows[at[sel][keep], base + 1] = self.caps[sel][keep]
        _, orbit = np.unique(rows, axis=0, return_inverse=True)
        orbit = orbit.ravel()
        wide = (rows[:, 0] > width) | (rows[:, 1] > width)
        orbit[wide] = orbit.max() + 1 + np.arange(int(wide.sum()))
        return orbit

    def orbits(self) -> np.ndarray:
        """Per rank position, its orbit under the group that twin transpositions and the
        automorphisms `_Symmetry` finds (and checks) generate: connected components of the
        graph joining every rank to its images."""
        n_ranks = len(self.rank_idx)
        twins = self.twin_orbits()
        first = np.full(int(twins.max()) + 1, -1, dtype=np.int64)
        first[twins[::-1]] = np.arange(n_ranks)[::-1]
        pairs = [np.stack([np.arange(n_ranks), first[twins]])]
        classes = int(twins.max()) + 1
        if classes >= _SYMMETRY_MIN_CLASSES:
            pairs += _Symmetry(self).generators(budget=max(16, classes // 4))
        edges = np.concatenate(pairs, axis=1)
        joined = sp.csr_array((np.ones(edges.shape[1]), (edges[0], edges[1])), shape=(n_ranks, n_ranks))
        return connected_components(joined, directed=False)[1]


# Looking for automorphisms costs colour refinements of the whole network, each about a few
# max flows' time: only where there are many classes of twins, and at most one refinement
# per 4 classes (16 at least), fewer than the max flows it may save.
_SYMMETRY_MIN_CLASSES = 48
_SYMMETRY_FAILURES = 4  # automorphism searches that may fail before the symmetry is left alone
_SYMMETRY_STEPS = 48  # individualisations per automorphism search


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-spread 64-bit hash of each value."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


class _Symmetry:
    """Automorphisms of a search's flow network, found by colour refinement with
    individualisation and each checked link by link before it is used.

    A candidate maps u to π(u); it is kept only if π is a permutation of the nodes that maps
    the ranks onto the ranks and every link onto a link of the same integer capacity, i.e. an
    automorphism of the flow network the max-flow tests run on (the source, tied to every
    rank by the same arc, stays fixed). Hashing only proposes candidates; nothing unchecked is
    trusted, and a failed search only costs max flows later.
    """

    def __init__(self, search: _CutSearch) -> None:
        c, n = search.c, search.n
        self.n, self.rank_idx = n, search.rank_idx
        cap_class = np.unique(search.caps, return_inverse=True)[1].ravel().astype(np.uint64)
        self.out = self._side(c.link_src, c.link_dst, cap_class)
        self.inn = self._side(c.link_dst, c.link_src, cap_class)
        key = c.link_src.astype(np.int64) * n + c.link_dst
        order = np.argsort(key)
        self.keys, self.key_caps = key[order], search.caps[order]
        self.src, self.dst, self.caps = c.link_src.astype(np.int64), c.link_dst.astype(np.int64), search.caps
        self.is_rank = np.zeros(n, dtype=bool)
        self.is_rank[search.rank_idx] = True
        self.rng = np.random.default_rng(0)  # seeded: the same generators, run after run
        self.refines = 0
        self.budget = 0

    def _side(self, mine: np.ndarray, other: np.ndarray, cap_class: np.ndarray):
        order = np.argsort(mine, kind="stable")
        counts = np.bincount(mine, minlength=self.n)
        starts = np.cumsum(counts) - counts
        busy = np.flatnonzero(counts)
        return other[order].astype(np.int64), cap_class[order], busy, starts[busy]

    def _sums(self, colour: np.ndarray, side) -> np.ndarray:
        other, cap_class, busy, starts = side
        with np.errstate(over="ignore"):
            h = _mix(colour[other] * np.uint64(1_000_003) + cap_class)
        out = np.zeros(self.n, dtype=np.uint64)
        if len(busy):
            out[busy] = np.add.reduceat(h, starts)
        return out

    def refine(self, colour: np.ndarray) -> np.ndarray:
        """The coarsest stable refinement; colours are hash values (uint64), so two colourings
        are compared by value and a colour means the same thing in both."""
        self.refines += 1
        count = len(np.unique(colour))
        while True:
            with np.errstate(over="ignore"):
                key = _mix(colour) ^ _mix(self._sums(colour, self.out))
                colour = key * np.uint64(3) + _mix(self._sums(colour, self.inn) ^ np.uint64(0x5BD1E995))
            now = len(np.unique(colour))
            if now == count:
                return colour
            count = now

    @staticmethod
    def _single(colour: np.ndarray, v: int) -> np.ndarray:
        out = colour.copy()
        out[v] = _mix(colour[v : v + 1] ^ np.uint64(0x2545F4914F6CDD1D))[0]
        return out

    def mapping(self, base: np.ndarray, u: int, v: int) -> np.ndarray | None:
        """A checked automorphism taking u to v, or None if the search finds none."""
        a, b = self.refine(self._single(base, u)), self.refine(self._single(base, v))
        for _ in range(_SYMMETRY_STEPS):
            if self.refines > self.budget:
                return None
            values, sizes = np.unique(a, return_counts=True)
            if not np.array_equal(np.sort(a), np.sort(b)):
                return None
            if sizes.max() == 1:
                perm = np.empty(self.n, dtype=np.int64)
                perm[np.argsort(a)] = np.argsort(b)
                return perm if self.is_automorphism(perm) else None
            cell = values[np.argmax(sizes > 1)]
            x = int(np.argmax(a == cell))
            y = int(self.rng.choice(np.flatnonzero(b == cell)))  # random images: few generators
            a, b = self.refine(self._single(a, x)), self.refine(self._single(b, y))
        return None

    def is_automorphism(self, perm: np.ndarray) -> bool:
        """perm maps ranks onto ranks and every link onto a link of the same capacity."""
        if not self.is_rank[perm[self.rank_idx]].all():
            return False
        mapped = perm[self.src] * self.n + perm[self.dst]
        at = np.minimum(np.searchsorted(self.keys, mapped), len(self.keys) - 1)
        return bool((self.keys[at] == mapped).all() and (self.key_caps[at] == self.caps).all())

    def generators(self, budget: int) -> list[np.ndarray]:
        """Pairs (rank position, position of its image) of the automorphisms found: within each
        colour class of ranks, maps from its first rank to ranks not yet in its orbit, with at
        most about `budget` colour refinements in all."""
        self.budget = budget
        n_ranks = len(self.rank_idx)
        pos_of = np.full(self.n, -1, dtype=np.int64)
        pos_of[self.rank_idx] = np.arange(n_ranks)
        base = self.refine(self.is_rank.astype(np.uint64))
        found: list[np.ndarray] = []
        joined = np.arange(n_ranks)  # orbit labels so far
        failures = 0
        classes = base[self.rank_idx]
        for cls in np.unique(classes):
            members = np.flatnonzero(classes == cls)
            tried: set[int] = set()
            while failures < _SYMMETRY_FAILURES and self.refines < self.budget:
                left = [int(m) for m in members if joined[m] != joined[members[0]] and int(m) not in tried]
                if not left:
                    break
                target = left[0]
                perm = self.mapping(base, int(self.rank_idx[members[0]]), int(self.rank_idx[target]))
                if perm is None:
                    failures += 1
                    tried.add(target)
                    continue
                pair = np.stack([np.arange(n_ranks), pos_of[perm[self.rank_idx]]])
                found.append(pair)
                edges = np.concatenate(found, axis=1)
                g = sp.csr_array((np.ones(edges.shape[1]), (edges[0], edges[1])), shape=(n_ranks, n_ranks))
                joined = connected_components(g, directed=False)[1]
        return found


_CACHE: weakref.WeakKeyDictionary[Topology, dict[tuple[str, ...], CutBound]] = weakref.WeakKeyDictionary()


def allgather_cut(
    topology: Topology, ranks: Sequence[str] | None = None, *, shortcuts: bool = True
) -> CutBound:
    """The binding cut of the AllGather bandwidth bound, with its value per byte of M.

    Cached per topology and rank tuple: simulators ask for it with every result.
    `shortcuts=False` runs the plain search (no certificate, no symmetry: one max flow per
    rank and round), uncached; it returns the same cut, value and tolerance, only slower.
    """
    rs = bound_ranks(topology, ranks)
    if not shortcuts:
        return _search_cut(topology, rs, shortcuts=False)
    per_topology = _CACHE.setdefault(topology, {})
    if rs not in per_topology:
        per_topology[rs] = _search_cut(topology, rs)
    return per_topology[rs]


def _search_cut(topology: Topology, rs: tuple[str, ...], shortcuts: bool = True) -> CutBound:
    search = _CutSearch(topology, rs)
    inside, tol = search.run(shortcuts)
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


# ---- a bound valid for every AllReduce ------------------------------------------------------------

_MAX_THRESHOLDS = 32  # link-capacity thresholds tried for the partitions of the count bound


@dataclass(frozen=True)
class ValidBound:
    """`allreduce_lower_bound` per byte of M, with its two parts and their witnesses.

    `cut_seconds_per_byte` = 1 / `cut_egress`, the least egress of a node set `cut` that holds
    some but not all ranks; `count_seconds_per_byte` = 2(p−1) / capacity, for the partition of
    the ranks into `parts` = p groups that gave the most (p = N: every rank alone).
    """

    seconds_per_byte: float
    cut_seconds_per_byte: float
    cut: tuple[str, ...] = field(repr=False)
    cut_egress: float
    count_seconds_per_byte: float
    parts: int
    exact: bool  # False if bandwidths had to be rounded: the cut may then miss the least egress
    maxflows: int


_VALID_CACHE: weakref.WeakKeyDictionary[Topology, dict[tuple[str, ...], ValidBound]] = (
    weakref.WeakKeyDictionary()
)


def allreduce_lower_cut(topology: Topology, ranks: Sequence[str] | None = None) -> ValidBound:
    """The parts of `allreduce_lower_bound` and the node sets that give them (cached)."""
    rs = bound_ranks(topology, ranks)
    per_topology = _VALID_CACHE.setdefault(topology, {})
    if rs not in per_topology:
        search = _CutSearch(topology, rs)
        inside = _least_rank_cut(search, topology.name)
        c = topology.compiled
        egress = float(c.capacity[inside[c.link_src] & ~inside[c.link_dst]].sum())
        count, parts = _count_bound(topology, search.rank_idx)
        per_topology[rs] = ValidBound(
            seconds_per_byte=max(1.0 / egress, count),
            cut_seconds_per_byte=1.0 / egress,
            cut=tuple(c.node_ids[i] for i in np.flatnonzero(inside)),
            cut_egress=egress,
            count_seconds_per_byte=count,
            parts=parts,
            exact=search.exact,
            maxflows=search.maxflows,
        )
    return per_topology[rs]


def allreduce_lower_bound(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1.0
) -> float:
    """Seconds that no AllReduce of `nbytes` per rank can beat, whatever the ranks' bandwidths.

    `allreduce_bound` (2·T*_AG) is ForestColl's bound for ReduceScatter + AllGather; another
    AllReduce can beat it where the ranks' bandwidths differ (a star of 6 servers, one at 1/10
    bandwidth: a valid schedule at 0.61× it). This bound holds for every schedule of arsched's
    model: transfers carry one chunk's buffer (a sum over a set of ranks' data) from rank to
    rank along a path, a link carries at most its capacity, and only ranks reduce. It is the
    larger of two parts, each proved below (M = `nbytes`, N ranks, cap(L) = Σ capacities).

    (a) Cut: T >= M / egress(S) for every node set S holding some but not all ranks. Proof: a
        rank outside S must end with a buffer that holds the data of a rank inside S, for every
        chunk; data moves only along transfer paths, so a chain of transfers leads from S to
        that rank, and one of them has a path with a link leaving S. Every chunk (M/C bytes)
        thus crosses egress(S) once or more: M bytes in all through capacity egress(S). Only
        the least egress matters. It is found exactly (up to rounded bandwidths) by max flows
        from a rank x0 to every other rank and back: an S holding x0 and missing rank v has
        egress >= the max flow x0 → v, an S missing x0 and holding v has egress >= the max flow
        v → x0, and the min cuts reach these values. Arborescence packings (the certificate
        of `allgather_cut`) show without any max flow that a single rank, or all but one,
        has the least egress, where that is so. (S = {r} and its complement give M/out(r) and
        M/in(r): the slow rank of the star above sends and receives the vector once.)
    (b) Count: T >= 2(p−1)·M / min(Σ_i egress(P_i), Σ_i ingress(P_i)) for disjoint node sets
        P_1..P_p, each holding a rank, that together hold every rank. Proof: every chunk's
        transfers form a one-way gossip among the ranks (each ends knowing every rank's item;
        a message carries at most what its sender knows, as a buffer is a sum of data the
        sender holds; transfers of one step read the step's start, so listing them one by one
        gives a sequential gossip with the same messages). Merge the ranks of each P_i into
        one party (transfers inside a part dropped; a part knows what any of its ranks knows):
        a gossip among p parties. It needs 2(p−1) messages (Harary & Schwenk 1974, "The
        communication problem on graphs and digraphs", J. Franklin Inst. 298: consider the
        first message after which some party w knows everything; every other party has sent
        a message before it, for w to know its item, and receives one after it, as no other
        party knew everything then: p−1 + p−1 distinct messages). Each message leaves its
        sender's part by a link of egress(P_i) and enters its receiver's by one of
        ingress(P_j): 2(p−1)·M bytes per side. With every rank alone (p = N) it is
        2(N−1)·M / min(Σ_r out(r), Σ_r in(r)), the classic bound where ranks are alike. The
        partitions tried: every rank alone, and the (weakly) connected groups of links at or
        above each capacity threshold (e.g. the GPU boxes of a cluster, joined by NVLink),
        each also grown by neighbouring nodes that are no rank where that lowers a part's
        ingress or egress (a GPU with its own NIC).

    The least cut over all partitions is not searched (a Steiner-tree-packing problem), so
    (b) may be below the best such bound; every value returned is a valid lower bound, as
    each is evaluated in floating point on the sets found.
    """
    return allreduce_lower_cut(topology, ranks).seconds_per_byte * nbytes


def _least_rank_cut(search: _CutSearch, name: str) -> np.ndarray:
    """A node mask S holding some but not all ranks with the least egress (integer capacities)."""
    c, ranks = search.c, search.rank_idx
    n_ranks = len(ranks)
    single = np.concatenate([search.out_cap[ranks], search.in_cap[ranks]])
    pick = int(np.argmin(single))
    best = int(single[pick])
    inside = np.arange(search.n + 1) == ranks[pick % n_ranks]
    if pick >= n_ranks:
        inside = ~inside
    inside[search.n] = False
    if best == 0:
        raise BoundError(f"some ranks of {name} cannot reach each other")
    x0 = int(ranks[np.argmax(search.out_cap[ranks])])
    if search._packs(c.link_src, c.link_dst, x0, best) and search._packs(c.link_dst, c.link_src, x0, best):
        return inside[: search.n]
    search.set_ratio(1, 0)  # the links at their capacities, no source arcs
    for v in ranks[ranks != x0]:
        for s, t in ((x0, int(v)), (int(v), x0)):
            search.maxflows += 1
            flow = maximum_flow(search.graph, s, t)
            if flow.flow_value < best:
                best = flow.flow_value
                inside = search.source_side(flow.flow, start=s)
                if best == 0:
                    raise BoundError(f"some ranks of {name} cannot reach each other")
    return inside[: search.n]


def _grown(c: CompiledTopology, part: np.ndarray, into: bool, rounds: int = 2) -> np.ndarray:
    """Each rank's part grown by nodes that are no rank where that lowers the part's ingress
    (`into`) or egress: a node u joins the part q with cap(u→q) + cap(q→u) > ingress(u) (for
    egress, > egress(u)), the largest such; two rounds. Parts stay disjoint."""
    tail, head = (c.link_src, c.link_dst) if into else (c.link_dst, c.link_src)
    n = c.num_nodes
    label = part.copy()
    n_parts = int(label.max()) + 1
    total = np.bincount(head, weights=c.capacity, minlength=n)  # ingress of each node alone
    for _ in range(rounds):
        free = label < 0
        sel = (free[tail] & (label[head] >= 0)) | (free[head] & (label[tail] >= 0))
        if not sel.any():
            break
        u = np.where(free[tail[sel]], tail[sel], head[sel])
        q = np.where(free[tail[sel]], label[head[sel]], label[tail[sel]])
        touch = sp.csr_array((c.capacity[sel], (u, q)), shape=(n, n_parts))
        best = touch.max(axis=1).toarray().ravel()
        arg = np.asarray(touch.argmax(axis=1)).ravel()
        join = free & (best > total)
        if not join.any():
            break
        label[join] = arg[join]
    return label


def _count_bound(topology: Topology, rank_idx: np.ndarray) -> tuple[float, int]:
    """max over the partitions tried of 2(p−1) / min(Σ egress, Σ ingress), and its p.

    Partitions: every rank alone, and the weakly connected groups of the links at or above each
    capacity threshold (groups without a rank are no part); each also grown by `_grown`."""
    c = topology.compiled
    values = np.unique(c.capacity)
    if len(values) > _MAX_THRESHOLDS:
        values = values[np.linspace(0, len(values) - 1, _MAX_THRESHOLDS).round().astype(np.int64)]
    alone = np.full(c.num_nodes, -1, dtype=np.int64)
    alone[rank_idx] = np.arange(len(rank_idx))
    bases = [alone]
    for theta in values[1:]:  # at the least capacity every link joins: no cut left
        keep = c.capacity >= theta
        g = sp.csr_array(
            (np.ones(int(keep.sum()), dtype=np.int8), (c.link_src[keep], c.link_dst[keep])),
            shape=(c.num_nodes, c.num_nodes),
        )
        group = connected_components(g, directed=True, connection="weak")[1]
        number = np.full(int(group.max()) + 1, -1, dtype=np.int64)
        held = np.unique(group[rank_idx])
        number[held] = np.arange(len(held))
        bases.append(number[group])
    best, best_p = 0.0, len(rank_idx)
    for base in bases:
        p = int(base.max()) + 1
        if p < 2:
            continue
        for label in (base, _grown(c, base, into=True), _grown(c, base, into=False)):
            src, dst = label[c.link_src], label[c.link_dst]
            crossing = src != dst
            out = float(c.capacity[crossing & (src >= 0)].sum())
            into = float(c.capacity[crossing & (dst >= 0)].sum())
            value = 2.0 * (p - 1) / min(out, into)
            if value > best:
                best, best_p = value, p
    return best, best_p


def rank_latencies(topology: Topology, ranks: Sequence[str]) -> np.ndarray:
    """(N, N) seconds of the fastest path's latency from rank i to rank j; a BoundError if
    some rank cannot reach another."""
    c = topology.compiled
    weights = np.maximum(c.latency, 1e-300)  # csgraph drops explicit zeros
    g = sp.csr_array((weights, (c.link_src, c.link_dst)), shape=(c.num_nodes, c.num_nodes))
    idx = [c.index[r] for r in ranks]
    dist = dijkstra(g, directed=True, indices=idx)[:, idx]
    if np.isinf(dist).any():
        raise BoundError(f"some ranks of {topology.name} cannot reach each other")
    return np.where(dist < 1e-200, 0.0, dist)


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
    rs = bound_ranks(topology, ranks)
    c = topology.compiled
    idx = [c.index[r] for r in rs]
    longest, shortest = _latency_range(topology, rs)
    bound = alpha + longest
    if port_model:
        k = int(np.bincount(c.link_dst, minlength=c.num_nodes)[idx].max())
        levels = math.ceil(math.log(len(rs)) / math.log(k + 1) - 1e-12)
        bound = max(bound, levels * (alpha + shortest))
    return bound


_LATENCY_CACHE: weakref.WeakKeyDictionary[Topology, dict[tuple[str, ...], tuple[float, float]]] = (
    weakref.WeakKeyDictionary()
)


def _latency_range(topology: Topology, ranks: tuple[str, ...]) -> tuple[float, float]:
    """The largest and the smallest fastest-path latency between two different ranks (cached
    per topology and ranks: every simulation asks for its bound)."""
    per_topology = _LATENCY_CACHE.setdefault(topology, {})
    if ranks not in per_topology:
        dist = rank_latencies(topology, ranks)
        off = ~np.eye(len(ranks), dtype=bool)
        per_topology[ranks] = (float(dist[off].max()), float(dist[off].min()))
    return per_topology[ranks]


def lower_bound(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1.0, alpha: float = 0.0
) -> float:
    """max(bandwidth bound, latency bound): no AllReduce of `nbytes` can finish sooner."""
    return max(allreduce_bound(topology, ranks, nbytes), latency_bound(topology, ranks, alpha))
