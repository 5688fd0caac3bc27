"""Rail trees: the shallow arborescences that a rooted collective needs on boxes joined by rails,
columns of the rooted packing's LP (`forest`) from its start, beside the trees its column
generation finds.

On G boxes of g GPUs whose local index j forms rail j (`groups.align`), a Broadcast from root r
of box 0 reaches the bound (the least cut from r: every other box's g NICs) only if every NIC
of the other boxes receives each byte once and box 0's NICs each send theirs once. A tree of
rail j does that in few hops: r copies the chunk to its box's rail-j GPU a (no hop where
a = r), a sends it over its NIC to one other box, the rail-j GPUs of the other G − 1 boxes pass
it on, and every rail-j GPU copies it to its box (box 0: a, to the GPUs other than r), down
the box's shortest-path tree (a star on a switch, relays on a mesh). Down the rail, two shapes
(`_rail`): a star through one box k (a → k → the rest: every rank within four hops however
many boxes; k's NIC sends G − 2 copies, so the LP spreads the rail's rate over every k), and
the pair of heap-ordered binary trees over the boxes in opposite orders (a GPU that sends twice
down one is a leaf of the other, as in NCCL's double binary tree; Sanders, Speck and Träff
2009). On its own rail the root would also copy the chunk to all of its box, on top of the
g − 1 copies of the other rails' chunks; variants in which another GPU of box 0 does those
copies let the LP spread that load. A Reduce takes the same trees as in-trees.

Without them the first LP's column generation crawls on boxes: on 8 A100 boxes it stopped
after its 200 rounds at 41 % of the bound; with them it starts at the bound, and the
second LP keeps trees at most 4 deep (`benchmarks/bench_collectives.py`).
"""

from __future__ import annotations

import numpy as np

from arsched.algorithms.groups import align
from arsched.topology.boxes import candidate_groups
from arsched.topology.core import Topology


def rail_trees(topology: Topology, ranks: tuple[str, ...], root: int) -> list[np.ndarray]:
    """The rail trees from rank index `root` (parent arrays over the ranks, −1 at the root) on
    every grouping of the ranks into boxes by their fast links (`groups.candidate_groups`);
    none where there are none. Servers grouped by their leaf switch get none: on a fat-tree the
    hub trees reach the bound shallower, and rail trees among them made the Broadcast slower
    (1.038 → 1.051× the bound, `benchmarks/bench_collectives.py`)."""
    hops = topology.router.hop_matrix(ranks)
    trees = []
    for groups in candidate_groups(topology, ranks, by_switch=False):
        trees += _trees(align(topology, ranks, groups, False), root, hops)
    return trees


def _trees(grid: np.ndarray, root: int, hops: np.ndarray) -> list[np.ndarray]:
    """The rail trees on the (boxes × rails) `grid` of rank indices, whose `hops` matrix gives
    the boxes' own shortest-path trees (see the module docstring)."""
    home, mine = (int(x[0]) for x in np.nonzero(grid == root))
    others = np.delete(grid, home, axis=0)
    out = []
    for j in range(grid.shape[1]):
        a = grid[home, j]
        for order, above in _rail(others[:, j], a):
            base = np.full(grid.size, -1, dtype=np.int64)
            base[order] = above
            for box in others:  # every other box from its rail-j GPU
                _fan_out(base, box, j, hops)
            for k in [j] if j != mine else range(grid.shape[1]):  # box 0 from a, or on the root's
                tree = base.copy()  # own rail from any GPU of its box
                _fan_out(tree, grid[home], k, hops)
                tree[[grid[home, k], a]] = root
                tree[root] = -1
                out.append(tree)
    return out


def _rail(members: np.ndarray, a: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The ways down rail j from box 0's GPU `a` to the other boxes' `members`, as (members,
    their parents): the two heap-ordered binary trees (members in opposite orders), and for
    every member k a star through k (a → k → the rest: two hops however many boxes, and k's NIC
    sends its share to all the others, so the LP spreads the rail's rate over every k)."""
    ways = []
    for order in (members, members[::-1]):
        ways.append((order, np.concatenate([[a], order[(np.arange(1, len(order)) - 1) // 2]])))
    for k in members.tolist():
        ways.append((members, np.where(members == k, a, k)))
    return ways


def _fan_out(parent: np.ndarray, box: np.ndarray, j: int, hops: np.ndarray) -> None:
    """Hang every GPU of `box` but its `j`-th below the last relay of a shortest path from the
    j-th (the nearest to it, lowest index at ties): a star on a switched box, a shortest-path
    tree on a mesh, where a star's routes would cross one link many times."""
    h = hops[np.ix_(box, box)]
    s = h[j]
    for x in np.delete(np.arange(len(box)), j).tolist():
        on_path = np.flatnonzero((s + h[:, x] == s[x]) & (np.arange(len(box)) != x))
        parent[box[x]] = box[on_path[np.argmax(s[on_path] - 1e-9 * on_path)]]
