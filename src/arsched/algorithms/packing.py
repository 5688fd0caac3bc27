"""Tree packing: AllReduce over spanning trees weighted by a linear program (after ForestColl,
arXiv 2402.06787, which proves that packing spanning trees attains the cut bound).

Every rank r owns 1/N of the vector; its share is reduced up trees rooted at r (the reverse
direction) and broadcast back down the same trees. A tree edge {u, v} is the routed path
u→v plus v→u, so a tree's link usage is symmetric and the cheapest tree under link prices is
a minimum spanning tree (the same undirected tree serves every root). The LP

    maximise λ  s.t.  Σ_k x_{r,k} = λ for every root r,   Σ_{r,k} x_{r,k}·use_k(e) ≤ cap(e)

is solved by column generation with HiGHS (scipy.optimize.linprog): the link duals price the
paths, scipy's minimum spanning tree prices a new tree, and roots whose dual exceeds its price
get it as a column. The weights are then turned into chunks: each root's share is cut into
`pieces` chunks, given to its trees in proportion to their weight (largest remainder), each
reduced and broadcast on its tree with the steps of a pipelined tree.

Status (measured in docs/results.md): the LP reaches the bound within 1 % on DCell(3,1),
DCell(4,1) and Jellyfish after 60 column-generation rounds, but converges slowly on BCube and
tori (one priced tree per variant per round), and the chunk realisation does not stream: all
chunks start together, so the tree levels load the links unevenly and simulated gaps are
2–3× in the default flow model; with in-order connections (`simulate_flow(fifo=True)`, as a
runtime's channels behave) the chunks stream and gaps fall to 1.1–1.2 where the LP converged.
Column generation over all rank pairs is slow: limited to 64 ranks for now.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from arsched.algorithms.common import check_ranks, check_size
from arsched.algorithms.dbtree import add_tree, tree_heights
from arsched.algorithms.registry import NotApplicable, register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology

MAX_ITERATIONS = 30
MAX_RANKS = 64
VARIANTS = 6  # trees priced per iteration: the minimum spanning tree and jittered variants


def pair_usage(topology: Topology, ranks: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, sp.csr_array]:
    """Every unordered rank pair (u < v) and its links (u→v path plus v→u path) as a sparse
    (pairs × links) count matrix."""
    n = len(ranks)
    iu, iv = np.triu_indices(n, 1)
    pairs = [(ranks[a], ranks[b]) for a, b in zip(iu, iv, strict=True)]
    c = topology.compiled
    paths = topology.router.paths(pairs + [(b, a) for a, b in pairs])
    rows, cols = [], []
    for k, p in enumerate(paths):
        links = c.path_links(p)
        rows.append(np.full(len(links), k % len(pairs)))
        cols.append(links)
    r, col = np.concatenate(rows), np.concatenate(cols)
    usage = sp.csr_array((np.ones(len(r)), (r, col)), shape=(len(pairs), c.num_links))
    return iu, iv, usage


def _orient(n: int, iu: np.ndarray, iv: np.ndarray, chosen: np.ndarray, root: int) -> np.ndarray:
    """Parent array of the spanning tree made of the chosen pairs, hung from `root`."""
    g = sp.csr_array((np.ones(len(chosen)), (iu[chosen], iv[chosen])), shape=(n, n))
    _, pred = breadth_first_order(g, root, directed=False, return_predecessors=True)
    parent = np.where(pred < 0, -1, pred)
    parent[root] = -1
    return parent


def pack(
    topology: Topology, ranks: tuple[str, ...], max_iterations: int = MAX_ITERATIONS, seed: int = 0
) -> tuple[float, list[tuple[int, np.ndarray, float]]]:
    """(λ, [(root, tree pairs, weight)]): the LP's throughput per root (bytes/s of each root's
    share) and the weighted trees, as indices into the unordered pair list."""
    n = len(ranks)
    iu, iv, usage = pair_usage(topology, ranks)
    cap = topology.compiled.capacity
    scale = cap.max()
    used_links = np.flatnonzero(np.asarray(usage.sum(axis=0)).ravel() > 0)
    sub = usage[:, used_links].tocsr()
    caps = cap[used_links] / scale
    hops = np.asarray(usage.sum(axis=1)).ravel()

    def mst(weight: np.ndarray) -> np.ndarray:
        w = sp.csr_array((weight + 1e-9 * weight.max() + 1e-12, (iu, iv)), shape=(n, n))
        t = minimum_spanning_tree(w).tocoo()
        lookup = {(a, b): k for k, (a, b) in enumerate(zip(iu.tolist(), iv.tolist(), strict=True))}
        return np.array(
            [lookup[(min(a, b), max(a, b))] for a, b in zip(t.row.tolist(), t.col.tolist(), strict=True)]
        )

    rng = np.random.default_rng(seed)
    columns: list[tuple[int, np.ndarray]] = []
    first = mst(hops.astype(np.float64))
    columns += [(r, first) for r in range(n)]
    lam, weights = 0.0, np.zeros(0)
    for _ in range(max_iterations):
        k = len(columns)
        pick = sp.csr_array(
            (
                np.ones(sum(len(t) for _, t in columns)),
                (
                    np.repeat(np.arange(k), [len(t) for _, t in columns]),
                    np.concatenate([t for _, t in columns]),
                ),
            ),
            shape=(k, sub.shape[0]),
        )
        use = (pick @ sub).T  # links × columns
        roots = np.array([r for r, _ in columns])
        # variables: x_0..x_{k-1}, λ ; minimise −λ
        cost = np.zeros(k + 1)
        cost[-1] = -1.0
        a_ub = sp.hstack([sp.csr_array(use), sp.csr_array((len(used_links), 1))]).tocsr()
        a_eq = sp.hstack(
            [sp.csr_array((np.ones(k), (roots, np.arange(k))), shape=(n, k)), sp.csr_array(-np.ones((n, 1)))]
        ).tocsr()
        res = linprog(
            cost, A_ub=a_ub, b_ub=caps, A_eq=a_eq, b_eq=np.zeros(n), bounds=(0, None), method="highs"
        )
        if res.status != 0:
            raise ArschedError(f"tree-packing: the LP failed ({res.message})")
        lam, weights = -res.fun, res.x[:k]
        price = -res.ineqlin.marginals  # ≥ 0, per used link
        root_dual = res.eqlin.marginals
        pair_price = sub @ price
        known = {(r, t.tobytes()) for r, t in columns}
        new = []
        # the cheapest tree, and cheap variants under jittered prices, for diversity
        for variant in range(VARIANTS):
            jitter = 1 + 0.5 * rng.random(len(pair_price)) if variant else 1.0
            tree = mst(pair_price * jitter)
            tree_price = pair_price[tree].sum()
            better = np.flatnonzero(root_dual > tree_price * (1 + 1e-9) + 1e-12)
            for r in better.tolist():
                if (r, tree.tobytes()) not in known:
                    known.add((r, tree.tobytes()))
                    new.append((r, tree))
        if not new:
            break
        columns += new
    trees = [
        (r, t, float(w))
        for (r, t), w in zip(columns[: len(weights)], weights, strict=True)
        if w > 1e-12 * max(lam, 1e-300)
    ]
    return lam * scale, trees


@register("tree-packing", "spanning trees weighted by an LP (column generation): bandwidth-optimal packing")
def tree_packing(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    pieces: int = 16,
    iterations: int = MAX_ITERATIONS,
    seed: int = 0,
) -> Schedule:
    """Tree packing; `pieces` chunks per rank's share (more follow the LP weights closer),
    at most `iterations` rounds of column generation, `seed` for the jittered tree prices."""
    rs = check_ranks(topology, ranks, "tree-packing")
    nbytes = check_size(nbytes, "tree-packing")
    if not (isinstance(pieces, (int, np.integer)) and pieces >= 1):
        raise ArschedError(f"tree-packing: pieces must be a positive integer, got {pieces!r}")
    n = len(rs)
    if n > MAX_RANKS:
        raise NotApplicable(
            f"tree-packing is limited to {MAX_RANKS} ranks for now: its column generation is too slow beyond"
        )
    lam, trees = pack(topology, rs, iterations, seed)
    iu, iv = np.triu_indices(n, 1)
    b = ScheduleBuilder(
        topology,
        rs,
        nbytes,
        n * pieces,
        "tree-packing",
        {"params": {"pieces": pieces}, "lp_rate_per_root": lam, "trees": len(trees)},
    )
    members = np.arange(n)
    for r in range(n):
        mine = [(t, w) for root, t, w in trees if root == r]
        share = np.array([w for _, w in mine])
        quota = share / share.sum() * pieces
        count = np.floor(quota).astype(np.int64)
        for j in np.argsort(-(quota - count), kind="stable")[: pieces - count.sum()]:
            count[j] += 1
        chunk = r * pieces
        for (t, _), c in zip(mine, count, strict=True):
            if c == 0:
                continue
            parent = _orient(n, iu, iv, t, r)
            add_tree(b, members, parent, tree_heights(parent), np.arange(chunk, chunk + c))
            chunk += c
    return b.build()
