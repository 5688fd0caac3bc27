"""The tree-packing LP: spanning trees over the ranks and their rates, as high as the links'
capacities allow (ForestColl, Zhao et al., arXiv 2402.06787, proves that a packing of spanning
trees attains the AllReduce cut bound).

A tree edge {u, v} is the route u→v plus the route v→u (`arsched.algorithms.routes`, spread
over equal-cost paths): a tree reduces its share of the vector up to a root and broadcasts it
back down the same edges, so every edge is crossed once each way and a tree's link usage does
not depend on its root. The LP

    maximise Σ_T x_T   s.t.   Σ_T x_T·use_T(e) ≤ cap(e) for every link e

(M bytes then take M / Σ x_T) is solved by column generation in HiGHS (primal simplex,
warm-started as columns arrive). The link duals price the rank pairs, and `TreeOracles` propose
trees under those prices: the minimum spanning tree (the exact pricing problem), jittered
variants, and depth-limited Prim trees from the cheapest centres. Where column generation
stalls (large networks), `multiplicative_weights` (Garg & Könemann 2007) supply a near-optimal
set of trees at once. `pack` stops once the rate is within `TOLERANCE` of the cut bound's,
which no packing exceeds.

Many packings reach the optimum and they differ in depth, which a pipeline pays for, so a
second LP gives up `DEPTH_SLACK` of the rate to minimise Σ x_T·(2h_T − 1)² (the squared
pipeline length), over a pool that adds depth-limited Prim trees from every rank; every tree is
then hung from its centre (`arsched.algorithms.trees.hang`).

How the rounds and the time scale with the ranks: benchmarks/bench_packing_scale.py
(docs/results.md, "Tree packing at scale").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from arsched.algorithms.routes import all_pairs
from arsched.algorithms.trees import hang
from arsched.bounds import allreduce_bound
from arsched.errors import ArschedError
from arsched.topology.core import Topology

MAX_ITERATIONS = 200
VARIANTS = 4  # jittered spanning trees and Prim centres priced per iteration
DEPTHS = (1, 2, 3, 4)  # height limits of the shallow-tree oracle
DEPTH_SLACK = 0.005  # share of the optimum given up for shallower trees
MWU_AFTER = 20  # column generation rounds before multiplicative weights step in
MWU_EPSILON = 0.3  # price step of multiplicative weights
TOLERANCE = 0.002  # stop when the rate is this close to the cut bound's


@dataclass(frozen=True)
class Packing:
    """Spanning trees over the ranks with rates that fit every link's capacity.

    `rate` is Σ x_T in bytes/s (an AllReduce of M bytes per rank takes M / rate at best);
    `optimum` is the first LP's rate before `DEPTH_SLACK` was given up and `limit` the cut
    bound's rate, which no packing exceeds. Tree i is `pairs[i]`
    (indices into the upper-triangle rank pairs), `parents[i]` hung from its centre, of height
    `heights[i]`, with rate `weights[i]`.
    """

    rate: float
    optimum: float
    limit: float
    pairs: list[np.ndarray]
    parents: list[np.ndarray]
    heights: np.ndarray
    weights: np.ndarray
    iterations: int


def pair_usage(topology: Topology, ranks: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, sp.csr_array]:
    """Every unordered rank pair (u < v) and its links (the spread route u→v plus v→u, see
    `arsched.algorithms.routes`) as a sparse (pairs × links) count matrix."""
    n = len(ranks)
    iu, iv = np.triu_indices(n, 1)
    routes = all_pairs(topology, ranks)
    pair, use = routes.positions(n), routes.link_matrix(topology.compiled.num_links)
    return iu, iv, use[pair[iu, iv]] + use[pair[iv, iu]]


def positive_prices(price: np.ndarray) -> np.ndarray:
    """Prices made strictly positive: a zero weight would vanish from a sparse graph."""
    return np.maximum(price, 0) + 1e-9 * price.max() + 1e-12


class QuietHighs(highspy.Highs):
    """A HiGHS solver that prints nothing: `highspy.Highs()` prints HiGHS's banner when it sets
    up its callbacks, before any option can be set, so the output goes off just before."""

    def enableCallbacks(self) -> None:
        self.setOptionValue("output_flag", False)
        super().enableCallbacks()


class TreeOracles:
    """Propose spanning trees that are cheap under pair prices: the minimum spanning tree (the
    exact pricing problem) and jittered variants, and depth-limited Prim trees (stars at depth 1)."""

    def __init__(self, n: int, iu: np.ndarray, iv: np.ndarray, seed: int) -> None:
        self.n, self.iu, self.iv = n, iu, iv
        self.index = np.zeros((n, n), dtype=np.int64)
        self.index[iu, iv] = self.index[iv, iu] = np.arange(len(iu))
        self.rng = np.random.default_rng(seed)

    def _of_edges(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.sort(self.index[a, b])

    def propose(self, price: np.ndarray) -> list[tuple[np.ndarray, int | None]]:
        """Candidate trees under pair prices, each with its height where the oracle knows it."""
        out: list[tuple[np.ndarray, int | None]] = []
        for variant in range(VARIANTS):
            w = price * (1 + 0.5 * self.rng.random(len(price))) if variant else price
            out.append((self.spanning(w), None))
        dense = self._dense(price)
        centres = np.argsort(dense.sum(axis=1), kind="stable")[:VARIANTS]
        for limit in DEPTHS:
            out.extend(self._prims(dense, centres, limit))
        return out

    def spanning(self, price: np.ndarray) -> np.ndarray:
        """The minimum spanning tree under pair prices (the exact pricing oracle)."""
        n, iu, iv = self.n, self.iu, self.iv
        t = minimum_spanning_tree(sp.csr_array((positive_prices(price), (iu, iv)), shape=(n, n))).tocoo()
        return self._of_edges(t.row, t.col)

    def prims(
        self, price: np.ndarray, roots: np.ndarray, depths: Sequence[int] = DEPTHS
    ) -> list[tuple[np.ndarray, int]]:
        """The Prim trees from every root for every depth limit in `depths`, with their depths."""
        dense = self._dense(price)
        return [tree for limit in depths for tree in self._prims(dense, np.asarray(roots), limit)]

    def _dense(self, price: np.ndarray) -> np.ndarray:
        dense = np.zeros((self.n, self.n))
        dense[self.iu, self.iv] = dense[self.iv, self.iu] = positive_prices(price)
        return dense

    def _prims(self, dense: np.ndarray, roots: np.ndarray, limit: int) -> list[tuple[np.ndarray, int]]:
        parent, tall = prim_parents(dense, roots, limit)
        kids = [np.flatnonzero(p >= 0) for p in parent]
        return [(self._of_edges(p[k], k), h) for p, k, h in zip(parent, kids, tall, strict=True)]


def prim_parents(dense: np.ndarray, roots: np.ndarray, limit: int) -> tuple[np.ndarray, list[int]]:
    """Prim's algorithm from each root at once (one row per root), attaching only to nodes
    above depth `limit`: cheap trees of height at most `limit` (stars for 1), as (roots × n)
    parent arrays and their heights. `dense[u, v]` is the cost of attaching v below u, so an
    asymmetric matrix grows out-arborescences (its transpose in-arborescences)."""
    n, rows = dense.shape[0], np.arange(len(roots))
    free = np.ones((len(roots), n), dtype=bool)
    free[rows, roots] = False
    depth = np.zeros((len(roots), n), dtype=np.int64)
    best = dense[roots].copy()
    via = np.repeat(roots[:, None], n, axis=1)
    parent = np.full((len(roots), n), -1)
    for _ in range(n - 1):
        v = np.argmin(np.where(free, best, np.inf), axis=1)
        free[rows, v] = False
        parent[rows, v] = via[rows, v]
        depth[rows, v] = depth[rows, parent[rows, v]] + 1
        grow = rows[depth[rows, v] < limit]
        cand = dense[v[grow]]
        better = cand < best[grow]
        best[grow] = np.where(better, cand, best[grow])
        via[grow] = np.where(better, v[grow][:, None], via[grow])
    return parent, depth.max(axis=1).tolist()


class TreeLP:
    """The packing LP over the trees found so far, in HiGHS, warm-started as columns arrive:
    a row per link (usage ≤ capacity) and `equalities` rows that must sum to zero (the
    directed packing's balance of every root's in-trees and out-trees)."""

    def __init__(self, caps: np.ndarray, equalities: int = 0) -> None:
        self.lp = QuietHighs()
        self.lp.setOptionValue("presolve", "off")  # presolve would discard the warm start
        self.lp.setOptionValue("simplex_strategy", 4)  # primal: new columns keep the basis feasible
        none = np.zeros(0, dtype=np.int32)
        self.lp.addRows(len(caps), np.full(len(caps), -highspy.kHighsInf), caps, 0, none, none, np.zeros(0))
        if equalities:
            zero = np.zeros(equalities)
            self.lp.addRows(equalities, zero, zero, 0, none, none, np.zeros(0))
        self.links = len(caps)
        self.lp.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.count = 0

    def add(
        self, use: np.ndarray, gain: float = 1.0, equality: int | np.ndarray | None = None, sign: float = 1.0
    ) -> None:
        """A column loading the links by `use`, worth `gain` in the objective, and `sign` in
        equality row `equality` (or in each of an array of rows) if given."""
        rows = np.flatnonzero(use).astype(np.int32)
        values = use[rows]
        if equality is not None:
            rows = np.append(rows, (self.links + np.asarray(equality)).astype(np.int32))
            values = np.append(values, np.full(np.shape(equality), sign))
        inf, start = np.full(1, highspy.kHighsInf), np.zeros(1, dtype=np.int32)
        self.lp.addCols(1, np.full(1, gain), np.zeros(1), inf, len(rows), start, rows, values)
        self.count += 1

    def solve(self) -> tuple[np.ndarray, np.ndarray]:
        """(column values, row duals) of the optimum."""
        self.lp.run()
        status = self.lp.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise ArschedError(f"tree-packing: the LP failed ({self.lp.modelStatusToString(status)})")
        sol = self.lp.getSolution()
        return np.asarray(sol.col_value), np.asarray(sol.row_dual)

    def shallowest(self, rate: float, depth: np.ndarray, counted: np.ndarray | None = None) -> np.ndarray:
        """Column values that keep the rate (the sum of the `counted` columns, by default all)
        ≥ `rate` and minimise Σ x·depth (the second LP)."""
        cols = np.arange(self.count, dtype=np.int32)
        self.lp.changeColsCost(self.count, cols, depth.astype(np.float64))
        self.lp.changeObjectiveSense(highspy.ObjSense.kMinimize)
        rated = cols if counted is None else cols[counted]
        self.lp.addRow(rate, highspy.kHighsInf, len(rated), rated, np.ones(len(rated)))
        return self.solve()[0]


def _pipeline_cost(height: np.ndarray) -> np.ndarray:
    """The second LP's cost of a tree of this height: its pipeline length 2h − 1, squared, so
    that rate moves off the deepest trees, whose fill and drain end the schedule."""
    return (2 * np.asarray(height) - 1) ** 2


def multiplicative_weights(
    sub: sp.csr_array, caps: np.ndarray, oracles: TreeOracles, eps: float = MWU_EPSILON
) -> list[np.ndarray]:
    """Trees of a near-optimal packing by multiplicative weights (Garg & Könemann): route a
    bottleneck's worth of rate on the minimum spanning tree under link prices, raise the price
    of every link it uses by a factor of up to 1 + eps, until the prices sum to one. Thousands of
    fast minimum-spanning-tree calls instead of LP solves, for networks where column generation
    stalls."""
    by_link = sub.T.tocsr()
    m = len(caps)
    delta = (1 + eps) * ((1 + eps) * m) ** (-1 / eps)
    price = delta / caps
    trees: list[np.ndarray] = []
    while (caps * price).sum() < 1:
        tree = oracles.spanning(sub @ price)
        chosen = np.zeros(sub.shape[0])
        chosen[tree] = 1
        use = by_link @ chosen
        on = use > 0
        rate = (caps[on] / use[on]).min()
        price[on] *= 1 + eps * rate * use[on] / caps[on]
        trees.append(tree)
    return trees


def pack(
    topology: Topology, ranks: tuple[str, ...], max_iterations: int = MAX_ITERATIONS, seed: int = 0
) -> Packing:
    """A fractional packing of spanning trees over `ranks` (see the module docstring), with
    `seed` for the jittered tree prices.

    The dual prices y ≥ 0 of the links make a tree worth adding exactly when its price
    Σ use_T·y is below 1. Column generation stops when the rate is within `TOLERANCE` of the
    cut bound's (which no packing can exceed, so the packing is then proven near-optimal), when
    no oracle finds a tree worth adding (the minimum spanning tree is the exact oracle, so the
    LP is optimal), or after `max_iterations` rounds (feasible, perhaps below the optimum).
    """
    n = len(ranks)
    iu, iv, usage = pair_usage(topology, ranks)
    cap = topology.compiled.capacity
    scale = cap.max()
    used_links = np.flatnonzero(np.asarray(usage.sum(axis=0)).ravel() > 0)
    sub = usage[:, used_links].tocsr()
    target = 1.0 / allreduce_bound(topology, ranks, 1.0) / scale
    lp_caps = cap[used_links] / scale
    lp = TreeLP(lp_caps)
    oracles = TreeOracles(n, iu, iv, seed)
    columns: list[np.ndarray] = []
    heights: list[int | None] = []
    uses: list[np.ndarray] = []
    known: set[bytes] = set()

    def add(tree: np.ndarray, height: int | None) -> bool:
        if tree.tobytes() in known:
            return False
        known.add(tree.tobytes())
        uses.append(np.asarray(sub[tree].sum(axis=0)).ravel())
        lp.add(uses[-1])
        columns.append(tree)
        heights.append(height)
        return True

    def shallow_pool(price: np.ndarray) -> None:
        for tree, height in oracles.prims(price, np.arange(n)):
            add(tree, height)

    hops = np.asarray(usage.sum(axis=1)).ravel().astype(np.float64)
    shallow_pool(hops)  # short, shallow trees from every rank to start from
    for tree, height in oracles.propose(hops):
        add(tree, height)
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        weights, duals = lp.solve()
        if weights.sum() >= target * (1 - TOLERANCE):
            break
        if iterations == MWU_AFTER and sum(
            add(t, None) for t in multiplicative_weights(sub, lp_caps, oracles)
        ):
            continue  # column generation is slow here: multiplicative weights find the trees
        price = sub @ duals  # link prices y ≥ 0, summed per pair
        if not sum(add(t, h) for t, h in oracles.propose(price) if price[t].sum() < 1 - 1e-9):
            break
    weights, duals = lp.solve()
    optimum = float(weights.sum())
    shallow_pool(sub @ duals)  # more shallow trees for the second LP
    height = np.array(
        [hang((iu[t], iv[t]), n)[1] if h is None else h for t, h in zip(columns, heights, strict=True)]
    )
    weights = lp.shallowest(optimum * (1 - DEPTH_SLACK), _pipeline_cost(height))
    keep = np.flatnonzero(weights > 1e-9 * optimum)
    hung = [hang((iu[columns[i]], iv[columns[i]]), n) for i in keep]
    return Packing(
        rate=float(weights[keep].sum()) * scale,
        optimum=optimum * scale,
        limit=target * scale,
        pairs=[columns[i] for i in keep],
        parents=[p for p, _ in hung],
        heights=np.array([h for _, h in hung]),
        weights=weights[keep] * scale,
        iterations=iterations,
    )
