"""Level-balanced tree steps: tree packing without a pipeline.

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

Over few peers: the trees use only the rank pairs of the *overlay* (`overlay`): the pairs whose
route has at most h links, h the least that joins all ranks (a torus's own links, a DCell's
cell and direct links, a Jellyfish's servers one switch-to-switch hop apart). Every rank then
has a few connections, each busy in every step, and connections that keep their steps in order
(a runtime's channels, `simulate_flow(fifo=True)`) keep the steps in order, as the LP assumes.
Over all rank pairs, a leaf whose input is ready at once runs ahead of its step on a
connection of its own and takes bandwidth from the steps before it: in one-off runs on
Jellyfish 32 (noted on issue 4) that made the in-order flow model 1.098× the bound where the
overlay's schedule runs at 1.029× (`benchmarks/bench_algorithms.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components

from arsched.algorithms.dbtree import tree_heights
from arsched.algorithms.routes import Routes, intern, route
from arsched.collective.schedule import ScheduleBuilder
from arsched.errors import ArschedError
from arsched.sim.paths import gather
from arsched.topology.core import Topology

MAX_RANKS = 36  # the LP has (links × steps) rows: on BCube(4,2)'s 64 ranks it took 6 minutes
ITERATIONS = 40  # column generation rounds at most
TOLERANCE = 0.003  # stop when the LP's time is this close to the bound ...
STALL_ROUNDS, STALL_GAIN = 5, 0.002  # ... or when its last 5 rounds saved less than 0.2 % of it
CHUNKS = 2048  # the columns' shares are rounded to 1/CHUNKS of the vector at most ...
TRANSFERS = 65536  # ... to fewer where their transfers would exceed this ...
MIN_CHUNK = 65536  # ... and to chunks of at least this many bytes
CANDIDATES = 1024  # columns weighed for each left-over chunk when rounding
MORE_STEPS = 3  # steps tried beyond the overlay's diameter + 1 ...
GAIN = 0.01  # ... while each one shortens the time with barriers by this share at least
ACCEPT = 0.02  # tree packing uses a plan only if its LP is this close to the bound


def overlay(topology: Topology, ranks: tuple[str, ...]) -> Routes:
    """The rank pairs level steps use: every ordered pair whose spread route has at most h
    links, for the least h that joins all ranks (strongly connected). On a direct-connect
    network these are the ranks' own links."""
    n = len(ranks)
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    routes = route(topology, ranks, src, dst)
    hops = routes.hops
    for h in np.unique(hops).tolist():
        near = hops <= h
        graph = sp.csr_array(
            (np.ones(int(near.sum()), dtype=np.int8), (routes.src[near], routes.dst[near])), shape=(n, n)
        )
        if connected_components(graph, directed=True, connection="strong")[0] == 1:
            return routes.subset(near)
    raise ArschedError("tree-packing: the ranks are not all joined by routes")  # routing refused earlier


def pair_matrix(routes: Routes, n: int) -> np.ndarray:
    """The index of every ordered rank pair among `routes`, −1 for pairs not routed."""
    pair = np.full((n, n), -1)
    pair[routes.src, routes.dst] = np.arange(len(routes.src))
    return pair


def applies(topology: Topology, ranks: tuple[str, ...]) -> bool:
    """Whether there are few enough ranks for the step LP (and at least two)."""
    return 2 <= len(ranks) <= MAX_RANKS


def hang_from(edges: tuple[np.ndarray, np.ndarray], n: int, root: int) -> np.ndarray:
    """The parent array of the tree with these (undirected) edges, hung from `root`."""
    g = sp.csr_array((np.ones(len(edges[0])), edges), shape=(n, n))
    _, pred = breadth_first_order(g, root, directed=False, return_predecessors=True)
    parent = np.where(pred < 0, -1, pred)
    parent[root] = -1
    return parent


def edge_prices(price: np.ndarray, pair: np.ndarray, kids: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """(edges × R) cost of sending kids[j] → parents[j] at step s (and back at 2R + 1 − s) under
    (2R × pairs) prices."""
    steps = price.shape[0] // 2
    s = np.arange(steps)
    return price[s][:, pair[kids, parents]].T + price[2 * steps - 1 - s][:, pair[parents, kids]].T


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
    counts out of `chunk_count`, over the overlay's `routes`; `steps` is R; `time` the rounded
    schedule's time with barriers (seconds, per-step overhead included) and `lp_time` the LP's
    (bytes only)."""

    columns: list[tuple[np.ndarray, np.ndarray]]
    counts: np.ndarray
    routes: Routes
    steps: int
    time: float
    lp_time: float


class _Steps:
    """The time-indexed LP and its column oracles over the overlay's pairs; `use` is the
    (pairs × links) route matrix, `caps` the links' capacities."""

    def __init__(self, pair: np.ndarray, use: sp.csr_array, caps: np.ndarray, steps: int) -> None:
        self.pair, self.use, self.caps, self.steps = pair, use, caps, steps
        self.n, num_links = len(pair), len(caps)
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
        """The (step, link) rows a column loads, one per link of every route: each edge up at
        its step, down at the mirrored one."""
        kids = np.flatnonzero(parent >= 0)
        num_links, s = len(self.caps), step[kids]
        out = []
        for pairs, at in (
            (self.pair[kids, parent[kids]], s - 1),
            (self.pair[parent[kids], kids], 2 * self.steps - s),
        ):
            idx, lens = gather(self.use.indptr, pairs)
            out.append(np.repeat(at, lens) * num_links + self.use.indices[idx])
        return np.concatenate(out)

    def add(self, parent: np.ndarray, step: np.ndarray) -> bool:
        key = np.concatenate([parent, step]).tobytes()
        if key in self.known:
            return False
        self.known.add(key)
        rows, counts = np.unique(self.rows(parent, step), return_counts=True)
        rows = np.append(rows, 2 * self.steps * len(self.caps)).astype(np.int32)
        values = np.append(counts, 1).astype(np.float64)
        inf, start = np.full(1, highspy.kHighsInf), np.zeros(1, dtype=np.int32)
        self.lp.addCols(1, np.zeros(1), np.zeros(1), inf, len(rows), start, rows, values)
        self.columns.append((parent, step))
        return True

    def solve(self) -> tuple[float, np.ndarray, np.ndarray, float]:
        """(LP time, column values, (2R × pairs) pair prices, price of the whole vector)."""
        self.lp.run()
        status = self.lp.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise ArschedError(f"tree-packing: the step LP failed ({self.lp.modelStatusToString(status)})")
        sol = self.lp.getSolution()
        dual = np.asarray(sol.row_dual)
        price = np.maximum(-dual[:-1], 0).reshape(2 * self.steps, len(self.caps))
        value = float(self.lp.getInfo().objective_function_value)
        return value, np.asarray(sol.col_value)[2 * self.steps :], (self.use @ price.T).T, float(dual[-1])

    def attach_costs(self, price: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(cost, prefix minimum over steps) of rank c joining parent p at step s, (n × n × R),
        infinite off the overlay; later steps a hair cheaper among equals."""
        n, steps = self.n, self.steps
        u, v = np.nonzero((self.pair >= 0) & (self.pair.T >= 0))
        cost = np.full((n, n, steps), np.inf)
        cost[u, v] = edge_prices(price, self.pair, u, v) - 1e-12 * np.arange(1, steps + 1)
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
    """The level-balanced plan over the `overlay`'s pairs, started from `trees` (parent arrays,
    e.g. the packing's; those with other edges are skipped) and breadth-first trees; `bound` is
    the bandwidth bound's time for `nbytes`, `overhead` each step's fixed cost.

    R starts at the overlay's diameter + 1 (every breadth-first tree fits) and grows, up to
    `MORE_STEPS` more, while the LP stays above the bound and each step more saves `GAIN` of the
    time with barriers: more steps give leaves more room to wait (DCell(4,1)'s LP: 1.12× the
    bound at R = 5, 1.04× at R = 7), and cost a step's overhead each."""
    n = len(ranks)
    routes = overlay(topology, ranks)
    pair = pair_matrix(routes, n)
    both = (pair >= 0) & (pair.T >= 0)
    wide = [hang_from(both.nonzero(), n, r) for r in range(n)]  # breadth-first trees
    near = [p for p in trees if both[np.flatnonzero(p >= 0), p[p >= 0]].all()] + wide
    rootings: dict[bytes, list[tuple[np.ndarray, np.ndarray]]] = {}  # every tree hung from every rank
    for p in near:
        kids = np.flatnonzero(p >= 0)
        edges = (np.minimum(kids, p[kids]), np.maximum(kids, p[kids]))
        key = np.sort(edges[0] * n + edges[1]).tobytes()
        if key not in rootings:
            rootings[key] = [(q, tree_heights(q)) for q in (hang_from(edges, n, r) for r in range(n))]

    used = np.unique(routes.links)
    use = routes.link_matrix(topology.compiled.num_links)[:, used].tocsr()
    cap = topology.compiled.capacity
    scale = float(cap.max())  # the LP's times are in units of 1/scale

    def plan(steps: int) -> LevelPlan:
        shapes = [[(q, h) for q, h in hung if h.max() < steps] for hung in rootings.values()]
        lp = _Steps(pair, use, cap[used] / scale, steps)
        return _plan(lp, routes, [hung for hung in shapes if hung], nbytes, scale, overhead, bound)

    first = max(int(tree_heights(p).max()) for p in wide) + 1
    best = plan(first)
    for steps in range(first + 1, first + MORE_STEPS + 1):
        if best.lp_time <= bound * (1 + TOLERANCE):
            break
        longer = plan(steps)
        if longer.time > best.time * (1 - GAIN):
            break
        best = longer
    return best


def _plan(
    lp: _Steps,
    routes: Routes,
    shapes: list[list[tuple[np.ndarray, np.ndarray]]],
    nbytes: float,
    scale: float,
    overhead: float,
    bound: float,
) -> LevelPlan:
    """The rounded plan of the step LP `lp` over the overlay's `routes`, by column generation
    from `shapes` (each a tree's rootings no taller than R − 1, with their heights); the LP's
    capacities are in units of `scale` bytes/s."""
    n, steps, pair = lp.n, lp.steps, lp.pair
    for q, h in (r for hung in shapes for r in hung):
        lp.add(q, h + 1)
    target = bound * scale / nbytes  # the bound in the LP's units
    values: list[float] = []
    for _ in range(ITERATIONS):
        value, x, price, whole = lp.solve()
        values.append(value)
        stalled = len(values) > STALL_ROUNDS and values[-STALL_ROUNDS - 1] - value < STALL_GAIN * target
        if value <= target * (1 + TOLERANCE) or stalled:
            break
        offers = []
        for hung in shapes:  # each tree's cheapest rooting
            priced = []
            for p, h in hung:
                kids = np.flatnonzero(p >= 0)
                cost = np.zeros((n, steps))
                cost[kids] = edge_prices(price, pair, kids, p[kids])
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
    return LevelPlan(lp.columns, counts, routes, steps, time, value * nbytes / scale)


def add_levels(b: ScheduleBuilder, plan: LevelPlan) -> None:
    """Every column's chunks up its tree at their steps and back down at the mirrored ones, on
    the overlay's routes."""
    ids = intern(b, plan.routes, plan.routes.src, plan.routes.dst)
    first = 0
    for (parent, step), c in zip(plan.columns, plan.counts.tolist(), strict=True):
        if not c:
            continue
        kids = np.flatnonzero(parent >= 0)
        chunks = np.repeat(np.arange(first, first + c), len(kids))
        first += c
        up, down = np.tile(kids, c), np.tile(parent[kids], c)
        b.add_rank_arrays(np.tile(step[kids] - 1, c), chunks, up, down, "reduce", ids[up, down])
        b.add_rank_arrays(np.tile(2 * plan.steps - step[kids], c), chunks, down, up, "copy", ids[down, up])
