"""Tree packing: AllReduce over spanning trees weighted by a linear program (after ForestColl,
arXiv 2402.06787, which proves that packing spanning trees attains the cut bound).

Every rank r owns 1/N of the vector; its share is reduced up trees rooted at r and broadcast
back down the same trees. A tree edge {u, v} is the routed path u→v plus v→u, so a tree's
link usage does not depend on its root, and the cheapest tree under link prices is a minimum
spanning tree. The LP

    maximise Σ_T x_T   s.t.   Σ_T x_T·use_T(e) ≤ cap(e) for every link e

is solved by column generation with HiGHS (highspy, warm-started as columns arrive): the link duals price the
rank pairs, scipy's minimum spanning tree (and jittered variants, seeded) proposes new trees,
until no tree costs less than 1. Every root then gets 1/N of the total tree rate (the trees are
dealt out in turn), cut into `pieces` chunks per root (largest remainder), each reduced and
broadcast on its tree with the steps of a pipelined tree; a tree's chunks enter the pipeline
spread evenly over `pieces` steps, so that all trees stream until the end, each in proportion
to its weight.

Status (docs/results.md): the LP reaches the bound on the ≤ 32-rank networks of the comparison
table in under half a second, but converges slowly beyond (64 ranks is the limit for now). The
chunks stream only when connections carry their steps in order (`simulate_flow(fifo=True)`, as
a runtime's channels do): then gaps are about 1.1–1.2 with 32 pieces (1.06–1.14 with 64);
sent all at once (the default flow model) they share links until all finish and gaps are
2–3×. Closing the last 10 % and faster column generation are the next work.
"""

from __future__ import annotations

from collections.abc import Sequence

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from arsched.algorithms.common import check_ranks, check_size
from arsched.algorithms.dbtree import add_tree, tree_heights
from arsched.algorithms.registry import NotApplicable, register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology

MAX_ITERATIONS = 100
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
) -> tuple[float, list[tuple[np.ndarray, float]]]:
    """(total tree rate X, [(tree pairs, rate)]): a fractional packing of spanning trees.

    A tree's link usage does not depend on its root, so roots need not be told apart: maximise
    Σ x_T subject to Σ x_T·use_T(e) ≤ cap(e); every root then gets X/N of tree rate. The dual
    prices y ≥ 0 of the links make a tree worth adding exactly when its price Σ use_T·y is
    below 1; the cheapest tree is a minimum spanning tree under the pair prices.
    """
    n = len(ranks)
    iu, iv, usage = pair_usage(topology, ranks)
    cap = topology.compiled.capacity
    scale = cap.max()
    used_links = np.flatnonzero(np.asarray(usage.sum(axis=0)).ravel() > 0)
    sub = usage[:, used_links].tocsr()
    caps = cap[used_links] / scale
    lookup = {(a, b): k for k, (a, b) in enumerate(zip(iu.tolist(), iv.tolist(), strict=True))}

    def mst(weight: np.ndarray) -> np.ndarray:
        w = sp.csr_array((weight + 1e-9 * weight.max() + 1e-12, (iu, iv)), shape=(n, n))
        tree = minimum_spanning_tree(w).tocoo()
        return np.sort(
            [
                lookup[(min(a, b), max(a, b))]
                for a, b in zip(tree.row.tolist(), tree.col.tolist(), strict=True)
            ]
        )

    rng = np.random.default_rng(seed)
    lp = highspy.Highs()
    lp.setOptionValue("output_flag", False)
    lp.setOptionValue("presolve", "off")  # presolve would discard the warm start
    none = np.zeros(0, dtype=np.int32)
    lp.addRows(len(caps), np.full(len(caps), -highspy.kHighsInf), caps, 0, none, none, np.zeros(0))
    lp.changeObjectiveSense(highspy.ObjSense.kMaximize)
    columns: list[np.ndarray] = []

    def add(tree: np.ndarray) -> None:
        use = np.asarray(sub[tree].sum(axis=0)).ravel()
        rows = np.flatnonzero(use).astype(np.int32)
        lp.addCols(
            1,
            np.ones(1),
            np.zeros(1),
            np.full(1, highspy.kHighsInf),
            len(rows),
            np.zeros(1, dtype=np.int32),
            rows,
            use[rows],
        )
        columns.append(tree)

    add(mst(np.asarray(usage.sum(axis=1)).ravel().astype(np.float64)))  # fewest hops
    known = {columns[0].tobytes()}
    for _ in range(max_iterations):
        lp.run()  # warm-started from the previous basis: a few simplex steps per new column
        if lp.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise ArschedError(f"tree-packing: the LP failed ({lp.modelStatusToString(lp.getModelStatus())})")
        pair_price = sub @ np.asarray(lp.getSolution().row_dual)  # link prices y ≥ 0, per pair
        new = 0
        for variant in range(VARIANTS):  # the cheapest tree, and jittered variants for diversity
            tree = mst(pair_price * (1 + 0.5 * rng.random(len(pair_price)) if variant else pair_price))
            if pair_price[tree].sum() < 1 - 1e-9 and tree.tobytes() not in known:
                known.add(tree.tobytes())
                add(tree)
                new += 1
        if not new:
            break
    else:
        lp.run()
    weights = np.asarray(lp.getSolution().col_value)
    trees = [(t, float(w)) for t, w in zip(columns, weights, strict=True) if w > 1e-12]
    return float(weights.sum()) * scale, trees


def _split(trees: list[tuple[np.ndarray, float]], n: int, pieces: int) -> list[list[tuple[np.ndarray, int]]]:
    """Pieces per (root, tree): the trees' total rate is dealt out to the roots in turn, each
    root taking 1/N of it (a tree may be shared by two roots), then rounded to `pieces` chunks
    per root by largest remainder."""
    total = sum(w for _, w in trees)
    share = total / n
    out: list[list[tuple[np.ndarray, int]]] = []
    k, left = 0, trees[0][1]
    for _ in range(n):
        need, mine = share, []
        while need > 1e-12 * total and k < len(trees):
            take = min(need, left)
            mine.append((trees[k][0], take))
            need -= take
            left -= take
            if left <= 1e-12 * total:
                k += 1
                left = trees[k][1] if k < len(trees) else 0.0
        quota = np.array([w for _, w in mine]) / share * pieces
        count = np.floor(quota).astype(np.int64)
        for j in np.argsort(-(quota - count), kind="stable")[: pieces - count.sum()]:
            count[j] += 1
        out.append([(t, int(c)) for (t, _), c in zip(mine, count, strict=True) if c])
    return out


@register("tree-packing", "spanning trees weighted by an LP (column generation): bandwidth-optimal packing")
def tree_packing(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    pieces: int = 32,
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
    rate, trees = pack(topology, rs, iterations, seed)
    iu, iv = np.triu_indices(n, 1)
    b = ScheduleBuilder(
        topology,
        rs,
        nbytes,
        n * pieces,
        "tree-packing",
        {
            "params": {"pieces": pieces, "iterations": iterations},
            "seed": seed,
            "lp_rate_per_root": rate / n,
            "trees": len(trees),
        },
    )
    members = np.arange(n)
    for r, mine in enumerate(_split(trees, n, pieces)):
        chunk = r * pieces
        for t, c in mine:
            parent = _orient(n, iu, iv, t, r)
            # spread the tree's chunks evenly over the common pipeline of `pieces` steps, so
            # that every tree streams until the end in proportion to its weight
            offsets = np.arange(c) * pieces // c
            add_tree(b, members, parent, tree_heights(parent), np.arange(chunk, chunk + c), offsets)
            chunk += c
    return b.build()
