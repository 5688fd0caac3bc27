"""The compiled form of a topology: integer-indexed arrays for simulators, routing and bounds."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class CompiledTopology:
    """Integer-indexed arrays of a topology, for simulators, routing and bounds.

    Nodes are numbered in the topology's node order and links in its link order, so the
    numbering is as deterministic as the topology itself.
    """

    node_ids: tuple[str, ...]
    index: dict[str, int]
    is_server: np.ndarray  # bool, per node
    link_src: np.ndarray  # int32, per link
    link_dst: np.ndarray  # int32, per link
    capacity: np.ndarray  # float64 bytes/s, per link
    latency: np.ndarray  # float64 seconds, per link
    adjacency: sp.csr_array  # (node, node) -> link index + 1

    @property
    def num_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def num_links(self) -> int:
        return len(self.link_src)

    def link_index(self, src: int, dst: int) -> int:
        """Index of the directed link src -> dst (node indices), or -1 if there is none."""
        return int(self.adjacency[src, dst]) - 1

    def path_links(self, path: Sequence[str]) -> np.ndarray:
        """Link indices along a path of node ids; -1 where a hop has no link or an unknown node."""
        return self.paths_links([path])[1]

    def paths_links(self, paths: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """`path_links` of many paths in one lookup: each path's hop count (0 for a path of
        fewer than two nodes) and all their link indices one after another (-1 where a hop has
        no link or a node is unknown)."""
        nodes = np.array([len(p) for p in paths], dtype=np.int64)
        names = itertools.chain.from_iterable(paths)  # map over a bound method: no Python frame per name
        found = map(self.index.get, names, itertools.repeat(-1))
        idx = np.fromiter(found, dtype=np.int64, count=int(nodes.sum()))
        hops = np.maximum(nodes - 1, 0)
        last = np.cumsum(nodes) - 1  # each path's last node: no hop starts there
        starts = np.ones(len(idx), dtype=bool)
        starts[last[nodes > 0]] = False
        a, b = idx[:-1][starts[:-1]], idx[1:][starts[:-1]]
        links = np.full(len(a), -1, dtype=np.int64)
        ok = (a >= 0) & (b >= 0)
        if ok.any():
            links[ok] = np.asarray(self.adjacency[a[ok], b[ok]], dtype=np.int64).ravel() - 1
        return hops, links
