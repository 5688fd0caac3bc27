"""AllGather and ReduceScatter as shortest-path trees placed level by level, for networks with
one-way or unequal links as much as for symmetric ones: no pipeline, each chunk crosses its tree
once, and every link about as busy in every step (the balanced steps of `balanced`, which need
every tree edge both ways, for the sharded collectives alone).

Chunk k of rank r's shard is copied (AllGather) down an out-tree from r in which a rank at
distance d from r over the `overlay` receives it in step d − 1, or summed (ReduceScatter) up an
in-tree into r in which a rank at distance d to r adds into its parent in step R − d (R the
largest such distance, so that children add before their parents). The trees are shortest-path
trees: a rank's parent is one of its neighbours one step nearer the root. Which one is chosen
greedily, chunk by chunk and rank by rank in order of distance, as the neighbour whose route's
busiest link in that step would be least busy (ties: the smaller sum, then the lower rank), and
`SWEEPS` − 1 more passes take every chunk out and place it again under the others' load. On
vertex-transitive networks (tori, rings, also one-way ones) shortest-path trees exist whose
levels load every link alike, so the time comes within the steps' overhead of the bound; a ring
of chunks from every rank at once is the special case of a cycle.

The number of chunks per rank is `PER_RANK` at most (fewer where chunks would fall below
`MIN_CHUNK` bytes): the loads of a link in a step are whole chunks, so more chunks balance them
more finely. The placement is refused above `MAX_PLACEMENTS` rank placements (chunks × ranks ×
sweeps): it is a Python loop, meant for the tens of ranks where pipelines of deep trees fall
short.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import shortest_path

from arsched.algorithms.packing.balanced import MIN_CHUNK, overlay
from arsched.algorithms.registry import NotApplicable
from arsched.algorithms.routes import Routes, intern
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology

NAME = "tree-packing"
PER_RANK = 32  # chunks of every shard at most
SWEEPS = 3
MAX_PLACEMENTS = 300_000


def level_schedule(collective: str, topology: Topology, ranks: tuple[str, ...], nbytes: float) -> Schedule:
    """The level-placed trees of `collective` ('allgather' or 'reduce_scatter'); see the module
    docstring."""
    n = len(ranks)
    per = int(max(1, min(PER_RANK, nbytes // n // MIN_CHUNK)))
    if n * per * n * SWEEPS > MAX_PLACEMENTS:
        raise NotApplicable(f"{NAME}: level placement is limited to {MAX_PLACEMENTS} rank placements")
    routes = overlay(topology, ranks)
    out = collective == "allgather"
    parent, depth = _place(routes, topology, n, per, out)
    steps = int(depth.max())
    meta = {"params": {"levels": True}, "level_steps": steps, "trees": "shortest paths"}
    b = ScheduleBuilder(topology, ranks, nbytes, n * per, NAME, meta, collective=collective)
    chunk, child = np.nonzero(parent >= 0)
    up = parent[chunk, child]
    src, dst = (up, child) if out else (child, up)
    step = depth[chunk, child] - 1 if out else steps - depth[chunk, child]
    paths = intern(b, routes, src, dst)
    b.add_rank_arrays(step, chunk, src, dst, "copy" if out else "reduce", paths[src, dst])
    return b.build()


def _place(routes: Routes, topology: Topology, n: int, per: int, out: bool) -> tuple[np.ndarray, np.ndarray]:
    """(chunks × ranks) parent (−1 at the root) and distance to or from the root of every chunk's
    tree, chunk r·per + j rooted at rank r."""
    pair = routes.positions(n)
    arcs = (pair >= 0).astype(float)
    dist = shortest_path(np.ascontiguousarray(arcs if out else arcs.T), unweighted=True).astype(np.int64)
    # dist[root, v]: from the root (out-trees) or to it (in-trees)
    steps = int(dist.max())
    weight = 1.0 / topology.compiled.capacity
    links = [routes.links_of(i) for i in range(len(routes.src))]
    load = np.zeros((steps, topology.compiled.num_links))
    chunks = n * per
    parent = np.full((chunks, n), -1, dtype=np.int64)
    depth = np.zeros((chunks, n), dtype=np.int64)
    # every root's ranks by distance, and each rank's candidate parents one step nearer
    order = [np.argsort(dist[r], kind="stable")[1:] for r in range(n)]
    linked = pair >= 0 if out else pair.T >= 0  # linked[u, v]: u can be v's parent
    near = [[np.flatnonzero((dist[r] == dist[r, v] - 1) & linked[:, v]) for v in range(n)] for r in range(n)]
    for sweep in range(SWEEPS):
        for k in range(chunks):
            r = k // per
            if sweep:
                _put(load, weight, links, pair, parent[k], dist[r], out, steps, -1.0)
            for v in order[r].tolist():
                s = _row(dist[r, v], out, steps)
                best, best_key = -1, (np.inf, np.inf)
                for u in near[r][v].tolist():
                    use = links[pair[u, v] if out else pair[v, u]]
                    after = load[s, use] + weight[use]
                    key = (float(after.max()), float(after.sum()))
                    if key < best_key:
                        best, best_key = u, key
                parent[k, v] = best
                use = links[pair[best, v] if out else pair[v, best]]
                load[s, use] += weight[use]
            depth[k] = dist[r]
    return parent, depth


def _row(d: int, out: bool, steps: int) -> int:
    """The load row (step) of a transfer between distances d − 1 and d."""
    return d - 1 if out else steps - d


def _put(
    load: np.ndarray,
    weight: np.ndarray,
    links: list[np.ndarray],
    pair: np.ndarray,
    parent: np.ndarray,
    dist: np.ndarray,
    out: bool,
    steps: int,
    sign: float,
) -> None:
    """Add (`sign` 1) or take out (−1) one tree's load."""
    for v in np.flatnonzero(parent >= 0).tolist():
        u = int(parent[v])
        use = links[pair[u, v] if out else pair[v, u]]
        load[_row(int(dist[v]), out, steps), use] += sign * weight[use]
