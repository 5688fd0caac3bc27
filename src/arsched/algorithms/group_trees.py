"""Broadcast and Reduce through groups (racks, boxes): a pair of binary trees between the groups
and a pair inside each. Our construction, for networks whose groups reach the rest over few
links: the real 847-host Clos, whose racks of 3 to 24 servers have one to three 100 Gb/s
uplinks, where `dbtree`'s trees over all ranks put up to seven tree edges (3.5 buffers) on one
rack's single uplink (`benchmarks/bench_collectives.py --scale`).

The buffer is cut in two halves, A and B, each sent down (Broadcast) or reduced up (Reduce) its
own tree. Groups are servers on one switch or boxes on their fast links
(`groups.candidate_groups(equal=False)`; one group per rank where the topology suggests none),
in ring order from the root's group. Between groups the two halves take `dbtree.rooted_trees`
over the groups: each group is an inner node of at most one of them, so it forwards at most two
half-buffers to other groups. Inside a group, each half has an entry rank, which receives it
from the parent group; the other ranks hang below it in a leaf-parity binary tree, the other
entry first (a leaf), the second half's tree over the ranks in the other order or shifted. A
group of h ranks then has 2·(h − 1) sends to make inside and at most two to other groups, and
2·h forwarding slots of half a buffer each: every child group is fed by the shallowest rank
with a slot free, and `relieve` moves the extra child of any rank left with three (a binary
tree leaves some ranks one child) below a rank of the same group with a slot free. So no rank
forwards more than the buffer, every group's uplinks carry at most the buffer each way, and a
chunk crosses about log2 G groups and log2 of a group's size within each. Reduce is the same
trees with every edge reversed, a rank adding its chunk into its parent once all its
children's have arrived.

AllReduce is Reduce up both trees and Broadcast back down, pipelined, from the first rank
(`benchmarks/bench_auto.py`: `auto` picks it on the real Clos, where a ring pays α at each of
its 2·(N − 1) steps). Its chunks are those `pipeline_chunks` gives for twice the deepest path,
capped at `MAX_CHUNKS` to keep the transfers a runtime's (and a simulation's) size: 932 on the
Clos at 256 MB, 1.6 million transfers, simulated in seconds since the flow engine refills only
the flows whose rates an event changes (`sim.engine`); the cap was 256 when these simulations
took minutes (1.221× the bound on the Clos then, 1.155× now, bench_auto).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import (
    check_nbytes,
    check_ranks,
    chunk_multiple,
    pipeline_chunks,
    ring_order,
)
from arsched.algorithms.dbtree import leaf_parity_tree, rooted_trees
from arsched.algorithms.registry import register
from arsched.algorithms.trees import add_tree, register_rooted, tree_depths, tree_heights
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.boxes import candidate_groups
from arsched.topology.core import Topology

NAME = "group-trees"
MAX_CHUNKS = 1024  # AllReduce's chunks at most (module docstring)


def _hang(parent: np.ndarray, below: int, nodes: list[int]) -> None:
    """Hang a leaf-parity tree over `nodes` (rank indices, in order) below rank `below`."""
    up = leaf_parity_tree(len(nodes))
    for pos, node in enumerate(nodes):
        parent[node] = below if up[pos] < 0 else nodes[up[pos]]


def _children(parent: np.ndarray) -> np.ndarray:
    return np.bincount(parent[parent >= 0], minlength=len(parent))


def _inside(group: list[int], root: int, n: int) -> tuple[tuple[int, int], np.ndarray, np.ndarray] | None:
    """A group's entries (A, B) and the parents of its ranks other than the entries in the two
    halves' trees (module docstring; −1 elsewhere); None for the root alone."""
    rest = [r for r in group if r != root]
    if not rest:
        return None
    entry = (rest[0], rest[-1])  # the same rank where the group has one other than the root
    others = [r for r in rest if r not in entry]
    a_nodes = ([entry[1]] if entry[1] != entry[0] else []) + others
    best = None
    for b_order in (others[::-1], others[1:] + others[:1]):  # the reverse at ties
        b_nodes = ([entry[0]] if entry[1] != entry[0] else []) + b_order
        pa, pb = np.full(n, -1), np.full(n, -1)
        if a_nodes:
            _hang(pa, entry[0], a_nodes)
        if b_nodes:
            _hang(pb, entry[1], b_nodes)
        busiest = int((_children(pa) + _children(pb)).max())
        if best is None or busiest < best[0]:
            best = (busiest, pa, pb)
    return entry, best[1], best[2]


def group_trees(groups: list[list[int]], root: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The parents (over rank indices, the root's −1) of the trees of halves A and B over
    `groups` (rank indices, the root's group first, each in ring order): module docstring."""
    trees = (np.full(n, -1), np.full(n, -1))
    label = np.full(n, -1)
    inside = []
    for i, group in enumerate(groups):
        label[group] = i
        found = _inside(group, root, n)
        inside.append(found)
        if found is not None:
            for t, part in zip(trees, found[1:], strict=True):
                t[part >= 0] = part[part >= 0]
            if i == 0:  # the root feeds its own group's entries
                trees[0][found[0][0]], trees[1][found[0][1]] = root, root
    between = rooted_trees(len(groups)) if len(groups) > 1 else (np.array([-1]), np.array([-1]))
    kids = _children(trees[0]) + _children(trees[1])
    for half, (parent, up) in enumerate(zip(trees, between, strict=True)):
        depth = tree_depths(parent)  # below the group's entry: edges between groups come next
        for g in np.argsort(tree_depths(up), kind="stable").tolist():  # parent groups first
            if up[g] < 0 or inside[g] is None:
                continue
            feeders = [r for r in groups[up[g]] if r != root or inside[up[g]] is None]
            u = min(feeders, key=lambda r: (kids[r] >= 2, depth[r], r))
            parent[inside[g][0][half]] = u
            kids[u] += 1
    return relieve(trees, label)


def relieve(trees: tuple[np.ndarray, np.ndarray], label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Move children off ranks that forward more than two half-chunks (their link then carries
    more than the buffer): a child of such a rank goes below the shallowest rank of the same
    group (`label`) that forwards fewer than two and is not below that child in its tree."""
    trees = (trees[0].copy(), trees[1].copy())
    kids = _children(trees[0]) + _children(trees[1])
    for v in np.flatnonzero(kids > 2).tolist():
        for parent in trees:
            depth = tree_depths(parent)
            for c in np.flatnonzero(parent == v).tolist():
                if kids[v] <= 2:
                    break
                free = np.flatnonzero((kids < 2) & (label == label[v]))
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


def _trees(
    topology: Topology, ranks: Sequence[str] | None, nbytes: float
) -> tuple[tuple[str, ...], float, tuple[np.ndarray, np.ndarray], int]:
    """The checked ranks and size, the two trees from the first rank and their depth."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    trees, _ = _plan(topology, rs, 0)
    return rs, nbytes, trees, int(max(tree_depths(p).max() for p in trees))


@register(NAME, "two binary trees between groups (racks, boxes) and two inside each; pipelined")
def group_trees_allreduce(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """AllReduce over the two trees rooted at the first rank, half of the `chunks` each (even;
    default: enough to pipeline twice the deepest path, at most `MAX_CHUNKS`): a rank adds a
    chunk into its parent once its children's have arrived, and the sum comes back down, as
    `dbtree` does over its trees. Every rank sends its half-chunks up and at most two down, so
    its link carries about 2·M each way, the single-link bound, and every rack about 2·M across
    its uplinks."""
    rs, nbytes, trees, hops = _trees(topology, ranks, nbytes)
    n = len(rs)
    if chunks is None:
        chunks = min(2 * pipeline_chunks(topology, rs, nbytes, 2 * hops), MAX_CHUNKS)
    chunks = chunk_multiple(chunks, 2, NAME, ranks=n, paths=4 * n)
    b = ScheduleBuilder(topology, rs, nbytes, chunks, NAME, {"params": {"chunks": chunks}}, spread=True)
    for first, parent in enumerate(trees):
        add_tree(b, np.arange(n), parent, tree_heights(parent), np.arange(first, chunks, 2))
    return b.build()


def _plan(
    topology: Topology, rs: tuple[str, ...], root: int
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    return group_trees(_groups_in_order(topology, rs, root), root, len(rs)), np.arange(len(rs))


register_rooted(
    NAME,
    "",
    _plan,
    "{what} the root through the groups: two pipelined binary trees between the groups and two "
    "inside each, half of the `chunks` each (even; default: enough to pipeline the deepest path).",
)
