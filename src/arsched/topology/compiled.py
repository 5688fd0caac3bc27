"""The compiled form of a topology: integer-indexed arrays for simulators, routing and bounds."""

from __future__ import annotations

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
        """Link indices along a path of node ids; -1 where a hop has no link."""
        idx = np.fromiter((self.index.get(n, -1) for n in path), dtype=np.int64, count=len(path))
        if (idx < 0).any() or len(idx) < 2:
            return np.full(max(len(idx) - 1, 0), -1, dtype=np.int64)
        return np.asarray(self.adjacency[idx[:-1], idx[1:]], dtype=np.int64).ravel() - 1
