"""Level-balanced tree steps: tree packing without a pipeline, for direct-connect networks
(torus, ring, mesh, hypercube: ranks joined by their own links, no switches in between).

A pipelined tree (packing.py) pays for fill and drain: in its first steps only the leaf edges
have work and in its last only the edges into the leaves. Here each chunk crosses its tree once:
a node adds into its parent at a step σ ∈ 1..R after all its children did, and the sum comes back
down the same edge at the mirrored step 2R + 1 − σ. Trees and their steps are chosen together,
so that every link carries the same load in every step, as a ring's rotations do. The
time-indexed LP (loads in units of the vector, times in units of 1/capacity)

    minimise Σ_s t_s   s.t.   Σ_c x_c·use_c(e, s) ≤ cap(e)·t_s  for every link e and step s,
                              Σ_c x_c = 1

over columns c = (tree, step of every edge) is solved by column generation in HiGHS. The duals
price every (link, step), and two oracles propose columns: the packing's trees hung from every
rank, each with the cheapest steps a dynamic program finds (`cheapest_steps`), and Prim trees
grown from the root down, every node attached to the parent and step (before the parent's)
that cost least (`_Steps.prim`). At its optimum Σ_s t_s meets the bandwidth bound on the torus:
the leaves' edges wait for later steps where inner edges have no work.

Only on direct links: there every connection is one link, so connections that keep their steps
in order (a runtime's channels, `simulate_flow(fifo=True)`) keep every link's steps in order as
the LP assumes. Where connections share links (via switches or other ranks), a leaf whose input
is ready at once runs ahead of its step and takes bandwidth from the steps before it; in one-off
runs on DCell(4,1) and Jellyfish 32 (noted on issue 4) that lost more than the pipeline's fill
and drain.
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components

from arsched.algorithms.dbtree import tree_heights
from arsched.collective.schedule import ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology

MAX_RANKS = 36  # the LP has (links × steps) rows, and rounding weighs them for every column
ITERATIONS = 40  # column generation rounds at most
TOLERANCE = 0.003  # stop when the LP's time is this close to the bound
CHUNKS = 2048  # the columns' shares are rounded to 1/CHUNKS of the vector at most ...
TRANSFERS = 65536  # ... to fewer where their transfers would exceed this ...
MIN_CHUNK = 65536  # ... and to chunks of at least this many bytes
CANDIDATES = 1024  # columns weighed for each left-over chunk when rounding


def direct_links(topology: Topology, ranks: tuple[str, ...]) -> np.ndarray:
    """The link index of every ordered pair of ranks joined by a link of its own, −1 elsewhere."""
    c = topology.compiled
    pos = np.full(c.num_nodes, -1)
    pos[[c.index[r] for r in ranks]] = np.arange(len(ranks))
    a, b = pos[c.link_src], pos[c.link_dst]
    both = (a >= 0) & (b >= 0)
    link = np.full((len(ranks), len(ranks)), -1)
    link[a[both], b[both]] = np.flatnonzero(both)
    return link


def applies(topology: Topology, ranks: tuple[str, ...]) -> bool:
    """Whether the ranks' own links join them all (and there are few enough ranks)."""
    n = len(ranks)
    if not 2 <= n <= MAX_RANKS:
        return False
    link = direct_links(topology, ranks)
    graph = sp.csr_array((link >= 0).astype(np.int8))
    return connected_components(graph, directed=True, connection="strong")[0] == 1


def hang_from(edges: tuple[np.ndarray, np.ndarray], n: int, root: int) -> np.ndarray:
    """The parent array of the tree with these (undirected) edges, hung from `root`."""
    g = sp.csr_array((np.ones(len(edges[0])), edges), shape=(n, n))
    _, pred = breadth_first_order(g, root, directed=False, return_predecessors=True)
    parent = np.where(pred < 0, -1, pred)
    parent[root] = -1
    return parent


def edge_prices(price: np.ndarray, link: np.ndarray, kids: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """(edges × R) cost of sending kids[j] → parents[j] at step s (and back at 2R + 1 − s) under
    (2R × links) prices."""
    steps = price.shape[0] // 2
    s = np.arange(steps)
    return price[s][:, link[kids, parents]].T + price[2 * steps - 1 - s][:, link[parents, kids]].T


def cheapest_steps(parent: np.ndarray, height: np.ndarray, cost: np.ndarray) -> tuple[float, np.ndarray]:
    """(cost, steps) of the cheapest steps 1..R for a rooted tree's edges, a child's step before
    its parent's: f(v, s) = cost(v, s) + Σ_children min_{s' < s} f(child, s'), leaves first.
    `cost` is (nodes × R), the root's row unused; the root's step is R + 1."""
    n, steps = cost.shape
    below = np.zeros((n, steps + 1))  # Σ over children of min_{s' ≤ j} f(child, s'), j = 0..R
    best = np.zeros((n, steps))
    kids = np.flatnonzero(parent >= 0)
    for level in range(int(height.max())):
        nodes = kids[height[kids] == level]
        best[nodes] = cost[nodes] + below[nodes, :steps]
        prefix = np.minimum.accumulate(best[nodes], axis=1)
        np.add.at(below, parent[nodes], np.hstack([np.full((len(nodes), 1), np.inf), prefix]))
    step = np.zeros(n, dtype=np.int64)
    root = int(np.flatnonzero(parent < 0)[0])
    step[root] = steps + 1
    for v in np.argsort(-height, kind="stable"):  # parents (taller) before children
        if parent[v] >= 0:
            step[v] = int(np.argmin(best[v, : step[parent[v]] - 1])) + 1
    return float(below[root, steps]), step


def chunk_count(n: int, nbytes: float) -> int:
    """Chunks for n ranks and a vector of `nbytes`: `CHUNKS`, fewer where the 2(n − 1)
    transfers each needs would pass `TRANSFERS` or a chunk would be below `MIN_CHUNK` bytes
    (smaller pieces cost a runtime more per message than their bytes, and MSCCL allows a
    thread block 256 steps). More chunks round the LP's shares more finely."""
    return int(max(1, min(CHUNKS, TRANSFERS // (2 * (n - 1)), nbytes // MIN_CHUNK)))


@dataclass(frozen=True)
class LevelPlan:
    """Columns (parent array, reduce step of every node; the root's is R + 1) with their chunk
    counts out of `chunk_count`; `steps` is R; `time` the rounded schedule's time with barriers
    (seconds, per-step overhead included) and `lp_time` the LP's (bytes only)."""

    columns: list[tuple[np.ndarray, np.ndarray]]
    counts: np.ndarray
    steps: int
    time: float
    lp_time: float


class _Steps:
    """The time-indexed LP and its column oracles over the ranks' direct links."""

    def __init__(self, link: np.ndarray, caps: np.ndarray, steps: int) -> None:
        self.link, self.caps, self.steps = link, caps, steps
        self.n, num_links = len(link), len(caps)
        rows, inf = 2 * steps * num_links, highspy.kHighsInf
        lp = self.lp = highspy.Highs()
        lp.setOptionValue("output_flag", False)
        lp.setOptionValue("presolve", "off")  # presolve would discard the warm start
        lp.setOptionValue("simplex_strategy", 4)  # primal: new columns keep the basis feasible
        none = np.zeros(0, dtype=np.int32)
        times = 2 * steps  # the t_s columns
        lp.addCols(times, np.ones(times), np.zeros(times), np.full(times, inf), 0, none, none, np.zeros(0))
        each = np.arange(rows, dtype=np.int32)  # row (s, e): Σ x·use − cap(e)·t_s ≤ 0
        cap_terms = -np.tile(caps, times)
        lp.addRows(rows, np.full(rows, -inf), np.zeros(rows), rows, each, each // num_links, cap_terms)
        lp.addRow(1.0, inf, 0, none, np.zeros(0))  # Σ x ≥ 1: the whole vector
        self.columns: list[tuple[np.ndarray, np.ndarray]] = []
        self.known: set[bytes] = set()

    def rows(self, parent: np.ndarray, step: np.ndarray) -> np.ndarray:
        """The (step, link) rows a column loads: each edge up at its step, down at the mirror."""
        kids = np.flatnonzero(parent >= 0)
        num_links, s = len(self.caps), step[kids]
        up = (s - 1) * num_links + self.link[kids, parent[kids]]
        down = (2 * self.steps - s) * num_links + self.link[parent[kids], kids]
        return np.concatenate([up, down])

    def add(self, parent: np.ndarray, step: np.ndarray) -> bool:
        key = np.concatenate([parent, step]).tobytes()
        if key in self.known:
            return False
        self.known.add(key)
        rows = np.append(self.rows(parent, step), 2 * self.steps * len(self.caps)).astype(np.int32)
        inf, start = np.full(1, highspy.kHighsInf), np.zeros(1, dtype=np.int32)
        self.lp.addCols(1, np.zeros(1), np.zeros(1), inf, len(rows), start, rows, np.ones(len(rows)))
        self.columns.append((parent, step))
        return True

    def solve(self) -> tuple[float, np.ndarray, np.ndarray, float]:
        """(LP time, column values, (2R × links) link prices, price of the whole vector)."""
        self.lp.run()
        status = self.lp.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise ArschedError(f"tree-packing: the step LP failed ({self.lp.modelStatusToString(status)})")
        sol = self.lp.getSolution()
        dual = np.asarray(sol.row_dual)
        price = np.maximum(-dual[:-1], 0).reshape(2 * self.steps, len(self.caps))
        value = float(self.lp.getInfo().objective_function_value)
        return value, np.asarray(sol.col_value)[2 * self.steps :], price, float(dual[-1])

    def attach_costs(self, price: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cost, prefix minimum over steps) of rank c joining parent p at step s, (n × n × R),
        infinite off the direct links; later steps a hair cheaper among equals."""
        n, steps = self.n, self.steps
        u, v = np.nonzero(self.link >= 0)
        cost = np.full((n, n, steps), np.inf)
        cost[u, v] = edge_prices(price, self.link, u, v) - 1e-12 * np.arange(1, steps + 1)
        return cost, np.minimum.accumulate(cost, axis=2)

    def prim(self, cost: np.ndarray, prefix: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A tree grown from `root` down under `attach_costs`: the free rank whose cheapest
        (parent in the tree, step before the parent's) costs least joins there; among equal
        costs the latest step, which leaves room for children. None if the ranks left have no
        such parent."""
        n, steps = self.n, self.steps
        parent, step = np.full(n, -1), np.zeros(n, dtype=np.int64)
        step[root] = steps + 1
        free = np.ones(n, dtype=bool)
        free[root] = False
        best, via = prefix[:, root, steps - 1].copy(), np.full(n, root)
        for _ in range(n - 1):
            open_cost = np.where(free, best, np.inf)
            c = int(np.argmin(open_cost))
            if not np.isfinite(open_cost[c]):
                return None
            p = via[c]
            parent[c], step[c], free[c] = p, int(np.argmin(cost[c, p, : step[p] - 1])) + 1, False
            if step[c] > 1:
                better = free & (prefix[:, c, step[c] - 2] < best)
                best[better], via[better] = prefix[better, c, step[c] - 2], c
        return parent, step


def _round(plan: _Steps, x: np.ndarray, chunks: int) -> tuple[np.ndarray, np.ndarray]:
    """Chunk counts for the columns: the floors of chunks·x, then every chunk left to the
    column (among the `CANDIDATES` largest remainders) that raises the summed step maxima
    least. Returns the counts and the (2R × links) load in chunks / capacity."""
    support = np.flatnonzero(x > 0)
    quota = x[support] / x.sum() * chunks
    share = np.floor(quota + 1e-9).astype(np.int64)
    shape = (2 * plan.steps, len(plan.caps))
    rows = [np.bincount(plan.rows(*plan.columns[i]), minlength=shape[0] * shape[1]) for i in support]
    use = np.stack(rows).reshape(len(support), *shape) / plan.caps
    load = np.tensordot(share.astype(np.float64), use, axes=1)
    cand = np.argsort(-(quota - share), kind="stable")[:CANDIDATES]
    for _ in range(chunks - int(share.sum())):
        j = cand[int(np.argmin((load[None] + use[cand]).max(axis=2).sum(axis=1)))]
        share[j] += 1
        load += use[j]
    count = np.zeros(len(x), dtype=np.int64)
    count[support] = share
    return count, load


def balance(
    topology: Topology,
    ranks: tuple[str, ...],
    trees: list[np.ndarray],
    nbytes: float,
    overhead: float,
    bound: float,
) -> LevelPlan:
    """The level-balanced plan over the ranks' direct links, started from `trees` (parent
    arrays, e.g. the packing's; those with other edges are skipped) and breadth-first trees;
    `bound` is the bandwidth bound's time for `nbytes`, `overhead` each step's fixed cost."""
    n = len(ranks)
    link = direct_links(topology, ranks)
    used = np.unique(link[link >= 0])
    cap = topology.compiled.capacity
    scale = cap.max()
    local = np.full(topology.compiled.num_links, -1)
    local[used] = np.arange(len(used))
    link = np.where(link >= 0, local[np.maximum(link, 0)], -1)
    adjacency = (link >= 0).nonzero()
    direct = [p for p in trees if (link[np.flatnonzero(p >= 0), p[p >= 0]] >= 0).all()]
    direct += [hang_from(adjacency, n, r) for r in range(n)]  # breadth-first trees
    steps = max(int(tree_heights(p).max()) for p in direct) + 1
    shapes: dict[bytes, list[tuple[np.ndarray, np.ndarray]]] = {}  # every tree's rootings
    for p in direct:
        kids = np.flatnonzero(p >= 0)
        edges = (np.minimum(kids, p[kids]), np.maximum(kids, p[kids]))
        key = np.sort(edges[0] * n + edges[1]).tobytes()
        if key not in shapes:
            rooted = (hang_from(edges, n, r) for r in range(n))
            shapes[key] = [(q, h) for q in rooted if (h := tree_heights(q)).max() < steps]
    lp = _Steps(link, cap[used] / scale, steps)
    for q, h in (r for rootings in shapes.values() for r in rootings):
        lp.add(q, h + 1)
    target = bound * scale / nbytes  # the bound in the LP's units
    for _ in range(ITERATIONS):
        value, x, price, whole = lp.solve()
        if value <= target * (1 + TOLERANCE):
            break
        offers = []
        for rootings in shapes.values():  # each tree's cheapest rooting
            priced = []
            for p, h in rootings:
                kids = np.flatnonzero(p >= 0)
                cost = np.zeros((n, steps))
                cost[kids] = edge_prices(price, link, kids, p[kids])
                priced.append((*cheapest_steps(p, h, cost), p))
            offers.append(min(priced, key=lambda offer: offer[0]))
        attach, prefix = lp.attach_costs(price)
        for grown in (lp.prim(attach, prefix, root) for root in range(n)):
            if grown is not None:
                p, s = grown
                kids = np.flatnonzero(p >= 0)
                offers.append((float(attach[kids, p[kids], s[kids] - 1].sum()), s, p))
        if not sum(lp.add(p, s) for c, s, p in offers if c < whole * (1 - 1e-6)):
            break
    value, x, _, _ = lp.solve()
    chunks = chunk_count(n, nbytes)
    counts, load = _round(lp, x, chunks)
    per_step = load.max(axis=1) * nbytes / chunks / scale
    time = float(per_step.sum() + (per_step > 0).sum() * overhead)
    return LevelPlan(lp.columns, counts, steps, time, value * nbytes / scale)


def add_levels(b: ScheduleBuilder, plan: LevelPlan) -> None:
    """Every column's chunks up its tree at their steps and back down at the mirrored ones."""
    first = 0
    for (parent, step), c in zip(plan.columns, plan.counts.tolist(), strict=True):
        if not c:
            continue
        kids = np.flatnonzero(parent >= 0)
        chunks = np.repeat(np.arange(first, first + c), len(kids))
        first += c
        up, down = np.tile(kids, c), np.tile(parent[kids], c)
        b.add_rank_arrays(np.tile(step[kids] - 1, c), chunks, up, down, "reduce")
        b.add_rank_arrays(np.tile(2 * plan.steps - step[kids], c), chunks, down, up, "copy")
