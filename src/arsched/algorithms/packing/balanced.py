"""Balanced steps: tree packing without a pipeline, every link equally busy in every step.

A pipelined tree (`arsched.algorithms.packing.pipeline`) pays for fill and drain: in its first
steps only the leaf edges have work and in its last only the edges into the leaves. Here each
chunk crosses its tree once: a node adds into its parent at a step σ ∈ 1..R after all its
children did, and the sum comes back down the same edge at the mirrored step 2R + 1 − σ. Trees
and their steps are chosen together, so that every link carries the same load in every step,
as a ring's rotations do. (A schedule built this way records `levels: true` in its params.)

Placement (`Placer`): chunk by chunk, greedily, under exponential prices in the manner of
multiplicative weights (Garg & Könemann 2007; Young's greedy for packing problems, SODA 1995).
Every (step, link) costs exp(β·load / highest load) / capacity, so a link-step that is already
busy costs much more than an idle one. A sharp β (50) is nearly a greedy for the busiest
link-step alone; a softer one (10) also weighs the total load, which matters where the cut
bound saturates every link (an MI250 box's xGMI mesh and its NICs): the plan is placed with
each of `SHARPNESS` and the faster kept. Chunk k is rooted at rank k mod n and takes a Prim tree
grown from the root down, every rank attached to the parent and step (before the parent's)
that cost least (`prim`, compiled). Where that strands ranks (all their neighbours in the tree
already at step 1), the stranded ranks `join` the tree by their cheapest edges and every step
is chosen again by a dynamic program (`cheapest_steps`), so the tree keeps the shape the prices
gave it; only a tree taller than R falls back to the breadth-first tree from the root. Sweeps
then take every chunk out and place it again under the prices of all the others (rip-up and
re-place), which evens out what the myopic first pass left; a sweep can also undo what the last
one gained, so the fastest placement seen is kept, after at most `SWEEPS` sweeps or `PATIENCE`
in a row without a faster one (on DCell(5,1), 3 sweeps left 1.042× the bound in the flow model,
this 1.027×: docs/results.md, bench_auto). Every chunk is a column
of its own, so there is no fractional solution to round, and unlike a time-indexed LP this
scales to the ranks tree packing takes.

Over few peers: the trees use only the rank pairs of the `overlay`: the pairs whose route has
at most h links and relays through no other rank, h the least that joins all ranks (a torus's
own links, a DCell's cell and direct links, a Jellyfish's servers one switch-to-switch hop
apart). Every rank then has a few connections, each busy in every step, and connections that
keep their steps in order (a runtime's channels, `simulate_flow(fifo=True)`) keep the steps in
order, as the plan assumes. Over all rank pairs, a leaf whose input is ready at once would run
ahead of its step on a connection of its own and take bandwidth from the steps before it.

What it cannot remove: at step R only the root's children send, so that step and its mirror
carry less than the others; and every link-step's load is a whole number of chunks, so with
few chunks for many ranks and steps the busiest link of a step stays above the step's mean
(`chunk_count` takes as many chunks as `TRANSFERS` allows). The gaps to the bound this leaves
are measured by benchmarks/bench_packing_scale.py (docs/results.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from arsched.algorithms.registry import NotApplicable
from arsched.algorithms.routes import Routes, all_pairs, intern
from arsched.algorithms.trees import hang_from, tree_heights
from arsched.collective.schedule import ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology

CHUNKS = 2048  # chunks at most (each placed as a column of its own) ...
TRANSFERS = 524288  # ... fewer where their transfers would exceed this ...
MIN_CHUNK = 65536  # ... and to chunks of at least this many bytes
SHARPNESS = (50.0, 10.0)  # β tried: a link-step as loaded as the busiest costs e^β times an idle one
SWEEPS = 16  # rip-up-and-re-place passes over all chunks after the first placement, at most ...
PATIENCE = 4  # ... stopping after this many in a row that found no faster plan than the best
MORE_STEPS = 8  # steps tried beyond the overlay's diameter + 1
MOST_RANKS = 512  # a sweep costs about chunks·n² (chunks ∝ 1/n): 115 s at 512 ranks in all


def overlay(topology: Topology, ranks: tuple[str, ...]) -> Routes:
    """The rank pairs balanced steps use: every ordered pair whose spread route has at most h
    links and relays through no other rank, for the least h that joins all ranks (strongly
    connected). On a direct-connect network these are the ranks' own links. A route through
    another rank takes that rank's links without its taking part (DCell(3,2)'s servers with
    two direct links), where the rank itself could be the tree's inner node; such pairs are
    used only where the others do not join all ranks."""
    n = len(ranks)
    routes = all_pairs(topology, ranks)
    c = topology.compiled
    is_rank = np.zeros(c.num_nodes, dtype=bool)
    is_rank[[c.index[r] for r in ranks]] = True
    hops = routes.hops
    inner = np.ones(len(routes.links), dtype=bool)  # links that end at a relay, not at dst
    inner[routes.ptr[1:] - 1] = False
    at_rank = inner & is_rank[c.link_dst[routes.links]]
    relayed = np.bincount(np.repeat(np.arange(len(hops)), hops)[at_rank], minlength=len(hops)) > 0
    for allowed in (~relayed, np.ones(len(hops), dtype=bool)):
        for h in np.unique(hops[allowed]).tolist():
            near = allowed & (hops <= h)
            graph = sp.csr_array(
                (np.ones(int(near.sum()), dtype=np.int8), (routes.src[near], routes.dst[near])), shape=(n, n)
            )
            if connected_components(graph, directed=True, connection="strong")[0] == 1:
                return routes.subset(near)
    raise ArschedError("tree-packing: the ranks are not all joined by routes")  # routing refused earlier


@numba.njit(cache=True)
def cheapest_steps(parent: np.ndarray, height: np.ndarray, cost: np.ndarray) -> tuple[float, np.ndarray]:
    """(cost, steps) of the cheapest steps 1..R for a rooted tree's edges, a child's step before
    its parent's: f(v, s) = cost(v, s) + Σ_children min_{s' < s} f(child, s'), leaves first.
    `cost` is (nodes × R), the root's row unused; the root's step is R + 1. Compiled: it runs
    for every chunk whose Prim tree strands ranks, thousands of times per plan."""
    n, steps = cost.shape
    below = np.zeros((n, steps + 1))  # Σ over children of min_{s' ≤ j} f(child, s'), j = 0..R
    best = np.zeros((n, steps))
    top = 0
    root = 0
    for v in range(n):
        top = max(top, height[v])
        if parent[v] < 0:
            root = v
    for h in range(top):  # leaves first, each level in node order
        for v in range(n):
            if parent[v] < 0 or height[v] != h:
                continue
            p = parent[v]
            below[p, 0] += np.inf
            low = np.inf
            for s in range(steps):
                best[v, s] = cost[v, s] + below[v, s]
                low = min(low, best[v, s])
                below[p, s + 1] += low
    step = np.zeros(n, dtype=np.int64)
    step[root] = steps + 1
    for h in range(top, -1, -1):  # parents (taller) before children
        for v in range(n):
            if parent[v] >= 0 and height[v] == h:
                step[v] = int(np.argmin(best[v, : step[parent[v]] - 1])) + 1
    return float(below[root, steps]), step


@numba.njit(cache=True)
def join(parent: np.ndarray, root: int, weight: np.ndarray) -> np.ndarray:
    """`parent` with its free ranks (parent −1, not `root`) joined by Prim on `weight`
    ((n × n), rank c joining p; infinite where they are not neighbours; where the free ranks
    have no edge into the tree, they keep parent −1)."""
    n = len(parent)
    parent = parent.copy()
    free = parent < 0
    free[root] = False
    best = np.full(n, np.inf)
    via = np.zeros(n, dtype=np.int64)
    for c in range(n):
        low, at = np.inf, -1
        for p in range(n):
            if not free[p] and (at < 0 or weight[c, p] < low):
                low, at = weight[c, p], p
        via[c] = at
        if free[c]:
            best[c] = low
    for _ in range(int(free.sum())):  # one rank joins per pass
        c = int(np.argmin(best))
        if not np.isfinite(best[c]):
            return parent
        parent[c], free[c], best[c] = via[c], False, np.inf
        for v in range(n):
            if free[v] and weight[v, c] < best[v]:
                best[v], via[v] = weight[v, c], c
    return parent


def chunk_count(n: int, nbytes: float) -> int:
    """Chunks for n ranks and a vector of `nbytes`: `CHUNKS`, fewer where the 2(n − 1)
    transfers each needs would pass `TRANSFERS` or a chunk would be below `MIN_CHUNK` bytes
    (smaller pieces cost a runtime more per message than their bytes, and MSCCL allows a
    thread block 256 steps). More chunks balance the link-steps more finely."""
    return int(max(1, min(CHUNKS, TRANSFERS // (2 * (n - 1)), nbytes // MIN_CHUNK)))


@dataclass(frozen=True)
class BalancedPlan:
    """One column per chunk (parent array, reduce step of every node; the root's is R + 1),
    over the overlay's `routes`; `steps` is R and `time` the schedule's time with barriers
    (seconds: every step as long as its busiest link needs, plus its overhead)."""

    columns: list[tuple[np.ndarray, np.ndarray]]
    routes: Routes
    steps: int
    time: float


@dataclass(frozen=True)
class Network:
    """What every plan over the overlay shares: its `routes`, their `pair` index, (pairs × links)
    `use` and the links' capacities `caps` in units of `scale` bytes/s, the pairs routed both
    ways as (children, parents) `edges` with `into` (ptr, edge ids) listing each rank's edges
    from its children, and the breadth-first tree hung from every rank r, `wide_parents[r]`,
    with the heights of its nodes, `wide_heights[r]`."""

    routes: Routes
    pair: np.ndarray
    use: sp.csr_array
    caps: np.ndarray
    scale: float
    edges: tuple[np.ndarray, np.ndarray]
    into: tuple[np.ndarray, np.ndarray]
    wide_parents: np.ndarray
    wide_heights: np.ndarray

    @classmethod
    def of(cls, topology: Topology, ranks: tuple[str, ...]) -> Network:
        n = len(ranks)
        routes = overlay(topology, ranks)
        pair = routes.positions(n)
        edges = np.nonzero((pair >= 0) & (pair.T >= 0))
        wide = [hang_from(edges, n, r).astype(np.int64) for r in range(n)]
        if (wide[0] >= 0).sum() < n - 1:  # the breadth-first tree misses ranks
            raise ArschedError(
                "tree-packing: balanced steps send every tree edge both ways, and the routes used both "
                "ways do not join all ranks (a network with one-way links): use levels=false"
            )
        used = np.unique(routes.links)
        use = routes.link_matrix(topology.compiled.num_links)[:, used].tocsr()
        cap = topology.compiled.capacity[used]
        scale = float(cap.max())
        ptr = np.concatenate([[0], np.cumsum(np.bincount(edges[1], minlength=n))])
        into = (ptr, np.argsort(edges[1], kind="stable"))
        heights = np.stack([tree_heights(p) for p in wide]).astype(np.int64)
        return cls(routes, pair, use, cap / scale, scale, edges, into, np.stack(wide), heights)

    @property
    def least_steps(self) -> int:
        """The overlay's diameter + 1: every breadth-first tree fits in this many steps."""
        return int(self.wide_heights.max()) + 1


class Placer:
    """`chunks` chunks placed over R = `steps` reduce steps of `net`, one column each, under
    prices of sharpness β = `sharpness`, and the (2R × links) load they put on the link-steps
    (in chunks / capacity). Column k is row k of `parents` and `reduce_steps` (parent, reduce
    step of every rank) and the first `lengths[k]` entries of row k of `rows` (the link-steps
    it loads)."""

    def __init__(self, net: Network, steps: int, chunks: int, sharpness: float = SHARPNESS[0]) -> None:
        self.net, self.steps, self.n, self.sharpness = net, steps, len(net.pair), sharpness
        self.load = np.zeros((2 * steps, len(net.caps)))
        self.inverse = np.tile(1 / net.caps, 2 * steps)  # a chunk's load on row (s, e)
        n = self.n
        self.parents = np.full((chunks, n), -1, dtype=np.int64)
        self.reduce_steps = np.zeros((chunks, n), dtype=np.int64)
        # a column loads each route link of each of its n − 1 edges twice (up and down)
        self.rows = np.zeros((chunks, 2 * (n - 1) * int(net.routes.hops.max())), dtype=np.int64)
        self.lengths = np.zeros(chunks, dtype=np.int64)
        self.sweep()  # the first placement: chunk k under the load of the chunks before it

    @property
    def columns(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(parent, step, rows) of every column."""
        return [
            (self.parents[k], self.reduce_steps[k], self.rows[k, : self.lengths[k]])
            for k in range(len(self.lengths))
        ]

    def sweep(self) -> None:
        """Take every chunk out and place it again under the load of all the others (a chunk
        not placed yet has nothing to take out)."""
        net = self.net
        use = net.use
        _sweep(
            self.load,
            self.inverse,
            self.sharpness,
            net.caps,
            use.indptr,
            use.indices,
            use.data,
            net.pair,
            *net.edges,
            *net.into,
            net.wide_parents,
            net.wide_heights,
            len(net.caps),
            self.parents,
            self.reduce_steps,
            self.rows,
            self.lengths,
        )

    def _state(self) -> tuple[np.ndarray, ...]:
        return tuple(a.copy() for a in (self.parents, self.reduce_steps, self.rows, self.lengths, self.load))

    def polish(self, nbytes: float, overhead: float, sweeps: int) -> None:
        """Up to `sweeps` sweeps, keeping the fastest placement seen (a sweep re-places every
        chunk under the others' current load, so a pass can undo what the last one gained):
        stops after `PATIENCE` sweeps in a row without a faster one."""
        best = (self.time(nbytes, overhead), self._state())
        idle = 0
        for _ in range(sweeps):
            if idle >= PATIENCE:
                break
            self.sweep()
            t = self.time(nbytes, overhead)
            if t < best[0]:
                best, idle = (t, self._state()), 0
            else:
                idle += 1
        self.parents, self.reduce_steps, self.rows, self.lengths, self.load = best[1]

    def time(self, nbytes: float, overhead: float) -> float:
        """The time with barriers for `nbytes`: every step as long as its busiest link needs,
        plus `overhead` seconds."""
        per_step = self.load.max(axis=1) * nbytes / len(self.lengths) / self.net.scale
        return float(per_step.sum() + (per_step > 0).sum() * overhead)

    def plan(self, nbytes: float, overhead: float) -> BalancedPlan:
        """The plan, with its time with barriers."""
        columns = [(p, s) for p, s, _ in self.columns]
        return BalancedPlan(columns, self.net.routes, self.steps, self.time(nbytes, overhead))


@numba.njit(cache=True)
def _sweep(
    load, inverse, sharpness, caps, indptr, indices, data, pair, u, v, into_ptr, into_edge,
    wide_parents, wide_heights, num_links, parents, reduce_steps, rows, lengths,
):  # pragma: no cover - compiled  # fmt: skip
    """`Placer.sweep`, compiled (one call per sweep, not per chunk: the calls cost more than
    the placements on networks of 30 ranks): chunk k (rooted at rank k mod n) in turn is taken
    off `load` and placed again, the Prim tree under the current prices (`_placement`; where
    Prim strands ranks, that tree with the stranded ranks joined by their cheapest edges and
    every step chosen again by `cheapest_steps`, or the breadth-first tree from the root if
    that is taller than R), its column written into `parents`, `reduce_steps`, `rows` and
    `lengths`. A link-step costs exp(β · load / highest load) / capacity, taken again only
    where the load moved unless the highest load moved (every price then): the same numbers as
    taking them all each time, at a fraction of the exponentials; numba's exp is numpy's to the
    bit on the machines measured (a test holds a sweep to the chunk-by-chunk placement under
    numpy's prices)."""
    n = len(pair)
    flat = load.reshape(-1)
    weight = np.empty_like(load)
    prices = weight.reshape(-1)
    top = -1.0  # the highest load the weights were taken at (none yet)
    placed = np.empty(0, dtype=np.int64)
    for k in range(len(lengths)):
        old = rows[k, : lengths[k]]
        _add(flat, old, inverse, -1.0)
        high = max(load.max(), 1e-300)
        if high != top:  # every price moves
            for i in range(len(flat)):
                prices[i] = np.exp(sharpness * (flat[i] / high))
            top = high
        else:  # only the link-steps of the last chunk placed and of this one's old column moved
            for i in placed:
                prices[i] = np.exp(sharpness * (flat[i] / high))
            for i in old:
                prices[i] = np.exp(sharpness * (flat[i] / high))
        root = k % n
        parent, step, placed = _placement(
            weight, caps, load, inverse, indptr, indices, data, pair, u, v, into_ptr, into_edge, root,
            wide_parents[root], wide_heights[root], num_links,
        )  # fmt: skip
        parents[k] = parent
        reduce_steps[k] = step
        lengths[k] = len(placed)
        rows[k, : len(placed)] = placed


@numba.njit(cache=True)
def _placement(
    exponential,
    caps,
    load,
    inverse,
    indptr,
    indices,
    data,
    pair,
    u,
    v,
    into_ptr,
    into_edge,
    root,
    wide_parent,
    wide_height,
    num_links,
):  # pragma: no cover - compiled
    """(parent, step, rows) of a chunk placed from `root` under link-step weights `exponential` / `caps`,
    its rows added to `load`: `_costs`, `prim`, `_restep` where Prim strands ranks, `_rows`."""
    price, cost, prefix = _costs(exponential / caps, indptr, indices, data, pair, u, v)
    parent, step, complete = prim(cost, prefix, root, u, v, into_ptr, into_edge)
    if not complete:
        parent, step = _restep(parent, root, price, prefix, pair, wide_parent, wide_height, u, v)
    rows = _rows(parent, step, prefix.shape[1], pair, indptr, indices, num_links)
    _add(load.reshape(-1), rows, inverse, 1.0)
    return parent, step, rows


@numba.njit(cache=True)
def _add(flat, rows, inverse, sign):  # pragma: no cover - compiled
    """flat[rows[i]] += sign·inverse[rows[i]], in order (np.add.at's sums, bit for bit)."""
    for r in rows:
        flat[r] += sign * inverse[r]


@numba.njit(cache=True)
def _restep(parent, root, price, prefix, pair, wide_parent, wide_height, u, v):  # pragma: no cover - compiled
    """(parent, step) of a stranded Prim tree: its free ranks `join`ed at their cheapest step
    (the overlay joins all ranks both ways, `Network.of`, so they all join), or the
    breadth-first tree from `root` (`wide_*`) where that is taller than R, and every edge's step
    chosen again by `cheapest_steps` under the (2R × pairs) `price`; `prefix` is per edge
    (u[e] joining v[e]), as `_costs` gives it."""
    steps = prefix.shape[1]
    weight = np.full((len(parent), len(parent)), np.inf)
    for e in range(len(u)):
        weight[u[e], v[e]] = prefix[e, steps - 1]
    parent = join(parent, root, weight)
    height = tree_heights(parent)
    if height[root] > steps:
        parent, height = wide_parent, wide_height
    cost = np.zeros((len(parent), steps))
    for c in range(len(parent)):
        p = parent[c]
        if p >= 0:
            for s in range(steps):
                cost[c, s] = price[s, pair[c, p]] + price[2 * steps - 1 - s, pair[p, c]]
    return parent, cheapest_steps(parent, height, cost)[1]


@numba.njit(cache=True)
def _costs(weight, indptr, indices, data, pair, u, v):
    """(price, cost, prefix) of a chunk's placement (`_sweep`): the (2R × pairs) prices, Σ over each pair's
    route of `weight` (a link-step's exp(β·load / highest load) / capacity, summed in the
    route's order as scipy's product does); the (edges × R) costs of rank c = u[e] joining
    parent p = v[e] at step s (later steps a hair cheaper among equals); and their prefix
    minimum over steps. Per overlay edge, not per rank pair: a 256-rank network has a few
    thousand edges against 65,536 pairs. Compiled: it runs once per chunk placed, tens of
    thousands of times per plan."""
    rows, num_pairs = weight.shape[0], len(indptr) - 1
    steps = rows // 2
    price = np.zeros((rows, num_pairs))
    for q in range(num_pairs):
        for k in range(indptr[q], indptr[q + 1]):
            a, j = data[k], indices[k]
            for r in range(rows):
                price[r, q] += a * weight[r, j]
    cost = np.empty((len(u), steps))
    prefix = np.empty((len(u), steps))
    for e in range(len(u)):
        c, p = u[e], v[e]
        up, down = pair[c, p], pair[p, c]
        low = np.inf
        for s in range(steps):
            x = (price[s, up] + price[rows - 1 - s, down]) - 1e-12 * (s + 1)
            cost[e, s] = x
            low = min(low, x)
            prefix[e, s] = low
    return price, cost, prefix


@numba.njit(cache=True)
def _rows(parent, step, steps, pair, indptr, indices, num_links):
    """The (step, link) rows a column loads, one per link of every route: each edge up at its
    step, down at the mirrored one of R = `steps` (every edge up, then every edge down, kids in
    order)."""
    n = len(parent)
    count = 0
    for x in range(n):
        if parent[x] >= 0:
            count += indptr[pair[x, parent[x]] + 1] - indptr[pair[x, parent[x]]]
            count += indptr[pair[parent[x], x] + 1] - indptr[pair[parent[x], x]]
    out = np.empty(count, dtype=np.int64)
    i = 0
    for down in range(2):
        for x in range(n):
            if parent[x] < 0:
                continue
            q = pair[parent[x], x] if down else pair[x, parent[x]]
            at = 2 * steps - step[x] if down else step[x] - 1
            for k in range(indptr[q], indptr[q + 1]):
                out[i] = at * num_links + indices[k]
                i += 1
    return out


@numba.njit(cache=True)
def prim(
    cost: np.ndarray,
    prefix: np.ndarray,
    root: int,
    u: np.ndarray,
    v: np.ndarray,
    into_ptr: np.ndarray,
    into_edge: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(parent, step, complete) of a tree grown from `root` down under `_costs`' per-edge `cost`
    and `prefix` (edge e: rank u[e] joining parent v[e]; `into_ptr`, `into_edge` list every
    rank's edges from its children): the free rank whose cheapest (parent in the tree, step
    before the parent's) costs least joins there; among equal costs the latest step, which
    leaves room for children. Where the ranks left have no such parent (their neighbours in the
    tree all at step 1): the tree so far, the free ranks' parents −1, and not complete.
    Compiled: it runs once per chunk placed, thousands of times per plan, and a rank at a time."""
    n, steps = len(into_ptr) - 1, cost.shape[1]
    parent, step = np.full(n, -1), np.zeros(n, dtype=np.int64)
    step[root] = steps + 1
    free = np.ones(n, dtype=np.bool_)
    free[root] = False
    best = np.full(n, np.inf)  # ranks in the tree cost infinity: argmin finds the free ones
    via = np.full(n, -1)  # the edge of each free rank's cheapest parent
    for k in range(into_ptr[root], into_ptr[root + 1]):
        e = into_edge[k]
        best[u[e]], via[u[e]] = prefix[e, steps - 1], e
    for _ in range(n - 1):
        c = int(np.argmin(best))
        if not np.isfinite(best[c]):
            return parent, step, False
        e = via[c]
        p = parent[c] = v[e]
        step[c] = int(np.argmin(cost[e, : step[p] - 1])) + 1
        free[c] = False
        best[c] = np.inf
        if step[c] > 1:
            for k in range(into_ptr[c], into_ptr[c + 1]):
                e = into_edge[k]
                x = u[e]
                if free[x] and prefix[e, step[c] - 2] < best[x]:
                    best[x], via[x] = prefix[e, step[c] - 2], e
    return parent, step, True


def balance(
    topology: Topology, ranks: tuple[str, ...], nbytes: float, overhead: float, chunks: int | None = None
) -> BalancedPlan:
    """The balanced plan of `chunks` chunks (default `chunk_count`; chunk k rooted at rank
    k mod n) over the `overlay`'s pairs, each step costing `overhead` seconds besides its bytes.

    R is the fastest with barriers (after one sweep, at the first `SHARPNESS`) from the
    overlay's diameter + 1 (every breadth-first tree fits) to `MORE_STEPS` more: more steps give
    leaves more room to wait (deep trees need them) and cost a step's overhead each, and the
    time is not monotone in R (on an MI250 box it rises for several steps before it falls well
    below its first value), so every R is tried. That placement gets the rest of its `SWEEPS`,
    the other sharpnesses place the plan again at that R with all of theirs, and the fastest
    is kept (on a tie the first). More than `MOST_RANKS` ranks are refused (NotApplicable) before
    any work: the placement's time grows with the ranks (docs/results.md, "Tree packing at
    scale")."""
    if len(ranks) > MOST_RANKS:
        raise NotApplicable(
            f"tree-packing places balanced steps over at most {MOST_RANKS} ranks (their placement "
            f"takes minutes there), not {len(ranks)}"
        )
    net = Network.of(topology, ranks)
    chunks = chunk_count(len(ranks), nbytes) if chunks is None else chunks

    def placed(steps: int, sharpness: float, sweeps: int) -> tuple[float, Placer]:
        placer = Placer(net, steps, chunks, sharpness)
        placer.polish(nbytes, overhead, sweeps)
        return placer.time(nbytes, overhead), placer

    first = net.least_steps
    scan = min((placed(r, SHARPNESS[0], 1) for r in range(first, first + MORE_STEPS + 1)), key=lambda x: x[0])
    placer = scan[1]
    placer.polish(nbytes, overhead, SWEEPS - 1)
    others = (placed(placer.steps, beta, SWEEPS) for beta in SHARPNESS[1:])
    best = min([(placer.time(nbytes, overhead), placer), *others], key=lambda x: x[0])[1]
    return best.plan(nbytes, overhead)


def add_balanced(b: ScheduleBuilder, plan: BalancedPlan) -> None:
    """Chunk i up column i's tree at its steps and back down at the mirrored ones, on the
    overlay's routes."""
    ids = intern(b, plan.routes, plan.routes.src, plan.routes.dst)
    kids = [np.flatnonzero(parent >= 0) for parent, _ in plan.columns]
    chunk = np.repeat(np.arange(len(kids)), [len(k) for k in kids])
    up = np.concatenate(kids)
    down = np.concatenate([parent[k] for (parent, _), k in zip(plan.columns, kids, strict=True)])
    at = np.concatenate([step[k] for (_, step), k in zip(plan.columns, kids, strict=True)])
    b.add_rank_arrays(at - 1, chunk, up, down, "reduce", ids[up, down])
    b.add_rank_arrays(2 * plan.steps - at, chunk, down, up, "copy", ids[down, up])
