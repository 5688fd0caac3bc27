"""The links of rank pairs' routes, for many pairs at once: what the algorithms that price or
load links per rank pair (tree packing, its balanced steps, flow trees, ring orders) share.

`route` asks the router for the routes of distinct ordered rank pairs in one vectorised call
(`Router.link_paths`): by default spread over equal-cost paths (d-mod-k on fat-trees), which
tree packing's LP prices, or the default routes (`Topology.path`) that transfers without a
path take, which the flow trees' round model uses. `intern` puts routes into a schedule, so
that the schedule loads exactly the links that were counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from arsched.collective.schedule import ScheduleBuilder
from arsched.csr import gather
from arsched.topology.core import Topology

STRIPES = 4
"""The GPU-fabric schemes (`hierarchical`, its AllGather and ReduceScatter, `rail-dbtree`)
stripe a rank pair's transfers over the routes that add capacity among its first this many
spread ones (`Router.striped_paths`, `ScheduleBuilder(multipath=)`), as a runtime does with
several queue pairs per connection: a dual-plane fabric's NIC has a port per plane
(`gpufabric`), and one route per pair would use one."""


@dataclass(frozen=True)
class Routes:
    """Routes of distinct directed rank pairs, sorted by (source, destination): pair i is
    `src[i]` → `dst[i]` (rank indices) over links `links[ptr[i]:ptr[i + 1]]`."""

    src: np.ndarray
    dst: np.ndarray
    ptr: np.ndarray
    links: np.ndarray

    def index(self, src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
        """Positions of the pairs src[j] → dst[j] among the routed pairs."""
        return np.searchsorted(self.src * n + self.dst, src * n + dst)

    def positions(self, n: int) -> np.ndarray:
        """The (n × n) matrix of every ordered rank pair's position among the routed pairs, −1
        for pairs not routed."""
        pair = np.full((n, n), -1)
        pair[self.src, self.dst] = np.arange(len(self.src))
        return pair

    def links_of(self, i: int) -> np.ndarray:
        """The links of pair i's route, in order."""
        return self.links[self.ptr[i] : self.ptr[i + 1]]

    def path(self, i: int, topology: Topology, ranks: Sequence[str]) -> tuple[str, ...]:
        """Pair i's route as node ids, both ranks included."""
        c = topology.compiled
        return (ranks[int(self.src[i])], *(c.node_ids[x] for x in c.link_dst[self.links_of(i)].tolist()))

    @property
    def hops(self) -> np.ndarray:
        """The number of links on every pair's route."""
        return np.diff(self.ptr)

    def link_matrix(self, num_links: int) -> sp.csr_array:
        """The (pairs × links) matrix with a 1 where a pair's route crosses a link."""
        per_pair = np.repeat(np.arange(len(self.src)), self.hops)
        return sp.csr_array(
            (np.ones(len(per_pair)), (per_pair, self.links)), shape=(len(self.src), num_links)
        )

    def subset(self, keep: np.ndarray) -> Routes:
        """The routes of the pairs where `keep` is true."""
        rows = np.flatnonzero(keep)
        idx, lens = gather(self.ptr, rows)
        ptr = np.concatenate([[0], np.cumsum(lens)])
        return Routes(self.src[rows], self.dst[rows], ptr, self.links[idx])


def route(
    topology: Topology, ranks: Sequence[str], src: np.ndarray, dst: np.ndarray, spread: bool = True
) -> Routes:
    """The routes of the distinct pairs src[i] → dst[i] (rank indices): spread over equal-cost
    paths, or with `spread` false the default routes."""
    c = topology.compiled
    nodes = np.array([c.index[r] for r in ranks])
    n = len(nodes)
    key = np.asarray(src, dtype=np.int64) * n + np.asarray(dst, dtype=np.int64)
    src, dst = np.divmod(np.unique(key), n)
    if not len(src):
        return Routes(src, dst, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64))
    ptr, links = topology.router.link_paths(nodes[src], nodes[dst], spread=spread)
    return Routes(src, dst, ptr, links)


def striped_usage(topology: Topology, ranks: Sequence[str], routes: Routes, stripes: int) -> sp.csr_array:
    """The (pairs × links) share of each routed pair's bytes on every link when the pair's
    transfers take the routes `Router.striped_paths` keeps among its first `stripes` in turn
    (`ScheduleBuilder(multipath=stripes)`): an equal share on each."""
    c = topology.compiled
    nodes = np.array([c.index[r] for r in ranks])
    ptr, keep, links = topology.router.striped_paths(nodes[routes.src], nodes[routes.dst], stripes)
    per_pair = np.repeat(np.arange(len(routes.src)), np.diff(ptr))
    rows = np.concatenate([per_pair[keep[per_pair, k]] for k in range(stripes)])
    cols = np.concatenate([lk[keep[per_pair, k]] for k, lk in enumerate(links)])
    share = 1.0 / keep.sum(axis=1)
    return sp.csr_array((share[rows], (rows, cols)), shape=(len(routes.src), c.num_links))


def all_pairs(topology: Topology, ranks: Sequence[str], spread: bool = True) -> Routes:
    """The routes of every ordered pair of different ranks (see `route`)."""
    return route(topology, ranks, *np.nonzero(~np.eye(len(ranks), dtype=bool)), spread=spread)


def intern(b: ScheduleBuilder, routes: Routes, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Path ids, interned in `b`, of the routed pairs src[j] → dst[j] as a (ranks × ranks)
    matrix (-1 for other pairs)."""
    n = len(b.ranks)
    ids = np.full((n, n), -1, dtype=np.int64)
    for q in np.unique(routes.index(src, dst, n)).tolist():
        ids[routes.src[q], routes.dst[q]] = b.intern_path(routes.path(q, b.topology, b.ranks))
    return ids
