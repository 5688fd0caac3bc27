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
generation (`arborescences.generate`): the link duals y price the ordered rank pairs, the
balance duals π the roots, and an out-tree at r is worth adding when its price is below 1 − π_r,
an in-tree when below π_r; it stops within `TOLERANCE` of the cut bound's rate, when Edmonds
finds nothing (optimal), after `max_iterations` rounds or `time_limit` seconds.

A second LP gives up `DEPTH_SLACK` of the rate for shallower trees (Σ x·h², h a tree's height),
and each root's in-tree and out-tree rates are merged into pieces (in-tree, out-tree, rate):
the two cumulative distributions of the root's rate cut at both sets of break points.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from arsched.algorithms.packing.arborescences import TIME_LIMIT, Columns, PairLinks, generate
from arsched.algorithms.packing.lp import DEPTH_SLACK, MAX_ITERATIONS, TreeLP
from arsched.algorithms.trees import tree_depths, tree_heights
from arsched.bounds import allreduce_bound
from arsched.topology.core import Topology


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


def pack_directed(
    topology: Topology,
    ranks: tuple[str, ...],
    max_iterations: int = MAX_ITERATIONS,
    time_limit: float = TIME_LIMIT,
) -> DirectedPacking:
    """The directed packing over `ranks` (see the module docstring)."""
    start = time.monotonic()
    n = len(ranks)
    links = PairLinks(topology, ranks)
    scale = links.scale
    target = 1.0 / allreduce_bound(topology, ranks, 1.0) / scale
    lp = TreeLP(links.cap, equalities=n)
    cols = Columns(lp, links, gain=(0.0, 1.0), sign=(-1.0, 1.0))  # Σ out − Σ in = 0 at every root

    def rate(weights: np.ndarray) -> float:
        return weights[np.asarray(cols.kind) == 1].sum()

    iterations, exact = generate(
        cols, links, (1, 0), np.arange(n), rate, target, max_iterations, time_limit, start, "directed"
    )
    weights, _ = lp.solve()
    kind = np.asarray(cols.kind)
    optimum = float(weights[kind == 1].sum())
    height = cols.heights
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
