"""Directed tree packing: for networks whose links are not all paired with a reverse link of the
same bandwidth (one-way rings and tori, asymmetric bandwidths).

The undirected packing (`lp`) sends a chunk up and back down the same tree, crossing every tree
edge both ways, so a one-way link (or the slow direction of an asymmetric pair) limits it. Here a
chunk rooted at r is reduced up an *in-tree* (an in-arborescence into r: every rank adds into its
parent over the route child → parent) and broadcast down an *out-tree* (an out-arborescence from
r: routes parent → child), not necessarily mirror images (ForestColl builds out-trees for the
AllGather and reversed in-trees for the ReduceScatter on any digraph). The LP

    maximise Σ_out x   s.t.   Σ_T x_T·use_T(e) ≤ cap(e) for every link e,
                              Σ_{out-trees at r} x = Σ_{in-trees at r} x for every root r

has a variable per tree found so far; the undirected trees are the special case of an in-tree
and the reversed out-tree, so its optimum is at least the undirected packing's. Column
generation in HiGHS (`lp.TreeLP`): the link duals y price the ordered rank pairs (the route
u → v's links, spread over equal-cost paths), the balance duals π the roots, and an out-tree at r
is worth adding when its price is below 1 − π_r, an in-tree when below π_r. The pricing problem
is a minimum-cost arborescence (Edmonds); cheap oracles go first: shortest-path arborescences
(Dijkstra from and to every root) and depth-limited directed Prim trees (`lp.prim_parents`),
and Edmonds (networkx) only in rounds where they find nothing. Column generation stops within
`TOLERANCE` of the cut bound's rate, when Edmonds finds nothing (optimal), after
`max_iterations` rounds or `time_limit` seconds (feasible, perhaps below the optimum).

A second LP gives up `DEPTH_SLACK` of the rate for shallower trees (Σ x·h², h a tree's height),
and each root's in-tree and out-tree rates are merged into pieces (in-tree, out-tree, rate):
the two cumulative distributions of the root's rate cut at both sets of break points.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from arsched.algorithms.packing.lp import (
    DEPTH_SLACK,
    DEPTHS,
    MAX_ITERATIONS,
    TOLERANCE,
    TreeLP,
    positive_prices,
    prim_parents,
)
from arsched.algorithms.routes import all_pairs
from arsched.algorithms.trees import tree_depths, tree_heights
from arsched.bounds import allreduce_bound
from arsched.topology.core import Topology

log = logging.getLogger(__name__)

TIME_LIMIT = 20.0  # seconds of column generation before the packing found so far is taken
EPS = 1e-9  # reduced cost a column must gain to be added


def symmetric(topology: Topology) -> bool:
    """True when every link has a reverse link of the same bandwidth (full-duplex cables), the
    networks the undirected packing is made for."""
    c = topology.compiled
    n = c.num_nodes
    key = c.link_src.astype(np.int64) * n + c.link_dst
    back = c.link_dst.astype(np.int64) * n + c.link_src
    order = np.argsort(key)
    at = np.searchsorted(key[order], back)
    found = at < len(key)
    at = order[np.minimum(at, len(key) - 1)]
    return bool((found & (key[at] == back) & (c.capacity[at] == c.capacity)).all())


@dataclass(frozen=True)
class DirectedPacking:
    """Pieces (in-tree, out-tree, rate) over the ranks: piece i reduces into `roots[i]` up the
    in-tree `ins[i]` (a parent array: every rank's parent towards the root, −1 at the root)
    and broadcasts down the out-tree `outs[i]` (every rank's parent from the root) at
    `weights[i]` bytes/s. `rate` is their sum (an AllReduce of M bytes takes M / rate at best),
    `optimum` the first LP's rate before `DEPTH_SLACK` was given up, `limit` the cut bound's
    rate; `iterations` rounds of column generation, `exact` of them with Edmonds, in `seconds`."""

    rate: float
    optimum: float
    limit: float
    roots: np.ndarray
    ins: list[np.ndarray]
    outs: list[np.ndarray]
    weights: np.ndarray
    iterations: int
    exact: int
    seconds: float

    @property
    def heights(self) -> np.ndarray:
        """Every piece's pipeline span: its in-tree's height plus its out-tree's depth."""
        return np.array(
            [tree_heights(i).max() + tree_depths(o).max() for i, o in zip(self.ins, self.outs, strict=True)]
        )


class _Columns:
    """The trees found so far (kind 0 in-trees, 1 out-trees), in the LP as they arrive."""

    def __init__(self, lp: TreeLP, use: np.ndarray, pos: np.ndarray) -> None:
        self.lp, self.use, self.pos = lp, use, pos
        self.kind: list[int] = []
        self.root: list[int] = []
        self.parent: list[np.ndarray] = []
        self.known: set[bytes] = set()

    def arcs(self, kind: int, parent: np.ndarray) -> np.ndarray:
        """The pair positions of a tree's arcs: child → parent in an in-tree, else parent → child."""
        kids = np.flatnonzero(parent >= 0)
        return self.pos[kids, parent[kids]] if kind == 0 else self.pos[parent[kids], kids]

    def add(self, kind: int, parent: np.ndarray) -> bool:
        key = bytes([kind]) + parent.tobytes()
        if key in self.known:
            return False
        self.known.add(key)
        root = int(np.flatnonzero(parent < 0)[0])
        use = np.asarray(self.use[self.arcs(kind, parent)].sum(axis=0)).ravel()
        self.lp.add(use, float(kind), root, 1.0 if kind else -1.0)  # Σ out − Σ in = 0 at the root
        self.kind.append(kind)
        self.root.append(root)
        self.parent.append(parent)
        return True


def _spt(price: np.ndarray) -> np.ndarray:
    """The shortest-path out-arborescences from every root under arc prices (rows: roots).
    Sparse input: scipy reads a dense matrix's entries below 1e-8 as missing arcs."""
    u, v = np.nonzero(~np.eye(len(price), dtype=bool))
    graph = sp.csr_array((price[u, v], (u, v)), shape=price.shape)
    _, pred = dijkstra(graph, directed=True, return_predecessors=True)
    return np.where(pred < 0, -1, pred)


def _edmonds(price: np.ndarray, root: int) -> np.ndarray | None:
    """The minimum-cost out-arborescence from `root` under arc prices (Edmonds, networkx)."""
    n = len(price)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    u, v = np.nonzero(~np.eye(n, dtype=bool))
    keep = v != root
    g.add_weighted_edges_from(
        zip(u[keep].tolist(), v[keep].tolist(), price[u[keep], v[keep]].tolist(), strict=True)
    )
    try:
        tree = nx.algorithms.tree.branchings.minimum_spanning_arborescence(g)
    except nx.NetworkXException:
        return None
    parent = np.full(n, -1)
    for a, b in tree.edges():
        parent[b] = a
    return parent


def _gain(kind: int, parent: np.ndarray, price: np.ndarray, worth: np.ndarray) -> float:
    """A tree's reduced cost: what its root's rate is worth (`worth[kind, root]`) less the
    price of its arcs."""
    kids = np.flatnonzero(parent >= 0)
    cost = price[kids, parent[kids]].sum() if kind == 0 else price[parent[kids], kids].sum()
    return float(worth[kind, int(np.flatnonzero(parent < 0)[0])] - cost)


def pack_directed(
    topology: Topology,
    ranks: tuple[str, ...],
    max_iterations: int = MAX_ITERATIONS,
    time_limit: float = TIME_LIMIT,
) -> DirectedPacking:
    """The directed packing over `ranks` (see the module docstring)."""
    start = time.monotonic()
    n = len(ranks)
    routes = all_pairs(topology, ranks)
    pos = routes.positions(n)
    full = routes.link_matrix(topology.compiled.num_links)
    used_links = np.flatnonzero(np.asarray(full.sum(axis=0)).ravel() > 0)
    use = full[:, used_links].tocsr()
    cap = topology.compiled.capacity[used_links]
    scale = float(cap.max())
    target = 1.0 / allreduce_bound(topology, ranks, 1.0) / scale
    lp = TreeLP(cap / scale, equalities=n)
    cols = _Columns(lp, use, pos)
    off = ~np.eye(n, dtype=bool)
    roots = np.arange(n)

    def dense(pair_price: np.ndarray) -> np.ndarray:
        out = np.zeros((n, n))
        out[off] = positive_prices(pair_price)[pos[off]]
        return out

    def cheap(price: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Shortest-path and depth-limited Prim arborescences from and to every root."""
        found = []
        for kind, p in ((1, price), (0, price.T)):
            found += [(kind, t) for t in _spt(p)]
            for limit in (*DEPTHS, n):
                found += [(kind, t) for t in prim_parents(np.where(off, p, np.inf), roots, limit)[0]]
        return found

    hops = dense(routes.hops.astype(np.float64))
    for kind, tree in cheap(hops):
        cols.add(kind, tree)
    iterations = exact = 0
    while iterations < max_iterations:
        iterations += 1
        weights, duals = lp.solve()
        if weights[np.asarray(cols.kind) == 1].sum() >= target * (1 - TOLERANCE):
            break
        if time.monotonic() - start > time_limit:
            log.info("tree-packing: directed column generation stopped after %.1f s", time_limit)
            break
        price = dense(use @ duals[: len(cap)])
        pi = duals[len(cap) :]
        worth = np.stack([pi, 1 - pi])  # an in-tree (out-tree) at r pays off below worth[0 (1), r]
        if sum(cols.add(k, t) for k, t in cheap(price) if _gain(k, t, price, worth) > EPS):
            continue
        exact += 1
        added = 0
        for kind, r in itertools.product((1, 0), range(n)):
            if time.monotonic() - start > time_limit:
                break
            tree = _edmonds(price if kind else price.T, r)
            if tree is not None and _gain(kind, tree, price, worth) > EPS:
                added += cols.add(kind, tree)
        if not added:
            break  # the exact oracle found nothing: the LP is optimal
    weights, _ = lp.solve()
    kind = np.asarray(cols.kind)
    optimum = float(weights[kind == 1].sum())
    height = np.array(
        [
            tree_heights(p).max() if k == 0 else tree_depths(p).max()
            for k, p in zip(kind, cols.parent, strict=True)
        ]
    )
    weights = lp.shallowest(optimum * (1 - DEPTH_SLACK), height.astype(np.float64) ** 2, kind == 1)
    pieces = _pieces(kind, np.asarray(cols.root), weights, optimum * 1e-9)
    return DirectedPacking(
        rate=float(sum(w for _, _, w in pieces)) * scale,
        optimum=optimum * scale,
        limit=target * scale,
        roots=np.array([cols.root[i] for i, _, _ in pieces]),
        ins=[cols.parent[i] for i, _, _ in pieces],
        outs=[cols.parent[o] for _, o, _ in pieces],
        weights=np.array([w for _, _, w in pieces]) * scale,
        iterations=iterations,
        exact=exact,
        seconds=time.monotonic() - start,
    )


def _pieces(
    kind: np.ndarray, root: np.ndarray, weights: np.ndarray, tiny: float
) -> list[tuple[int, int, float]]:
    """(in column, out column, rate) pieces: at every root the in-trees' and the out-trees'
    cumulative rates, cut at the break points of both."""
    pieces = []
    for r in np.unique(root).tolist():
        ins = np.flatnonzero((kind == 0) & (root == r) & (weights > tiny))
        outs = np.flatnonzero((kind == 1) & (root == r) & (weights > tiny))
        if not len(ins) or not len(outs):
            continue
        ci, co = np.cumsum(weights[ins]), np.cumsum(weights[outs])
        total = min(ci[-1], co[-1])
        cuts = np.unique(np.concatenate([[0.0], ci, co]))
        cuts = np.append(cuts[cuts < total], total)
        for lo, hi in itertools.pairwise(cuts):
            if hi - lo > tiny:
                mid = (lo + hi) / 2
                i = ins[min(int(np.searchsorted(ci, mid)), len(ins) - 1)]
                o = outs[min(int(np.searchsorted(co, mid)), len(outs) - 1)]
                pieces.append((int(i), int(o), float(hi - lo)))
    return pieces
