"""Broadcast and Reduce through groups (racks, boxes): two pipelined chains from group to group,
a pair of binary trees inside each group. Our construction, for networks whose groups reach the
rest over few links: the real 847-host Clos, whose racks of 3 to 24 servers have one to three
100 Gb/s uplinks, where `dbtree`'s trees over all ranks put up to seven tree edges (3.5 buffers)
on one rack's single uplink (`benchmarks/bench_collectives.py --scale`).

The buffer is cut in two halves, A and B. Each half runs through the groups (servers on one
switch, or boxes on their fast links: `groups.candidate_groups(equal=False)`; one group per rank
where the topology suggests none) in ring order, from the root's group on: group i has an entry
rank for each half, which receives the half from the previous group's entry and passes it both
to the next group's entry and to the top of a binary tree over the rest of its group. The two
entries of a group differ where it has two ranks or more, and each is a leaf of the other half's
tree, so that no rank forwards more than two half-chunks at a time (one buffer); the trees are
`dbtree.leaf_parity_tree`, the second over the ranks in the other order. So every group's
uplinks carry the buffer once each way, as a chain's would, but a chunk crosses G − 1 groups
plus a tree of about log2 of a group's size instead of N − 1 ranks: about 53 hops instead of 846
on the Clos. Reduce is the same trees with every edge reversed, a rank adding its chunk into its
parent once all its children's have arrived.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import (
    check_nbytes,
    check_ranks,
    check_root,
    chunk_multiple,
    pipeline_chunks,
    ring_order,
)
from arsched.algorithms.dbtree import leaf_parity_tree
from arsched.algorithms.groups import candidate_groups
from arsched.algorithms.registry import register
from arsched.algorithms.trees import add_rooted, tree_depths
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology

NAME = "group-chains"


def _hang(parent: np.ndarray, below: int, nodes: list[int]) -> None:
    """Hang a leaf-parity tree over `nodes` (rank indices, in order) below rank `below`."""
    up = leaf_parity_tree(len(nodes))
    for pos, node in enumerate(nodes):
        parent[node] = below if up[pos] < 0 else nodes[up[pos]]


def _children(parent: np.ndarray) -> np.ndarray:
    return np.bincount(parent[parent >= 0], minlength=len(parent))


def chain_trees(groups: list[list[int]], root: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The parents (over rank indices, the root's −1) of the trees of halves A and B: `groups`
    (rank indices, the root's group first, each in ring order) chained by their entries, a
    leaf-parity tree below each entry over the rest of its group (module docstring), then
    `relieve`d."""
    trees = (np.full(n, -1), np.full(n, -1))
    last = (root, root)  # each half's entry in the previous group
    label = np.full(n, -1)
    for i, group in enumerate(groups):
        label[group] = i
        rest = [r for r in group if r != root]
        if not rest:
            continue
        entry = (rest[0], rest[-1])  # the same rank where the group has one other than the root
        others = [r for r in rest if r not in entry]
        # each entry is a leaf (position 0, even) of the other half's tree; the second tree runs
        # over the others in reverse or shifted by one, whichever leaves the busiest rank fewer children
        a_nodes = ([entry[1]] if entry[1] != entry[0] else []) + others
        candidates = []
        for b_order in (others[::-1], others[1:] + others[:1]):
            b_nodes = ([entry[0]] if entry[1] != entry[0] else []) + b_order
            pa, pb = trees[0].copy(), trees[1].copy()
            pa[entry[0]], pb[entry[1]] = last[0], last[1]
            if a_nodes:
                _hang(pa, entry[0], a_nodes)
            if b_nodes:
                _hang(pb, entry[1], b_nodes)
            busiest = int((_children(pa) + _children(pb))[group].max())
            candidates.append((busiest, pa, pb))
        _, pa, pb = min(candidates, key=lambda x: x[0])  # the reverse at ties
        trees = (pa, pb)
        last = entry
    return relieve(trees, label)


def relieve(trees: tuple[np.ndarray, np.ndarray], label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Move children off ranks that forward more than two half-chunks (their link then carries
    more than the buffer): a child of such a rank goes below the shallowest rank of its own group
    (`label`) that forwards fewer than two and is not below that child in its tree. Within a
    group the entries and the rest have as many forwarding slots as sends to make, so a binary
    tree's ranks with one child are where the busiest ones' extra child can go."""
    trees = (trees[0].copy(), trees[1].copy())
    kids = _children(trees[0]) + _children(trees[1])
    for v in np.flatnonzero(kids > 2).tolist():
        for parent in trees:
            depth = tree_depths(parent)
            for c in np.flatnonzero(parent == v).tolist():
                if kids[v] <= 2:
                    break
                free = np.flatnonzero((kids < 2) & (label == label[c]))
                free = [u for u in free.tolist() if u != v and not _below(parent, u, c)]
                if free:
                    u = min(free, key=lambda x: (depth[x], x))
                    parent[c] = u
                    kids[v] -= 1
                    kids[u] += 1
                    depth = tree_depths(parent)
    return trees


def _below(parent: np.ndarray, u: int, c: int) -> bool:
    """Whether rank u is c or below it in the tree `parent`."""
    while u >= 0:
        if u == c:
            return True
        u = int(parent[u])
    return False


def _groups_in_order(topology: Topology, rs: tuple[str, ...], root: int) -> list[list[int]]:
    """The groups (rank indices) in ring order from the root's group, each member in ring order."""
    order = [rs.index(r) for r in ring_order(topology, rs)]
    at = order.index(root)
    order = order[at:] + order[:at]
    found = candidate_groups(topology, rs, equal=False)
    label = np.arange(len(rs))  # one group per rank where the topology suggests none
    if found:
        for i, g in enumerate(found[0]):
            label[list(g)] = i
    groups: dict[int, list[int]] = {}
    for r in order:
        groups.setdefault(int(label[r]), []).append(r)
    return list(groups.values())


def _rooted(collective: str):
    """The group-chains builder of a rooted collective (module docstring)."""

    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        chunks: int | None = None,
        root: str | None = None,
    ) -> Schedule:
        rs = check_ranks(topology, ranks, NAME)
        nbytes = check_nbytes(nbytes, NAME)
        top = check_root(rs, root, NAME)
        n, r0 = len(rs), rs.index(top)
        trees = chain_trees(_groups_in_order(topology, rs, r0), r0, n)
        hops = int(max(tree_depths(p).max() for p in trees))
        if chunks is None:  # each half at half a rank's rate over `hops` hops
            chunks = 2 * pipeline_chunks(topology, rs, nbytes, hops)
        chunks = chunk_multiple(chunks, 2, NAME, ranks=n, paths=4 * n)
        b = ScheduleBuilder(
            topology, rs, nbytes, chunks, NAME, {"params": {"chunks": chunks}}, spread=True,
            collective=collective, root=top,
        )  # fmt: skip
        add_rooted(b, np.arange(n), trees, collective, chunks)
        return b.build()

    build.__doc__ = (
        f"{collective.capitalize()} through the groups: two pipelined chains of group entries, a "
        "binary tree inside each group, half of the `chunks` each (even; default: enough to "
        "pipeline the deepest path)."
    )
    return build


register(NAME, "two chains of groups (racks, boxes) with a binary tree in each; pipelined", "broadcast")(
    _rooted("broadcast")
)
register(NAME, "", "reduce")(_rooted("reduce"))
