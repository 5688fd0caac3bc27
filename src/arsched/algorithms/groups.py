"""The ranks' rails: the grid that matches rank j of every group of ranks (`topology.boxes`: GPUs
on one box fabric, servers on one leaf) with rank j of the others (a rail). `hierarchical`
schedules phases inside the groups and along the rails; tree packing's Broadcast and Reduce
offer the LP trees shaped by them (`packing.rails`)."""

from __future__ import annotations

import numpy as np

from arsched.algorithms.common import ring_order
from arsched.topology.core import Topology


def align(
    topology: Topology, ranks: tuple[str, ...], groups: tuple[tuple[int, ...], ...], ring: bool
) -> np.ndarray:
    """The (G × g) grid of rank indices: group 0 in ring order (`ring`) or as given, and in every
    other group local index j goes to the member fewest hops from group 0's rank j (ties: the
    lower index), so that the ranks of one local index share short routes (a rail)."""
    first = list(groups[0])
    if ring:
        cycle = ring_order(topology, tuple(ranks[i] for i in first))
        first = [ranks.index(r) for r in cycle]
    hops = topology.router.hop_matrix(ranks)
    grid = [first]
    for g in groups[1:]:
        free = list(g)
        row = []
        for j in first:
            pick = min(free, key=lambda x: (hops[j, x], x))
            free.remove(pick)
            row.append(pick)
        grid.append(row)
    return np.array(grid, dtype=np.int64)
