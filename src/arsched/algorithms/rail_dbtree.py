"""Broadcast and Reduce on GPU clusters of any size: double binary trees along the rails, a star
over each box's fast fabric. Our construction, for boxes of g GPUs on a faster fabric with a NIC
per GPU (`hgx`), beyond tree packing's 256 ranks (1,024 GPUs: `hgx:boxes=128`), where trees over
all ranks or over boxes (`dbtree`, `group-trees`) send each half of the buffer through one NIC of
a box.

The buffer is cut in 2·g parts, one per rail j (GPU j of every box, `groups.align`) and half h.
Part (j, h) reaches the root box's GPU j from the root over the box fabric, goes down
`dbtree.rooted_trees` over the boxes along rail j (half h: the first tree, or the second), and
each box's GPU j copies it to its box mates. So every GPU's NIC sends at most one part of each
rail half-pair, M/g, and every box takes in M over its g NICs: the box cut, which bounds a
Broadcast there. Over the box fabric every GPU copies its rail's parts to g − 1 mates; in the
root's box the root sends each part once and its own rail's part goes through a forwarder, one
of its mates in turn (each tree is repeated once per forwarder, so that the parts stay equal),
so that no GPU there copies much more than the others. Reduce is the same trees with every edge
reversed.
"""

from __future__ import annotations

import numpy as np

from arsched.algorithms.dbtree import rooted_trees
from arsched.algorithms.groups import align
from arsched.algorithms.registry import NotApplicable
from arsched.algorithms.routes import STRIPES
from arsched.algorithms.trees import register_rooted
from arsched.topology.boxes import candidate_groups
from arsched.topology.core import Topology

NAME = "rail-dbtree"


def rail_trees(grid: np.ndarray, root: int, n: int) -> list[np.ndarray]:
    """The parents (over rank indices) of every part's tree on the (boxes × g) `grid` of rank
    indices, rooted at rank `root` (module docstring): for each forwarder, rail and half."""
    b0, j0 = (int(x[0]) for x in np.nonzero(grid == root))
    boxes, g = grid.shape
    rows = np.roll(np.arange(boxes), -b0)  # the root's box first
    halves = rooted_trees(boxes) if boxes > 1 else (np.array([-1]), np.array([-1]))
    mates = [int(grid[b0, k]) for k in range(g) if k != j0]
    parts = {}  # (rail, half) -> its tree; the root's own rail's per forwarder
    for j in range(g):
        for h, half in enumerate(halves):
            parent = np.full(n, -1)
            rail = grid[rows, j]
            inner = half >= 0
            parent[rail[inner]] = rail[half[inner]]  # down the rail, box by box
            others = np.delete(np.arange(g), j)
            parent[grid[:, others]] = grid[:, j : j + 1]  # each box's rail GPU to its mates
            if j != j0:
                parent[grid[b0, j]] = root
                parent[root] = -1
                parts[j, h] = parent
            else:  # the root's own rail: through the forwarder to the others
                for forwarder in mates:
                    via = parent.copy()
                    via[mates] = forwarder
                    via[forwarder] = root
                    via[root] = -1
                    parts[j, h, forwarder] = via
    return [
        parts[(j, h, f) if j == j0 else (j, h)] for f in mates for j in range(g) for h in range(len(halves))
    ]


def _plan(topology: Topology, rs: tuple[str, ...], root: int) -> tuple[list[np.ndarray], np.ndarray]:
    found = candidate_groups(topology, rs, by_switch=False)
    if not found:
        raise NotApplicable(
            f"{NAME} needs boxes: ranks of {topology.name} in two or more equal groups on faster links"
        )
    grid = align(topology, rs, found[0], ring=False)
    if grid.shape[1] < 2:
        raise NotApplicable(f"{NAME} needs boxes of two or more ranks")
    return rail_trees(grid, root, len(rs)), np.arange(len(rs))


register_rooted(
    NAME,
    "double binary trees along the rails, a star in each box: GPU clusters",
    _plan,
    "{what} the root along the rails of GPU boxes: a part per rail and half, down a binary tree "
    "over the boxes and over each box's fabric (module docstring); `chunks` a multiple of the "
    "number of trees (default: enough to pipeline them).",
    STRIPES,
)
