"""Spread routes between rank pairs, shared by tree packing and its level-balanced steps.

The LPs of `packing` and `levels` price every rank pair by the links of its route
(`Router.link_paths(spread=True)`: equal-cost paths spread over switches, d-mod-k on
fat-trees); `intern` puts exactly those paths into a schedule, so that the schedule loads the
links the LP counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from arsched.collective.schedule import ScheduleBuilder
from arsched.csr import gather
from arsched.topology.core import Topology


@dataclass(frozen=True)
class Routes:
    """Spread routes of distinct directed rank pairs, sorted by (source, destination): pair i
    is `src[i]` → `dst[i]` (rank indices) over links `links[ptr[i]:ptr[i + 1]]`."""

    src: np.ndarray
    dst: np.ndarray
    ptr: np.ndarray
    links: np.ndarray

    def index(self, src: np.ndarray, dst: np.ndarray, n: int) -> np.ndarray:
        """Positions of the pairs src[j] → dst[j] among the routed pairs."""
        return np.searchsorted(self.src * n + self.dst, src * n + dst)

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


def route(topology: Topology, ranks: tuple[str, ...], src: np.ndarray, dst: np.ndarray) -> Routes:
    """The spread routes of the distinct pairs src[i] → dst[i] (rank indices)."""
    c = topology.compiled
    nodes = np.array([c.index[r] for r in ranks])
    n = len(nodes)
    src, dst = np.divmod(np.unique(np.asarray(src) * n + np.asarray(dst)), n)
    ptr, links = topology.router.link_paths(nodes[src], nodes[dst], spread=True)
    return Routes(src, dst, ptr, links)


def intern(b: ScheduleBuilder, routes: Routes, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Path ids, interned in `b`, of the routed pairs src[j] → dst[j] as a (ranks × ranks)
    matrix (-1 for other pairs)."""
    c = b.topology.compiled
    n = len(b.ranks)
    ids = np.full((n, n), -1, dtype=np.int64)
    for q in np.unique(routes.index(src, dst, n)).tolist():
        hops = c.link_dst[routes.links[routes.ptr[q] : routes.ptr[q + 1]]].tolist()
        a = int(routes.src[q])
        ids[a, routes.dst[q]] = b.intern_path((b.ranks[a], *(c.node_ids[x] for x in hops)))
    return ids
