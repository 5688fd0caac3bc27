"""Tree packing for AllGather, ReduceScatter, Broadcast and Reduce: arborescences at the ranks
whose data moves, with rates a linear program chooses (ForestColl, Zhao et al., arXiv
2402.06787).

- AllGather: out-trees from every rank r, down which r's shard is copied to every rank. The
  shards are equal, so every root needs the same rate z:

      maximise z   s.t.   Σ_T x_T·use_T(e) ≤ cap(e) for every link e,
                          Σ_{trees at r} x_T = z for every rank r.

  ForestColl proves that such packings reach the cut bound (`bounds.allgather_cut`).
- ReduceScatter: the same with in-trees into every rank, up which r's shard is summed (every
  rank adds into its parent, children before parents): AllGather on the reversed network with
  the trees turned around, and its optimum reaches the reversed network's cut bound.
- Broadcast: out-trees from the root alone, maximise Σ x. Edmonds' branching theorem: the
  arborescences packed from a root reach the least max flow λ from it to any rank.
- Reduce: in-trees into the root, the same on the reversed network.

Trees are over the ranks, an arc the route between two ranks (spread over equal-cost paths),
so where only relaying through switches could reach λ or the cut the packing stays below it.
The column generation is `arborescences.generate`, bounded by `max_iterations` rounds and
`time_limit` seconds; a second LP gives up `DEPTH_SLACK` of the rate for shallower trees
(Σ x·h², h a tree's pipeline length), as AllReduce's packing does. Broadcast and Reduce give
up none (`ROOTED_SLACK`): their second LP finds shallow trees at the full rate (trees through
one or two hubs), and on the comparison networks the slack bought no shallower tree but cost
its share of the time (`benchmarks/bench_collectives.py`: 1.053 → 1.042 on a fat-tree,
1.229 → 1.206 on a ring).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from arsched.algorithms.packing.arborescences import EPS, TIME_LIMIT, Columns, PairLinks, generate
from arsched.algorithms.packing.lp import DEPTH_SLACK, DEPTHS, MAX_ITERATIONS, TreeLP, prim_parents
from arsched.algorithms.packing.rails import rail_trees
from arsched.algorithms.trees import tree_depths, tree_heights
from arsched.collective.kinds import ROOTED
from arsched.collective_bounds import bandwidth_bound
from arsched.topology.core import Topology

SHALLOW_ROUNDS = 30  # rounds of column generation for the second LP
ROOTED_SLACK = 1e-9  # Broadcast's and Reduce's slack: only the LP's round-off
ROOTED_DEPTHS = (*DEPTHS, 5, 6)  # their shallow LP's Prim height limits: 5, 6 take rate off deeper trees
KIND = {"allgather": 1, "broadcast": 1, "reduce_scatter": 0, "reduce": 0}  # 1 out-trees, 0 in-trees


@dataclass(frozen=True)
class Forest:
    """Arborescences of one `kind` over the ranks (1: out-trees a chunk is copied down; 0:
    in-trees it is summed up), sorted by root: tree i at rank `roots[i]` is the parent array
    `parents[i]` (−1 at the root) at `weights[i]` bytes/s. `rate` is every root's rate (its
    data of B bytes takes B / rate at best), `optimum` the first LP's before the slack was
    given up and `limit` the collective's bound's, which no packing exceeds; `iterations`
    rounds of column generation, `exact` of them with Edmonds, in `seconds`."""

    kind: int
    rate: float
    optimum: float
    limit: float
    roots: np.ndarray
    parents: list[np.ndarray]
    weights: np.ndarray
    iterations: int
    exact: int
    seconds: float

    @property
    def heights(self) -> np.ndarray:
        """Every tree's pipeline length: an out-tree's depth, an in-tree's height."""
        length = tree_depths if self.kind else tree_heights
        return np.array([length(p).max() for p in self.parents])


def pack_forest(
    topology: Topology,
    ranks: tuple[str, ...],
    collective: str,
    root: int | None = None,
    max_iterations: int = MAX_ITERATIONS,
    time_limit: float = TIME_LIMIT,
) -> Forest:
    """The packing of `collective` over `ranks` (see the module docstring); `root` is the
    rank index of Broadcast's and Reduce's root."""
    start = time.monotonic()
    n = len(ranks)
    kind = KIND[collective]
    links = PairLinks(topology, ranks)
    rooted = collective in ROOTED
    seconds = bandwidth_bound(topology, ranks, 1.0, collective, None if root is None else ranks[root])
    target = 1.0 / (seconds if rooted else seconds * n) / links.scale  # a root's data per second
    if rooted:
        lp = TreeLP(links.cap)
        cols = Columns(lp, links, gain=(1.0, 1.0))
        roots = np.array([root])
        for tree in rail_trees(topology, ranks, root):
            cols.add(kind, tree)
    else:
        lp = TreeLP(links.cap, equalities=n)
        lp.add(np.zeros(len(links.cap)), 1.0, np.arange(n), -1.0)  # z, every root's rate
        cols = Columns(lp, links, gain=(0.0, 0.0), sign=(1.0, 1.0))
        roots = np.arange(n)

    def rate(weights: np.ndarray) -> float:
        return float(weights.sum() if rooted else weights[0])

    iterations, exact = generate(
        cols, links, (kind,), roots, rate, target, max_iterations, time_limit, start, collective
    )
    optimum = rate(lp.solve()[0])
    cost = np.concatenate([np.zeros(cols.first), cols.heights.astype(np.float64) ** 2])
    counted = None if rooted else np.arange(lp.count) < cols.first
    weights = lp.shallowest(optimum * (1 - (ROOTED_SLACK if rooted else DEPTH_SLACK)), cost, counted)
    if rooted:  # sharded packings' trees are shallow already: more columns only made them worse
        weights = _shallower(cols, links, kind, roots, start + time_limit)
    weights = weights[cols.first :]
    keep = np.flatnonzero(weights > optimum * 1e-9)
    keep = keep[np.argsort(np.asarray(cols.root)[keep], kind="stable")]
    tree_roots = np.asarray(cols.root)[keep]
    per_root = np.bincount(tree_roots, weights=weights[keep], minlength=n)[roots]
    return Forest(
        kind=kind,
        rate=float(per_root.min()) * links.scale,
        optimum=optimum * links.scale,
        limit=target * links.scale,
        roots=tree_roots,
        parents=[cols.parent[i] for i in keep],
        weights=weights[keep] * links.scale,
        iterations=iterations,
        exact=exact,
        seconds=time.monotonic() - start,
    )


def _shallower(cols: Columns, links: PairLinks, kind: int, roots: np.ndarray, deadline: float) -> np.ndarray:
    """The second LP's column values after column generation of its own: hub trees (`_hubs`),
    two-hub trees (`_chains`) and depth-limited Prim trees (height h ≤ each of `ROOTED_DEPTHS`)
    under its link duals join when their reduced cost h² + price − the rate row's dual is
    negative, for at most `SHALLOW_ROUNDS` rounds or until the `deadline`. The first LP's
    optimal trees are often deep chains where shallow trees of the same rate exist (a
    star's Broadcast: the root to one rank, which copies to the rest), and only these
    prices find them."""
    lp = cols.lp
    weights, duals = lp.solve()
    for _ in range(SHALLOW_ROUNDS):
        if time.monotonic() > deadline:
            break
        price = links.dense(links.use @ -duals[: len(links.cap)])
        worth = duals[len(links.cap) :]  # the rate row's dual
        p = price if kind else price.T
        added = 0
        found = [f(p, r) for r in roots.tolist() for f in (_hubs, _chains)]
        found += [prim_parents(np.where(links.off, p, np.inf), roots, limit) for limit in ROOTED_DEPTHS]
        for trees, heights in found:
            for tree, h in zip(trees, heights, strict=True):
                kids = np.flatnonzero(tree >= 0)
                reduced = h * h + p[tree[kids], kids].sum() - worth[0]
                if reduced < -EPS:
                    added += cols.add(kind, tree, float(h * h), 0)
        if not added:
            break
        weights, duals = lp.solve()
    return weights


def _hubs(price: np.ndarray, root: int) -> tuple[np.ndarray, list[int]]:
    """The trees of height ≤ 2 from `root` through one hub: for every other rank v, the arc
    root → v and every other rank below whichever of the root and v it is cheaper to attach to
    under arc prices (rows: hubs), with their heights. Prim's greedy first arc misses the hub
    whose own links are cheap, where the shallow optimum of a rooted packing often lies."""
    n = len(price)
    hubs = np.delete(np.arange(n), root)
    parent = np.where(price[hubs] < price[root], hubs[:, None], root)
    rows = np.arange(len(hubs))
    parent[rows, hubs] = root
    parent[:, root] = -1
    heights = np.where((parent == hubs[:, None]).any(axis=1), 2, 1)
    return parent, heights.tolist()


def _chains(price: np.ndarray, root: int) -> tuple[np.ndarray, list[int]]:
    """The trees of height ≤ 3 from `root` through a chain of two hubs, root → a → b: every
    other rank below whichever of the root, a and b it is cheapest to attach to under arc prices
    (zero on the diagonal); for every first hub a, the second hub b of the cheapest such tree
    (rows: first hubs), with their heights. A GPU box's Broadcast needs them: the root to a GPU
    of its box, that GPU over its NIC to the same rail's GPU in the other box, which copies to
    its box (`benchmarks/bench_collectives.py`: two A100 boxes 1.287 → 1.215× the bound)."""
    n = len(price)
    hubs = np.delete(np.arange(n), root)
    if n < 3:
        return np.zeros((0, n), dtype=np.int64), []
    parent = np.empty((len(hubs), n), dtype=np.int64)
    second = np.empty(len(hubs), dtype=np.int64)
    for i, a in enumerate(hubs.tolist()):
        near = np.minimum(price[root], price[a])  # below the root or a
        seconds = np.delete(hubs, i)
        total = price[a, seconds] + np.minimum(near, price[seconds]).sum(axis=1)
        b = second[i] = int(seconds[np.argmin(total)])
        three = np.stack([price[root], price[a], price[b]])
        parent[i] = np.array([root, a, b])[np.argmin(three, axis=0)]
        parent[i, a], parent[i, b] = root, a
    parent[:, root] = -1
    heights = np.where((parent == second[:, None]).any(axis=1), 3, 2)
    return parent, heights.tolist()
