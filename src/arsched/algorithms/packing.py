"""Tree packing: AllReduce over spanning trees weighted by a linear program (after ForestColl,
arXiv 2402.06787, which proves that packing spanning trees attains the cut bound).

A tree edge {u, v} is the path u→v plus the path v→u: a tree reduces its share of the vector up
to a root and broadcasts it back down the same edges, so every edge is crossed once each way
and a tree's link usage does not depend on where its root is. Paths are spread over equal-cost
routes (`Router.link_paths(spread=True)`, d-mod-k on fat-trees), which makes stars optimal on a
fat-tree where lowest-index routing overloads a few uplinks and needs deep chains. The LP

    maximise Σ_T x_T   s.t.   Σ_T x_T·use_T(e) ≤ cap(e) for every link e

(M bytes then take M / Σ x_T) is solved by column generation with HiGHS (highspy, primal
simplex warm-started as columns arrive). It starts from depth-limited Prim trees (stars for
depth 1) grown from every rank under hop counts. Each round, the link duals price the rank pairs
and oracles propose trees: the minimum spanning tree under those prices (the exact pricing
problem) with jittered variants, and Prim trees from the cheapest centres. If that has not
converged after `MWU_AFTER` rounds (large networks, where it stalls), multiplicative weights
(Garg & Könemann: thousands of minimum-spanning-tree calls under exponential link prices) supply
a near-optimal set of trees at once; run from the start, they pre-empt the shallow trees the
Prim oracles find on small networks. It stops once the rate is within `TOLERANCE` of the cut
bound's, which no packing can beat.

Many packings reach the optimum and they differ in depth, which pipelining pays for, so a
second LP gives up `DEPTH_SLACK` of the rate to minimise Σ x_T·(2h_T − 1)² (the squared
pipeline length: it pushes rate off the deepest trees, whose fill and drain end the schedule),
over a pool that adds depth-limited Prim trees from every rank; each tree is hung from its centre.

Discretisation: the vector is cut into `units`·`stages` equal chunks, dealt to the trees in
proportion to their rates (largest remainder), and every tree's chunks are spread evenly over
`stages` pipeline steps, about `units`·x_T/X of them entering at each: every step, the trees'
concurrent flows on a link stand in the LP's proportions, so max-min sharing gives each tree
its LP rate. More stages shorten fill and drain, fewer pay the per-step overhead (α plus the
path latency) less often (see `default_stages`). By default `choose_pipeline` also weighs no
pipeline at all, one or two steps per level with a chunk or more for every tree, by the time
the steps would take with barriers (`step_time`): stars on a fat-tree load every link alike
in each step, so pipelining them only adds steps.

Where the pipeline's time with barriers is more than `NEAR` above the bound, the default also
weighs level-balanced steps (`levels.py`): no pipeline, each chunk crossing its tree once, with
trees over a few peers per rank and steps placed chunk by chunk under exponential link-step
prices so that every link is equally busy in every step, which removes the fill and drain that
pipelined deep trees pay for. They are used where their time with barriers is below the
pipeline's.

Pipelining needs connections that carry their steps in order, as a runtime's channels do:
simulate with `simulate_flow(..., fifo=True)`. Sent all at once (the default flow model),
every chunk of every level shares the links at the same time and the pipeline does not form.

Limits (docs/results.md): the LP reaches the optimum on the 128 ranks of fattree(8) in under a
second and on BCube(4,2) in seconds; DCell(3,2)'s 156 ranks take longer and its trees are deep,
so the level steps win there; beyond `MAX_RANKS` ranks tree packing refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from arsched.algorithms import levels as level_steps
from arsched.algorithms.common import check_ranks, check_size
from arsched.algorithms.dbtree import add_tree, edge_steps, tree_heights
from arsched.algorithms.registry import NotApplicable, register
from arsched.algorithms.routes import Routes, intern, route
from arsched.bounds import allreduce_bound
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError
from arsched.topology.core import Topology

MAX_ITERATIONS = 200
MAX_RANKS = 256
MAX_STAGES = 256
UNITS = 32  # default parallel pipelines: the trees' shares are rounded to 1/(UNITS·stages)
VARIANTS = 4  # jittered spanning trees and Prim centres priced per iteration
DEPTHS = (1, 2, 3, 4)  # height limits of the shallow-tree oracle
DEPTH_SLACK = 0.005  # share of the optimum given up for shallower trees
MWU_AFTER = 20  # column generation rounds before multiplicative weights step in
MWU_EPSILON = 0.3  # price step of multiplicative weights
TOLERANCE = 0.002  # stop when the rate is this close to the cut bound's
NEAR = 0.02  # a pipeline this close to the bound (with barriers) is kept without weighing levels


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
    """Every unordered rank pair (u < v) and its links (u→v path plus v→u path, spread over
    equal-cost paths as `Router.link_paths(spread=True)` chooses them) as a sparse
    (pairs × links) count matrix."""
    n = len(ranks)
    iu, iv = np.triu_indices(n, 1)
    c = topology.compiled
    nodes = np.array([c.index[r] for r in ranks])
    ptr, links = topology.router.link_paths(
        np.concatenate([nodes[iu], nodes[iv]]), np.concatenate([nodes[iv], nodes[iu]]), spread=True
    )
    rows = np.repeat(np.arange(len(ptr) - 1) % len(iu), np.diff(ptr))
    usage = sp.csr_array((np.ones(len(rows)), (rows, links)), shape=(len(iu), c.num_links))
    return iu, iv, usage


def hang(n: int, iu: np.ndarray, iv: np.ndarray, tree: np.ndarray) -> tuple[np.ndarray, int]:
    """(parent array, height) of a spanning tree given by its pairs, hung from its centre (the
    middle of a longest path, which minimises the height)."""
    g = sp.csr_array((np.ones(len(tree)), (iu[tree], iv[tree])), shape=(n, n))

    def bfs(root: int) -> tuple[np.ndarray, np.ndarray]:
        order, pred = breadth_first_order(g, root, directed=False, return_predecessors=True)
        return order, pred

    far = int(bfs(0)[0][-1])  # BFS visits in order of distance: the last node is a farthest one
    order, pred = bfs(far)
    path = [int(order[-1])]
    while path[-1] != far:
        path.append(int(pred[path[-1]]))
    centre = path[len(path) // 2]
    _, pred = bfs(centre)
    parent = np.where(pred < 0, -1, pred)
    parent[centre] = -1
    return parent, len(path) // 2


def _positive_prices(price: np.ndarray) -> np.ndarray:
    """Prices made strictly positive: a zero weight would vanish from a sparse graph."""
    return np.maximum(price, 0) + 1e-9 * price.max() + 1e-12


class _Oracles:
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
        t = minimum_spanning_tree(sp.csr_array((_positive_prices(price), (iu, iv)), shape=(n, n))).tocoo()
        return self._of_edges(t.row, t.col)

    def prims(
        self, price: np.ndarray, roots: np.ndarray, depths: Sequence[int] = DEPTHS
    ) -> list[tuple[np.ndarray, int]]:
        """The Prim trees from every root for every depth limit in `depths`, with their depths."""
        dense = self._dense(price)
        return [tree for limit in depths for tree in self._prims(dense, np.asarray(roots), limit)]

    def _dense(self, price: np.ndarray) -> np.ndarray:
        dense = np.zeros((self.n, self.n))
        dense[self.iu, self.iv] = dense[self.iv, self.iu] = _positive_prices(price)
        return dense

    def _prims(self, dense: np.ndarray, roots: np.ndarray, limit: int) -> list[tuple[np.ndarray, int]]:
        """Prim's algorithm from each root at once (one row per root), attaching only to nodes
        above depth `limit`: cheap trees of height at most `limit` (stars for 1)."""
        n, rows = self.n, np.arange(len(roots))
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
        kids = [np.flatnonzero(p >= 0) for p in parent]
        tall = depth.max(axis=1).tolist()
        return [(self._of_edges(p[k], k), h) for p, k, h in zip(parent, kids, tall, strict=True)]


class _TreeLP:
    """The packing LP over the trees found so far, in HiGHS, warm-started as columns arrive."""

    def __init__(self, caps: np.ndarray) -> None:
        self.lp = highspy.Highs()
        self.lp.setOptionValue("output_flag", False)
        self.lp.setOptionValue("presolve", "off")  # presolve would discard the warm start
        self.lp.setOptionValue("simplex_strategy", 4)  # primal: new columns keep the basis feasible
        none = np.zeros(0, dtype=np.int32)
        self.lp.addRows(len(caps), np.full(len(caps), -highspy.kHighsInf), caps, 0, none, none, np.zeros(0))
        self.lp.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.count = 0

    def add(self, use: np.ndarray) -> None:
        rows = np.flatnonzero(use).astype(np.int32)
        inf, start = np.full(1, highspy.kHighsInf), np.zeros(1, dtype=np.int32)
        self.lp.addCols(1, np.ones(1), np.zeros(1), inf, len(rows), start, rows, use[rows])
        self.count += 1

    def solve(self) -> tuple[np.ndarray, np.ndarray]:
        """(column values, row duals) of the optimum."""
        self.lp.run()
        status = self.lp.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise ArschedError(f"tree-packing: the LP failed ({self.lp.modelStatusToString(status)})")
        sol = self.lp.getSolution()
        return np.asarray(sol.col_value), np.asarray(sol.row_dual)

    def shallowest(self, rate: float, depth: np.ndarray) -> np.ndarray:
        """Column values that keep Σx ≥ rate and minimise Σ x·depth (the second LP)."""
        cols = np.arange(self.count, dtype=np.int32)
        self.lp.changeColsCost(self.count, cols, depth.astype(np.float64))
        self.lp.changeObjectiveSense(highspy.ObjSense.kMinimize)
        self.lp.addRow(rate, highspy.kHighsInf, self.count, cols, np.ones(self.count))
        return self.solve()[0]


def _pipeline_cost(height: np.ndarray) -> np.ndarray:
    """The second LP's cost of a tree of this height: its pipeline length 2h − 1, squared, so
    that rate moves off the deepest trees, whose fill and drain end the schedule."""
    return (2 * np.asarray(height) - 1) ** 2


def multiplicative_weights(
    sub: sp.csr_array, caps: np.ndarray, oracles: _Oracles, eps: float = MWU_EPSILON
) -> list[np.ndarray]:
    """Trees of a near-optimal packing by multiplicative weights (Garg & Könemann): route a
    bottleneck's worth of rate on the minimum spanning tree under link prices, raise the price
    of every link it uses by a factor of up to 1 + eps, until the prices sum to one. Thousands of
    fast MST calls instead of LP solves, for networks where column generation stalls (BCube(4,2)
    and DCell(3,2) in docs/results.md, "Tree packing at scale")."""
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
    """A fractional packing of spanning trees over `ranks` (see the module docstring).

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
    lp = _TreeLP(lp_caps)
    oracles = _Oracles(n, iu, iv, seed)
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
        [hang(n, iu, iv, t)[1] if h is None else h for t, h in zip(columns, heights, strict=True)]
    )
    weights = lp.shallowest(optimum * (1 - DEPTH_SLACK), _pipeline_cost(height))
    keep = np.flatnonzero(weights > 1e-9 * optimum)
    hung = [hang(n, iu, iv, columns[i]) for i in keep]
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


def _tree_edges(parents: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of every edge of these trees: (sources, destinations)."""
    kids = np.concatenate([np.flatnonzero(p >= 0) for p in parents])
    ups = np.concatenate([p[p >= 0] for p in parents])
    return np.concatenate([kids, ups]), np.concatenate([ups, kids])


def deal(weights: np.ndarray, chunks: int) -> np.ndarray:
    """Chunks per tree in proportion to the weights, rounded by largest remainder."""
    quota = weights / weights.sum() * chunks
    count = np.floor(quota).astype(np.int64)
    count[np.argsort(-(quota - count), kind="stable")[: chunks - count.sum()]] += 1
    return count


def _overhead(topology: Topology, alpha: float) -> float:
    """What every pipeline step costs a connection besides its bytes: α plus a path latency."""
    return alpha + float(topology.compiled.latency.max()) * 2


def default_stages(packing: Packing, topology: Topology, nbytes: float, alpha: float) -> int:
    """The pipeline length S = √(T / (α + latency)), T the LP's time for the size: every step
    costs each connection α plus the path latency, and the fill and drain cost a few steps'
    time. Measured on the comparison networks (docs/results.md), this S sits in the flat part
    of the curve between the two."""
    steps = np.sqrt(nbytes / packing.rate / _overhead(topology, alpha))
    return int(np.clip(round(steps), 1, MAX_STAGES))


def step_time(
    packing: Packing,
    routes: Routes,
    capacity: np.ndarray,
    units: int,
    stages: int,
    nbytes: float,
    overhead: float,
) -> float:
    """The schedule's time if every step waited for the previous one (barriers): the sum over
    steps of the most loaded link's bytes / capacity, plus `overhead` per step. Without
    barriers connections run ahead, so this overstates pipelines, but it is exact for a
    packing whose unpipelined steps load every link alike (stars on a fat-tree), which it
    tells from one that needs pipelining, at the cost of two sparse products."""
    n = len(packing.parents[0])
    count = deal(packing.weights, units * stages)
    trees = np.flatnonzero(count)
    # rows: (tree, step after its chunk's entry), each with the routed pairs it sends on
    rows, pairs, spans = [], [], []
    num_rows = 0
    for i in trees.tolist():
        parent = packing.parents[i]
        kids, up, down = edge_steps(parent, tree_heights(parent))
        rows += [num_rows + up, num_rows + down]
        pairs += [routes.index(kids, parent[kids], n), routes.index(parent[kids], kids, n)]
        spans.append(int(down.max()) + 1)
        num_rows += spans[-1]
    span = np.asarray(spans)
    pair_links = routes.link_matrix(len(capacity))
    row, pair = np.concatenate(rows), np.concatenate(pairs)
    sends = sp.csr_array((np.ones(len(row)), (row, pair)), shape=(num_rows, len(routes.src)))
    usage = sends @ pair_links
    # bytes entering every tree at each step, shifted to each of its rows' steps
    level = np.arange(num_rows) - np.repeat(np.cumsum(span) - span, span)
    entering = np.stack([np.bincount(np.arange(c) * stages // c, minlength=stages) for c in count[trees]])
    step = (level[:, None] + np.arange(stages)[None, :]).ravel()
    weight = np.repeat(entering, span, axis=0).ravel() * (nbytes / (units * stages))
    col = np.repeat(np.arange(num_rows), stages)
    inflow = sp.csr_array((weight, (step, col)), shape=(stages + int(span.max()), num_rows))
    load = (inflow @ usage).toarray()
    busy = load.max(axis=1) > 0
    return float((load / capacity).max(axis=1).sum() + busy.sum() * overhead)


def choose_pipeline(
    packing: Packing, routes: Routes, topology: Topology, nbytes: float, alpha: float
) -> tuple[int, int, float]:
    """(units, stages, time) for a packing: the pipeline of `default_stages` over `UNITS`
    units, or no pipeline (one or two steps, a chunk or more for every tree), whichever
    `step_time` finds faster. Pipelining pays for fill and drain; a packing whose every step
    keeps the links equally busy (stars on a fat-tree or a small Jellyfish) does not need it."""
    overhead = _overhead(topology, alpha)
    wide = max(UNITS, len(packing.weights))
    options = [(UNITS, default_stages(packing, topology, nbytes, alpha)), (wide, 1), (wide, 2)]
    cap = topology.compiled.capacity
    times = [step_time(packing, routes, cap, u, s, nbytes, overhead) for u, s in options]
    best = int(np.argmin(times))
    return *options[best], times[best]


def _positive(value: object, name: str) -> int:
    if not (isinstance(value, (int, np.integer)) and value >= 1):
        raise ArschedError(f"tree-packing: {name} must be a positive integer, got {value!r}")
    return int(value)


@register("tree-packing", "spanning trees weighted by an LP (column generation): bandwidth-optimal packing")
def tree_packing(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    units: int | None = None,
    stages: int | None = None,
    alpha: float = DEFAULT_ALPHA,
    iterations: int = MAX_ITERATIONS,
    seed: int = 0,
    levels: bool | None = None,
) -> Schedule:
    """Tree packing: `units` parallel pipelines (default `UNITS`) of `stages` steps (default
    `default_stages`, tuned for a per-transfer overhead `alpha`; with neither given,
    `choose_pipeline` picks both, perhaps no pipeline), over trees from at most `iterations`
    rounds of column generation; `seed` for the jittered tree prices. With neither given, the
    level-balanced steps of `levels.balance` are used instead where the pipeline's time with
    barriers is more than `NEAR` above the bound and theirs is shorter; `levels=True` asks for
    them, `levels=False` never."""
    rs = check_ranks(topology, ranks, "tree-packing")
    nbytes = check_size(nbytes, "tree-packing")
    n = len(rs)
    if n > MAX_RANKS:
        raise NotApplicable(f"tree-packing is limited to {MAX_RANKS} ranks: its LP grows with the rank pairs")
    if not (float(alpha) >= 0 and np.isfinite(alpha)):
        raise ArschedError(f"tree-packing: alpha must be a non-negative number of seconds, got {alpha!r}")
    if levels is not None and not isinstance(levels, bool):
        raise ArschedError(f"tree-packing: levels must be true or false, got {levels!r}")
    if levels and (units is not None or stages is not None):
        raise ArschedError("tree-packing: levels replace the pipeline: give units and stages or levels")
    packing = pack(topology, rs, _positive(iterations, "iterations"), seed)
    overhead = _overhead(topology, alpha)
    if levels:
        plan = level_steps.balance(topology, rs, nbytes, overhead)
        return _level_schedule(topology, rs, nbytes, plan, packing, alpha, iterations, seed)
    routes = route(topology, rs, *_tree_edges(packing.parents))
    if units is None and stages is None:
        units, stages, time = choose_pipeline(packing, routes, topology, nbytes, alpha)
        if levels is None and time > nbytes / packing.limit * (1 + NEAR):
            plan = level_steps.balance(topology, rs, nbytes, overhead)
            if plan.time < time:
                return _level_schedule(topology, rs, nbytes, plan, packing, alpha, iterations, seed)
    if stages is None:
        stages = default_stages(packing, topology, nbytes, alpha)
    stages = _positive(stages, "stages")
    units = _positive(UNITS if units is None else units, "units")
    count = deal(packing.weights, units * stages)
    b = ScheduleBuilder(
        topology,
        rs,
        nbytes,
        units * stages,
        "tree-packing",
        {
            "params": {"units": units, "stages": stages, "alpha": alpha, "iterations": iterations},
            "seed": seed,
            "lp_rate": packing.rate,
            "lp_optimum": packing.optimum,
            "trees": int((count > 0).sum()),
            "max_height": int(packing.heights[count > 0].max()),
        },
    )
    used = [p for p, c in zip(packing.parents, count.tolist(), strict=True) if c]
    paths = intern(b, routes, *_tree_edges(used))
    members = np.arange(n)
    first = 0
    for parent, c in zip(packing.parents, count.tolist(), strict=True):
        if c:  # c chunks spread evenly over the steps: about c / stages enter at each
            chunks = np.arange(first, first + c)
            offsets = np.arange(c) * stages // c
            add_tree(b, members, parent, tree_heights(parent), chunks, offsets, paths)
            first += c
    return b.build()


def _level_schedule(
    topology: Topology,
    ranks: tuple[str, ...],
    nbytes: float,
    plan: level_steps.LevelPlan,
    packing: Packing,
    alpha: float,
    iterations: int,
    seed: int,
) -> Schedule:
    """The schedule of a level-balanced plan (`levels.add_levels`)."""
    b = ScheduleBuilder(
        topology,
        ranks,
        nbytes,
        len(plan.columns),
        "tree-packing",
        {
            "params": {"levels": True, "alpha": alpha, "iterations": iterations},
            "seed": seed,
            "lp_rate": packing.rate,
            "lp_optimum": packing.optimum,
            "level_time": plan.time,
            "level_steps": plan.steps,
            "trees": len({parent.tobytes() for parent, _ in plan.columns}),
            "max_height": max(int(tree_heights(parent).max()) for parent, _ in plan.columns),
        },
    )
    level_steps.add_levels(b, plan)
    return b.build()
