"""Flow trees and their round engine: the workload representation of the hierarchical-RL
paper (arXiv 2503.21013), shared by `greedy-trees` (greedy_trees.py) and `hrl` (arsched.rl).

Chunk c is reduced up a tree over the ranks rooted at some rank (a node forwards its partial
sum to its parent once all its children's flows arrived: the paper's *merge*) and the result
is copied back down the same tree. A *flow* is one chunk moving along one tree edge, on the
routed path between the two ranks. Scheduling proceeds in rounds: in the paper's rounds a
directed link carries at most one flow per round (`hrl` may also release flows that share
links, which the flow model then shares). `FlowTreeEngine` holds the state (which flows are available, which
conflict, which ran) and turns the rounds it executes into a `Schedule` (one step per round).
This module builds the trees (`build_trees`, one of the `SHAPES`) and runs the rounds it is
given; which flows go into a round is the scheduler's choice (greedy_trees.py, arsched.rl).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from arsched.algorithms.routes import all_pairs, route
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology

REDUCE, BROADCAST = 0, 1


@dataclass(frozen=True)
class FlowTree:
    """One chunk's tree: `parent[i]` is the parent rank index of rank i (−1 at the root)."""

    chunk: int
    root: int
    parent: np.ndarray


LOAD_AWARE_LIMIT = 128  # above this many ranks, ties are broken by index only
BALANCED_LIMIT = 64  # above this many ranks, "balanced"/"spt" fall back to "bfs" (cost n² per edge)
SHAPES = ("spt", "shallow", "balanced", "chain", "bfs")


def build_trees(
    topology: Topology,
    ranks: Sequence[str],
    num_chunks: int,
    fanout: int | None = None,
    shape: str = "bfs",
    order: Sequence[int] | None = None,
) -> list[FlowTree]:
    """One tree per chunk, rooted at rank c mod N, of one of the `SHAPES`:

    - "bfs": ranks join nearest first (fewest hops to a member with room for one more child);
      among the nearest, the edge whose paths cross the least-loaded links so far wins; one
      shape per root, shared by that root's chunks.
    - "balanced": every chunk gets its own tree, grown one edge at a time; the next edge is the
      one whose up and down paths leave the busiest of their links least loaded (over all
      trees so far), then the one that puts the new rank fewest hops below the root: the
      round model's bound is a link-load bound, so the trees spread the load.
    - "shallow": the same, but the edge minimising that load plus the new rank's hops below
      the root, trading a little balance for depth (a depth-d tree needs 2d rounds per chunk).
    - "spt": every chunk gets its own shortest-path tree: each rank's parent is a nearest rank
      one step closer to the root on a shortest path, the one whose paths leave the busiest
      of their links least loaded. On BCube these are the trees of its dimension-ordered
      AllReduce (`bcube-native`), as shallow as the network allows, with the order of the
      dimensions spread over the chunks.
    - "chain": chunk c is a path along the cyclic rank `order` (indices into `ranks`) ending at
      its root, every other root's chunks running the other way round: the ring's reduce-
      scatter as flow trees (bandwidth-optimal on one-port networks).

    In "bfs", "balanced" and "shallow" trees a member takes at most `fanout` children (default: for "bfs"
    its ports, at least 2; for "balanced" no limit, since a parent receives its children one
    per round per port anyway)."""
    n = len(ranks)
    if shape == "chain":
        if order is None or sorted(order) != list(range(n)):
            raise ArschedError("chain trees need a cyclic order of all the ranks")
        return _chain_trees(np.asarray(order), num_chunks)
    if shape not in SHAPES:
        raise ArschedError(f"unknown tree shape {shape!r}: use one of {', '.join(SHAPES)}")
    hops = topology.router.hop_matrix(ranks).astype(np.float64)
    if (hops < 0).any():
        raise ArschedError(f"some ranks of {topology.name} cannot reach each other")
    if shape == "spt" and n <= BALANCED_LIMIT:
        return _spt_trees(num_chunks, hops, pair_links(topology, ranks))
    if shape in ("balanced", "shallow") and n <= BALANCED_LIMIT:
        cap = np.full(n, n if fanout is None else fanout)
        return _balanced_trees(num_chunks, hops, cap, pair_links(topology, ranks), shape == "shallow")
    ports = np.array([topology.ports(r) for r in ranks])
    cap = np.maximum(ports, 2) if fanout is None else np.full(n, fanout)
    return _bfs_trees(topology, ranks, num_chunks, hops, cap)


def _chain_trees(order: np.ndarray, num_chunks: int) -> list[FlowTree]:
    n = len(order)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    trees = []
    for chunk in range(num_chunks):
        root = chunk % n
        way = order if (chunk // n) % 2 == 0 else order[::-1]
        p = int(np.flatnonzero(way == root)[0])
        parent = np.full(n, -1)
        ring = np.roll(way, -p)  # ring[0] is the root
        parent[ring[1:]] = np.roll(ring, -1)[1:]
        trees.append(FlowTree(chunk, root, parent))
    return trees


def pair_links(topology: Topology, ranks: Sequence[str]) -> np.ndarray:
    """(n, n, width): the links of the default routes a→b and then b→a of every rank pair,
    padded with the index `num_links` (a link whose load stays 0)."""
    n = len(ranks)
    routes = all_pairs(topology, ranks, spread=False)
    pair = routes.positions(n)
    hops = routes.hops
    width = int((hops[pair[routes.src, routes.dst]] + hops[pair[routes.dst, routes.src]]).max())
    both = np.full((n, n, width), topology.compiled.num_links, dtype=np.int64)
    for a, b in zip(routes.src.tolist(), routes.dst.tolist(), strict=True):
        there, back = routes.links_of(pair[a, b]), routes.links_of(pair[b, a])
        both[a, b, : len(there)] = there
        both[a, b, len(there) : len(there) + len(back)] = back
    return both


def _grown_trees(
    num_chunks: int, n: int, both: np.ndarray, grow: Callable[[int, np.ndarray], np.ndarray]
) -> list[FlowTree]:
    """One tree per chunk, rooted at rank chunk mod n, whose parent array `grow(root, load)`
    builds; it adds every attachment's links (both directions) to the load shared by all the
    trees, so that later trees avoid them (its last entry pads `both` and stays 0)."""
    load = np.zeros(both.max() + 1)
    return [FlowTree(chunk, chunk % n, grow(chunk % n, load)) for chunk in range(num_chunks)]


def _balanced_trees(
    num_chunks: int, hops: np.ndarray, cap: np.ndarray, both: np.ndarray, shallow: bool
) -> list[FlowTree]:
    room = cap.astype(np.int64)

    def grow(root: int, load: np.ndarray) -> np.ndarray:
        return _grow(root, load, hops, room, both, shallow)

    return _grown_trees(num_chunks, len(hops), both, grow)


@numba.njit(cache=True)
def _grow(root, load, hops, room, both, shallow):  # pragma: no cover - compiled
    """A "balanced" (or "shallow") tree from `root`, one edge at a time (see `build_trees`):
    among the pairs of a rank v outside and a member u with `room` for a child, the least
    (busiest link's load, hops below the root, load summed over the paths), or for "shallow"
    (busiest load + hops below the root, load summed), then the least v, then u; the edge's
    paths' links are loaded by one (`load`'s last entry pads `both` and stays 0). Compiled: it
    weighs every pair for every rank added, for every chunk (the loads are whole numbers, so
    the keys are exact and any summing order gives the same tree)."""
    n = len(hops)
    parent = np.full(n, -1, dtype=np.int64)
    inside = np.zeros(n, dtype=np.bool_)
    inside[root] = True
    room = room.copy()
    depth = np.zeros(n)  # hops below the root
    pad = len(load) - 1
    for _ in range(n - 1):
        best = np.full(3, np.inf)
        bv, bu = -1, -1
        for v in range(n):
            if inside[v]:
                continue
            for u in range(n):
                if not inside[u] or room[u] <= 0:
                    continue
                total, top = 0.0, 0.0
                for lk in both[v, u]:
                    total += load[lk]
                    top = max(top, load[lk])
                d = depth[u] + hops[v, u]
                key = (top + d, total, 0.0) if shallow else (top, d, total)
                if key[0] < best[0] or (
                    key[0] == best[0] and (key[1] < best[1] or (key[1] == best[1] and key[2] < best[2]))
                ):
                    best[0], best[1], best[2] = key
                    bv, bu = v, u
        parent[bv] = bu
        depth[bv] = depth[bu] + hops[bv, bu]
        inside[bv] = True
        room[bu] -= 1
        for lk in both[bv, bu]:
            if lk != pad:
                load[lk] += 1
    return parent


def _spt_trees(num_chunks: int, hops: np.ndarray, both: np.ndarray) -> list[FlowTree]:
    n = len(hops)
    order = [np.lexsort((np.arange(n), hops[:, root])) for root in range(n)]

    def grow(root: int, load: np.ndarray) -> np.ndarray:
        return _grow_spt(root, order[root], load, hops, both)

    return _grown_trees(num_chunks, n, both, grow)


@numba.njit(cache=True)
def _grow_spt(root, order, load, hops, both):  # pragma: no cover - compiled
    """A shortest-path tree from `root` (see `build_trees`, "spt"): ranks in `order` (nearest
    the root first, then by index) take as parent one of the nearest ranks one step closer on
    a shortest path, the one of least (busiest link's load, load summed over its paths, index);
    each distinct link of the edge's paths is loaded by one (`load`'s last entry pads `both`
    and stays 0). Compiled: it weighs every candidate parent for every rank of every chunk's
    tree (the loads are whole numbers, so the keys are exact)."""
    n = len(hops)
    pad = len(load) - 1
    parent = np.full(n, -1, dtype=np.int64)
    for i in range(1, n):
        v = order[i]
        near = np.inf
        for u in range(n):
            if hops[u, root] < hops[v, root] and hops[u, root] + hops[v, u] == hops[v, root]:
                near = min(near, hops[v, u])
        best_top, best_total, bu = np.inf, np.inf, -1
        for u in range(n):
            if (
                hops[u, root] < hops[v, root]
                and hops[u, root] + hops[v, u] == hops[v, root]
                and hops[v, u] == near
            ):
                total, top = 0.0, 0.0
                for lk in both[v, u]:
                    total += load[lk]
                    top = max(top, load[lk])
                if top < best_top or (top == best_top and total < best_total):
                    best_top, best_total, bu = top, total, u
        parent[v] = bu
        links = both[v, bu]
        for j in range(len(links)):
            lk = links[j]
            seen = False
            for k in range(j):
                seen = seen or links[k] == lk
            if lk != pad and not seen:  # each distinct link once
                load[lk] += 1
    return parent


def _bfs_trees(
    topology: Topology, ranks: Sequence[str], num_chunks: int, hops: np.ndarray, cap: np.ndarray
) -> list[FlowTree]:
    n = len(ranks)
    load = np.zeros(topology.compiled.num_links)
    if n <= LOAD_AWARE_LIMIT:
        routes = all_pairs(topology, ranks, spread=False)
        pair = routes.positions(n)

    def path_links(a: int, b: int) -> np.ndarray:
        return routes.links_of(pair[a, b])

    shapes: dict[int, np.ndarray] = {}
    trees = []
    for chunk in range(num_chunks):
        root = chunk % n
        if root not in shapes:
            parent = np.full(n, -1)
            inside = np.zeros(n, dtype=bool)
            inside[root] = True
            room = cap.astype(np.int64).copy()
            for _ in range(n - 1):
                d = np.where((inside & (room > 0))[None, :] & ~inside[:, None], hops, np.inf)
                vs, us = np.nonzero(d == d.min())
                if n <= LOAD_AWARE_LIMIT and len(vs) > 1:
                    score = [
                        load[path_links(v, u)].sum() + load[path_links(u, v)].sum()
                        for v, u in zip(vs, us, strict=True)
                    ]
                    pick = int(np.argmin(score))
                else:
                    pick = 0
                v, u = int(vs[pick]), int(us[pick])
                parent[v] = u
                inside[v] = True
                room[u] -= 1
                if n <= LOAD_AWARE_LIMIT:
                    load[path_links(v, u)] += 1
                    load[path_links(u, v)] += 1
            shapes[root] = parent
        trees.append(FlowTree(chunk, root, shapes[root]))
    return trees


class FlowTreeEngine:
    """Round-by-round state of a set of flow trees (one per chunk) over a topology.

    Flow f has `flow_chunk[f]`, `flow_kind[f]` (REDUCE up or BROADCAST down), `flow_src[f]`,
    `flow_dst[f]` (rank indices) and `flow_tree[f]`; its links are `links_of(f)` (also as a
    tuple, `link_tuple(f)`, and as row f of `link_matrix`, padded with the index num_links).
    """

    def __init__(
        self,
        topology: Topology,
        ranks: Sequence[str],
        nbytes: float,
        trees: Sequence[FlowTree],
        algorithm: str = "flow-trees",
    ) -> None:
        self.topology = topology
        self.ranks = tuple(ranks)
        self.nbytes = float(nbytes)
        self.trees = list(trees)
        self.algorithm = algorithm
        n = len(self.ranks)
        num_links = topology.compiled.num_links
        chunk, kind, src, dst, tree = [], [], [], [], []
        for t, tr in enumerate(self.trees):
            for v in np.flatnonzero(tr.parent >= 0).tolist():
                p = int(tr.parent[v])
                chunk += [tr.chunk, tr.chunk]
                kind += [REDUCE, BROADCAST]
                src += [v, p]
                dst += [p, v]
                tree += [t, t]
        self.flow_chunk = np.array(chunk, dtype=np.int64)
        self.flow_kind = np.array(kind, dtype=np.int64)
        self.flow_src = np.array(src, dtype=np.int64)
        self.flow_dst = np.array(dst, dtype=np.int64)
        self.flow_tree = np.array(tree, dtype=np.int64)
        routes = route(topology, self.ranks, self.flow_src, self.flow_dst, spread=False)
        of_flow = routes.index(self.flow_src, self.flow_dst, n).tolist()
        paths = {q: routes.path(q, topology, self.ranks) for q in set(of_flow)}
        self.paths = [paths[q] for q in of_flow]
        self._links = [routes.links_of(q) for q in of_flow]
        self._tuples = [tuple(lk.tolist()) for lk in self._links]
        f = len(chunk)
        width = max((len(lk) for lk in self._links), default=0)
        self.link_matrix = np.full((f, width), num_links, dtype=np.int64)
        for i, lk in enumerate(self._links):
            self.link_matrix[i, : len(lk)] = lk
        # waiting counts: a reduce from v waits for v's children's reduces; a broadcast to v
        # waits for the broadcast into its source (or, at the root, for all reduces into it)
        self._pending_children = np.zeros((len(self.trees), n), dtype=np.int64)
        for t, tr in enumerate(self.trees):
            np.add.at(self._pending_children[t], tr.parent[tr.parent >= 0], 1)
        self._reduce_of = {
            (int(self.flow_tree[i]), int(self.flow_src[i])): i for i in range(f) if kind[i] == REDUCE
        }
        self._bcast_from: dict[tuple[int, int], list[int]] = {}
        for i in range(f):
            if kind[i] == BROADCAST:
                self._bcast_from.setdefault((int(self.flow_tree[i]), int(self.flow_src[i])), []).append(i)
        self._initial_pending = self._pending_children.copy()
        self._initial_available = np.zeros(f, dtype=bool)
        for t, tr in enumerate(self.trees):
            for v in range(n):
                if tr.parent[v] >= 0 and self._pending_children[t, v] == 0:
                    self._initial_available[self._reduce_of[(t, v)]] = True
            if self._pending_children[t, tr.root] == 0:  # a one-rank tree: nothing to reduce
                self._initial_available[self._bcast_from.get((t, tr.root), [])] = True
        self.reset()

    def reset(self) -> None:
        """Back to the start: no flow ran, the leaves' reduces are available (the RL
        environments reuse one engine per topology across episodes)."""
        self._pending_children = self._initial_pending.copy()
        self.available = self._initial_available.copy()
        self.done = np.zeros(self.num_flows, dtype=bool)
        self.rounds: list[np.ndarray] = []

    @property
    def num_flows(self) -> int:
        return len(self.flow_chunk)

    @property
    def finished(self) -> bool:
        return bool(self.done.all())

    def links_of(self, f: int) -> np.ndarray:
        return self._links[f]

    def link_tuple(self, f: int) -> tuple[int, ...]:
        return self._tuples[f]

    def conflict_free(self, flows: Sequence[int]) -> bool:
        """True if no two of the flows share a directed link."""
        links = np.concatenate([self._links[f] for f in flows]) if len(flows) else np.zeros(0, int)
        return len(np.unique(links)) == len(links)

    def execute(self, flows: Sequence[int], exclusive: bool = True) -> None:
        """Run available flows as one round (merges happen after it); `exclusive` (the paper's
        rounds) requires them pairwise conflict-free, otherwise flows of a round may share links
        (the flow model shares them; the round only orders each connection's steps)."""
        flows = sorted({int(f) for f in flows})
        if not flows:
            raise ArschedError("a round needs at least one flow")
        if not all(0 <= f < self.num_flows and self.available[f] for f in flows):
            raise ArschedError("a flow of the round is not available")
        if exclusive and not self.conflict_free(flows):
            raise ArschedError("two flows of the round share a directed link")
        self.available[flows] = False
        self.done[flows] = True
        self.rounds.append(np.array(flows, dtype=np.int64))
        for f in flows:
            t, b = int(self.flow_tree[f]), int(self.flow_dst[f])
            if self.flow_kind[f] == REDUCE:
                self._pending_children[t, b] -= 1
                if self._pending_children[t, b] == 0:
                    tr = self.trees[t]
                    if b == tr.root:
                        self.available[self._bcast_from.get((t, b), [])] = True
                    else:
                        self.available[self._reduce_of[(t, b)]] = True
            else:
                self.available[self._bcast_from.get((t, b), [])] = True

    def schedule(self, meta: dict | None = None) -> Schedule:
        """The executed rounds as a Schedule, round k being step k."""
        if not self.finished:
            raise ArschedError("the flow trees are not finished: some flows never ran")
        chunks = len(self.trees)
        b = ScheduleBuilder(self.topology, self.ranks, self.nbytes, chunks, self.algorithm, meta)
        for step, flows in enumerate(self.rounds):
            for f in flows.tolist():
                op = "reduce" if self.flow_kind[f] == REDUCE else "copy"
                b.add(
                    step,
                    int(self.flow_chunk[f]),
                    self.ranks[self.flow_src[f]],
                    self.ranks[self.flow_dst[f]],
                    op,
                    self.paths[f],
                )
        return b.build()
