"""Column generation over arborescences: in-trees into and out-trees from chosen roots, priced
by the link duals of a `lp.TreeLP`, what every directed packing shares (AllReduce's in
`directed`, the other collectives' in `forest`).

A tree over the ranks is a parent array; an out-tree's arc parent → child and an in-tree's arc
child → parent stand for the route between the two ranks (`arsched.algorithms.routes`, spread
over equal-cost paths), so a tree loads the links of its arcs' routes. The link duals y price
the ordered rank pairs, and a tree of kind k (0 in, 1 out) at root r is worth adding when its
price is below its column's objective gain less the dual of its root's equality row (if the LP
has one per root). The pricing problem is a minimum-cost arborescence (Edmonds); cheap oracles
go first: shortest-path arborescences (Dijkstra from or to every root) and depth-limited
directed Prim trees (`lp.prim_parents`), and Edmonds (`_edmonds`, compiled) only in rounds where
they find nothing. `generate` stops when the rate is within `TOLERANCE` of the target (a bound
no packing exceeds), when Edmonds finds nothing (the LP is optimal), or after `max_iterations`
rounds or `time_limit` seconds (feasible, perhaps below the optimum).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from arsched.algorithms.packing.lp import DEPTHS, TOLERANCE, TreeLP, positive_prices, prim_parents
from arsched.algorithms.routes import all_pairs
from arsched.algorithms.trees import tree_depths, tree_heights
from arsched.topology.core import Topology

log = logging.getLogger(__name__)

TIME_LIMIT = 20.0  # seconds of column generation before the packing found so far is taken
EPS = 1e-9  # reduced cost a column must gain to be added


class PairLinks:
    """The links of every ordered rank pair's route: `use` (pairs × the links any route
    crosses), their capacities `cap` divided by `scale` (the largest) for the LP, `pos[u, v]`
    the pair u → v's row, and `hops` the routes' hop counts as an (n × n) price matrix."""

    def __init__(self, topology: Topology, ranks: tuple[str, ...]) -> None:
        self.n = len(ranks)
        routes = all_pairs(topology, ranks)
        self.pos = routes.positions(self.n)
        full = routes.link_matrix(topology.compiled.num_links)
        used_links = np.flatnonzero(np.asarray(full.sum(axis=0)).ravel() > 0)
        self.use = full[:, used_links].tocsr()
        cap = topology.compiled.capacity[used_links]
        self.scale = float(cap.max())
        self.cap = cap / self.scale
        self.off = ~np.eye(self.n, dtype=bool)
        self.hops = self.dense(routes.hops.astype(np.float64))

    def dense(self, pair_price: np.ndarray) -> np.ndarray:
        """Pair prices as an (n × n) matrix of strictly positive arc prices."""
        out = np.zeros((self.n, self.n))
        out[self.off] = positive_prices(pair_price)[self.pos[self.off]]
        return out


class Columns:
    """The trees found so far (kind 0 in-trees, 1 out-trees), in the LP as they arrive: a tree
    of kind k is worth `gain[k]` in the objective and, where `sign` is given, `sign[k]` in its
    root's equality row. `first` is the LP column of the first tree (columns added before are
    the caller's)."""

    def __init__(
        self,
        lp: TreeLP,
        links: PairLinks,
        gain: tuple[float, float],
        sign: tuple[float, float] | None = None,
    ) -> None:
        self.lp, self.use, self.pos = lp, links.use, links.pos
        self.gain, self.sign = gain, sign
        self.first = lp.count
        self.kind: list[int] = []
        self.root: list[int] = []
        self.parent: list[np.ndarray] = []
        self.known: set[bytes] = set()

    def arcs(self, kind: int, parent: np.ndarray) -> np.ndarray:
        """The pair positions of a tree's arcs: child → parent in an in-tree, else parent → child."""
        kids = np.flatnonzero(parent >= 0)
        return self.pos[kids, parent[kids]] if kind == 0 else self.pos[parent[kids], kids]

    def add(self, kind: int, parent: np.ndarray, gain: float | None = None, row: int | None = None) -> bool:
        """Add a tree unless it is known (True if added); `gain` replaces its kind's, and with
        `row` (an index past the equality rows: a later LP's rate row) it counts 1 there
        instead of in its root's equality row."""
        key = bytes([kind]) + parent.tobytes()
        if key in self.known:
            return False
        self.known.add(key)
        root = int(np.flatnonzero(parent < 0)[0])
        use = np.asarray(self.use[self.arcs(kind, parent)].sum(axis=0)).ravel()
        gain = self.gain[kind] if gain is None else gain
        if row is not None:
            self.lp.add(use, gain, row, 1.0)
        elif self.sign is None:
            self.lp.add(use, gain)
        else:
            self.lp.add(use, gain, root, self.sign[kind])
        self.kind.append(kind)
        self.root.append(root)
        self.parent.append(parent)
        return True

    def worth(self, pi: np.ndarray) -> np.ndarray:
        """(2 × n): what a tree of each kind at each root pays off below, given the equality
        rows' duals `pi`."""
        if self.sign is None:
            return np.repeat(np.asarray(self.gain, dtype=np.float64)[:, None], len(self.pos), axis=1)
        return np.stack([self.gain[k] - self.sign[k] * pi for k in (0, 1)])

    @property
    def heights(self) -> np.ndarray:
        """Every tree's pipeline length: an in-tree's height, an out-tree's depth."""
        return np.array(
            [
                tree_heights(p).max() if k == 0 else tree_depths(p).max()
                for k, p in zip(self.kind, self.parent, strict=True)
            ]
        )


def generate(
    cols: Columns,
    links: PairLinks,
    kinds: tuple[int, ...],
    roots: np.ndarray,
    rate: Callable[[np.ndarray], float],
    target: float,
    max_iterations: int,
    time_limit: float,
    start: float,
    label: str,
) -> tuple[int, int]:
    """Column generation (see the module docstring) over trees of `kinds` at `roots`, until
    `rate`(column values) is within `TOLERANCE` of `target`; (rounds, rounds with Edmonds).
    `start` is the `time.monotonic()` the time limit counts from; `label` names the packing in
    the log."""
    n = links.n

    def cheap(price: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Shortest-path and depth-limited Prim arborescences from or to every root."""
        found = []
        for kind in kinds:
            p = price if kind else price.T
            found += [(kind, t) for t in _spt(p, roots)]
            for limit in (*DEPTHS, n):
                found += [(kind, t) for t in prim_parents(np.where(links.off, p, np.inf), roots, limit)[0]]
        return found

    for kind, tree in cheap(links.hops):
        cols.add(kind, tree)
    iterations = exact = 0
    while iterations < max_iterations:
        iterations += 1
        weights, duals = cols.lp.solve()
        if rate(weights) >= target * (1 - TOLERANCE):
            break
        if time.monotonic() - start > time_limit:
            log.info("tree-packing: %s column generation stopped after %.1f s", label, time_limit)
            break
        price = links.dense(links.use @ duals[: len(links.cap)])
        worth = cols.worth(duals[len(links.cap) :])
        if sum(cols.add(k, t) for k, t in cheap(price) if _gain(k, t, price, worth) > EPS):
            continue
        exact += 1
        added = 0
        for kind, r in itertools.product(kinds, roots.tolist()):
            if time.monotonic() - start > time_limit:
                break
            tree = _edmonds(price if kind else price.T, r)
            if _gain(kind, tree, price, worth) > EPS:
                added += cols.add(kind, tree)
        if not added:
            break  # the exact oracle found nothing: the LP is optimal
    return iterations, exact


def _spt(price: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """The shortest-path out-arborescences from `roots` under arc prices (rows: roots).
    Sparse input: scipy reads a dense matrix's entries below 1e-8 as missing arcs."""
    u, v = np.nonzero(~np.eye(len(price), dtype=bool))
    graph = sp.csr_array((price[u, v], (u, v)), shape=price.shape)
    _, pred = dijkstra(graph, directed=True, indices=roots, return_predecessors=True)
    return np.where(pred < 0, -1, pred)


@numba.njit(cache=True)
def _edmonds(price: np.ndarray, root: int) -> np.ndarray:  # pragma: no cover - compiled
    """The parent array of a minimum-cost out-arborescence from `root` under finite arc prices
    (`price[u, v]` for u → v, every pair: the routes join all ranks). Chu-Liu/Edmonds on the
    dense matrix, O(n³): every node takes its cheapest in-arc; a cycle among them is contracted
    into a new node (an arc into it costs what it saves over the cycle arc it replaces, an arc
    out of it the cheapest from its members), until none is left; then the contractions are
    undone, latest first. Ties go to the lowest node index. Compiled: networkx's
    `minimum_spanning_arborescence` took 140 ms per call on 30 ranks, most of a 20-second
    AllGather packing on DCell(5,1)."""
    n = len(price)
    size = 2 * n  # every contraction adds a node and takes away at least two
    cost = np.full((size, size), np.inf)
    cost[:n, :n] = price
    for v in range(n):
        cost[v, v] = np.inf
        cost[v, root] = np.inf
    alive = np.zeros(size, dtype=np.bool_)
    alive[:n] = True
    par = np.full(size, -1)
    enter = np.full((size, size), -1)  # for a contracted node c: the member an arc u → c enters
    leave = np.full((size, size), -1)  # ... and the member an arc c → v leaves
    members = np.full((size, size), False)
    cycle_par = np.full((size, size), -1)  # ... and its members' cycle arcs
    top = n
    mark = np.full(size, -1)
    while True:
        for v in range(top):  # every live node's cheapest in-arc
            if not alive[v] or v == root:
                continue
            best, at = np.inf, -1
            for u in range(top):
                if alive[u] and cost[u, v] < best:
                    best, at = cost[u, v], u
            par[v] = at
        cycle = -1  # a node on a cycle of in-arcs, if any
        mark[:top] = -1
        for s in range(top):
            if not alive[s] or mark[s] >= 0:
                continue
            v = s
            while v != root and mark[v] < 0:
                mark[v] = s
                v = par[v]
            if v != root and mark[v] == s:
                cycle = v
                break
        if cycle < 0:
            break
        c = top
        top += 1
        v = cycle
        while True:
            members[c, v] = True
            cycle_par[c, v] = par[v]
            v = par[v]
            if v == cycle:
                break
        for u in range(c):  # arcs into and out of the new node
            if not alive[u] or members[c, u]:
                continue
            for v in range(c):
                if members[c, v]:
                    into = cost[u, v] - cost[par[v], v]
                    if into < cost[u, c]:
                        cost[u, c], enter[c, u] = into, v
                    if cost[v, u] < cost[c, u]:
                        cost[c, u], leave[c, u] = cost[v, u], v
        for v in range(c):
            if members[c, v]:
                alive[v] = False
        alive[c] = True
    for c in range(top - 1, n - 1, -1):  # undo the contractions, latest first
        for y in range(top):
            if alive[y] and par[y] == c:
                par[y] = leave[c, y]
        x = par[c]
        for v in range(c):
            if members[c, v]:
                alive[v] = True
                par[v] = cycle_par[c, v]
        par[enter[c, x]] = x
        alive[c] = False
    parent = par[:n].copy()
    parent[root] = -1
    return parent


def _gain(kind: int, parent: np.ndarray, price: np.ndarray, worth: np.ndarray) -> float:
    """A tree's reduced cost: what its root's rate is worth (`worth[kind, root]`) less the
    price of its arcs."""
    kids = np.flatnonzero(parent >= 0)
    cost = price[kids, parent[kids]].sum() if kind == 0 else price[parent[kids], kids].sum()
    return float(worth[kind, int(np.flatnonzero(parent < 0)[0])] - cost)
