"""The server diameter of a topology (the most hops between two servers), within a bounded work.

All-pairs BFS from every server costs servers × (nodes + links) and, done at once, a servers ×
nodes matrix: 2.3 GB and minutes on a 16,000-host fat-tree. Instead, eccentricity bounds (Takes
and Kosters, "Determining the diameter of small world networks", CIKM'11), restricted to
servers: with e(v) the most hops from v to any server, a BFS from any node v (server or switch)
and one to it give, for every server w,

    max(d(w, v) if v is a server, e(v) - d(v, w))  <=  e(w)  <=  d(w, v) + e(v)

and the diameter is the largest e(w) over the servers. BFS sources alternate between the server
of the largest upper bound and the node of the smallest lower bound (a central switch lowers
everyone's upper bound); four BFS settle a fat-tree of any size. Where the
bounds do not meet within `EXPLORE` sources (vertex-transitive networks such as tori: every
server has the same eccentricity, so only its own BFS settles it), the servers still open are
searched exhaustively when that costs at most `WORK` link visits. Beyond that the answer is the
range the bounds leave, `low < high`, and never presented as exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.sparse.csgraph import shortest_path

from arsched.errors import TopologyError
from arsched.topology.routing import Routable

EXPLORE = 64
"""BFS sources of the bounding phase."""

WORK = 500_000_000
"""Node and link visits allowed for the exhaustive phase (about ten seconds of BFS: all
servers of a 100x100 torus)."""

BATCH_CELLS = 8_000_000
"""Distances held at once by the exhaustive phase (64 MB of float64)."""


class Diameter(NamedTuple):
    """The server diameter in hops: exact when `low == high`, else the range it lies in."""

    low: int
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high


def _bfs(graph, sources: list[int]) -> np.ndarray:
    return shortest_path(graph, unweighted=True, indices=sources, directed=True)


def _twins(fwd, rev, servers: np.ndarray) -> np.ndarray:
    """For every node, the first server with the same out- and in-neighbours (itself if none,
    and for switches): such twins have the same eccentricity (fat-tree hosts under one edge
    switch, jellyfish servers on one switch), so one BFS settles them all."""
    first: dict[bytes, int] = {}
    rep = np.arange(fwd.shape[0])
    for v in servers.tolist():
        key = b"|".join(
            g.indices[g.indptr[v] : g.indptr[v + 1]].tobytes() for g in (fwd, rev)
        )  # sorted indices: the CSR arrays are canonical
        rep[v] = first.setdefault(key, v)
    return rep


def server_diameter(topology: Routable, explore: int = EXPLORE, work: int = WORK) -> Diameter:
    """The most hops between two servers of `topology` (exact unless the work runs out: see the
    module's docstring); a TopologyError if some server cannot reach another."""
    c = topology.compiled
    fwd_graph = c.adjacency.astype(bool)
    fwd_graph.sort_indices()
    rev_graph = fwd_graph.T.tocsr()
    rev_graph.sort_indices()
    symmetric = (fwd_graph != rev_graph).nnz == 0
    servers = np.flatnonzero(c.is_server)
    n = c.num_nodes
    rep = _twins(fwd_graph, rev_graph, servers)
    cost = n + c.num_links
    low = np.zeros(n)  # bounds on e(v), for every node
    high = np.full(n, np.inf)
    done = np.zeros(n, dtype=bool)
    reach = np.ones(n, dtype=bool)  # the nodes that reach the servers and are reached from them
    best = 0.0  # the largest e(server) known exactly
    for step in range(explore):
        open_ = servers[(high[servers] > best) & ~done[servers]]
        if not len(open_):
            return Diameter(int(best), int(best))
        if step % 2 == 0:  # the open server of the largest upper bound, lowest index at ties
            v = int(open_[np.argmax(high[open_])])
        else:  # the node of the smallest lower bound not yet searched (a central one)
            cand = np.flatnonzero(reach & ~done)
            v = int(cand[np.argmin(low[cand])])
        d_from = _bfs(fwd_graph, [v])[0]  # d(v, ·)
        d_to = d_from if symmetric else _bfs(rev_graph, [v])[0]  # d(·, v)
        if step == 0:
            reach = np.isfinite(d_from) & np.isfinite(d_to)
            if not reach[servers].all():
                raise TopologyError(
                    f"topology {topology.name} is not connected: some servers cannot reach others"
                )
        ecc = float(d_from[servers].max())
        twins = rep == rep[v]
        done[twins] = True
        low[twins] = high[twins] = ecc
        if c.is_server[v]:
            best = max(best, ecc)
            low = np.maximum(low, np.where(reach, d_to, 0))
        low = np.maximum(low, np.where(reach, ecc - d_from, 0))
        high = np.minimum(high, np.where(reach, d_to + ecc, np.inf))
    open_ = servers[(high[servers] > best) & ~done[servers] & (rep[servers] == servers)]
    if len(open_) * cost <= work:
        batch = max(1, BATCH_CELLS // n)
        for i in range(0, len(open_), batch):
            best = max(best, float(_bfs(fwd_graph, open_[i : i + batch].tolist())[:, servers].max()))
        return Diameter(int(best), int(best))
    top = max(best, float(high[servers].max()))
    return Diameter(int(max(best, low[servers].max())), int(top))


__all__ = ["Diameter", "server_diameter"]
