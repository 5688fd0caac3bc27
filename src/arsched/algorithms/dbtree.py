"""Double binary tree AllReduce (Sanders, Speck & Träff 2009; NCCL's tree algorithm).

Two balanced binary trees over the ranks, the second the mirror image of the first, so that
(for even N) the leaves of one are inner nodes of the other and every rank sends and receives
at about full rate. Each tree carries half of the chunks, pipelined: a node at height h adds
chunk c into its parent in step h + c (once all its children's chunk c arrived), and the
result travels back down as copies, a node at depth d passing chunk c on in step H + 1 + d + c.
Logarithmic depth with pipelining; more chunks shorten the pipeline's fill and drain.

Broadcast and Reduce (our construction on the same trees): the two trees span the ranks other
than the root, in a ring order (`common.ring_order`: ranks under one switch side by side, so
that an in-order tree's lower levels stay under it), and the root feeds both tops (Broadcast) or
both tops add into it (Reduce), half of the chunks each. Every rank then sends (Broadcast) or
receives (Reduce) about the whole buffer, the root's link carries it once, and a chunk crosses
about log2 N hops: on hundreds of ranks a chain (`ring`) pays α at each of N − 1 hops, and tree
packing stops at 256 ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple, ring_order
from arsched.algorithms.registry import register
from arsched.algorithms.trees import add_tree, register_rooted
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


def binary_tree(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(parent, height) of a balanced in-order binary tree over 0..n−1; the root's parent is −1."""
    parent = np.full(n, -1)
    height = np.zeros(n, dtype=np.int64)

    def build(lo: int, hi: int, up: int) -> int:
        if lo >= hi:
            return -1
        mid = (lo + hi) // 2
        parent[mid] = up
        h = max(build(lo, mid, mid), build(mid + 1, hi, mid))
        height[mid] = h + 1
        return height[mid]

    build(0, n, -1)
    return parent, height


@register("dbtree", "NCCL's double binary tree: two mirrored pipelined trees, half the data each")
def dbtree(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Double binary tree; `chunks` (even, default 2·⌈log2 N⌉) sets the pipeline depth."""
    rs = check_ranks(topology, ranks, "dbtree")
    nbytes = check_nbytes(nbytes, "dbtree")
    n = len(rs)
    default = 2 * max(1, int(np.ceil(np.log2(n))))
    chunks = chunk_multiple(  # two trees: up to a parent and down to two children each
        default if chunks is None else chunks, 2, "dbtree", ranks=n, paths=6 * n
    )
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "dbtree", {"params": {"chunks": chunks}})
    parent, height = binary_tree(n)
    members = np.arange(n)
    add_tree(b, members, parent, height, np.arange(0, chunks, 2))
    add_tree(b, members[::-1].copy(), parent, height, np.arange(1, chunks, 2))
    return b.build()


def leaf_parity_tree(m: int) -> np.ndarray:
    """The parents of an in-order binary tree over 0..m−1 whose leaves are the even positions
    (Sanders, Speck & Träff's layout): position i = j − 1 with j's lowest set bit l hangs below
    j ± l, whichever is an odd multiple of 2l, or j − l (an ancestor) where that one is past the
    end; the top is the largest power of two ≤ m. So the mirror image of the tree over an even
    count has its inner ranks where the tree has its leaves."""
    j = np.arange(1, m + 1)
    low = j & -j
    up = np.where((j // low) % 4 == 1, j + low, j - low)
    up = np.where(up > m, j - low, up)
    parent = up - 1
    parent[low == 1 << (m.bit_length() - 1)] = -1
    return parent


def rooted_trees(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The parents of the two trees of Broadcast and Reduce over positions 0..n−1, rooted at 0:
    `leaf_parity_tree` over positions 1..n−1 and a second copy of it, each top's parent 0. The
    copy is the mirror image, or the tree shifted by one position where that leaves fewer
    children to the busiest rank (over an odd count the mirror keeps the middle rank's role, as
    NCCL's double binary tree notes for odd rank counts)."""
    m = n - 1
    up = leaf_parity_tree(m)

    def relabelled(pos: np.ndarray) -> np.ndarray:  # the tree with rest index i moved to pos[i]
        out = np.full(m, -1)
        out[pos] = np.where(up >= 0, pos[np.maximum(up, 0)], -1)
        return out

    def busiest(other: np.ndarray) -> int:
        kids = np.bincount(np.concatenate([up[up >= 0], other[other >= 0]]), minlength=m)
        return int(kids.max())

    copies = [relabelled(np.arange(m)[::-1].copy()), relabelled((np.arange(m) + 1) % m)]
    second = min(copies, key=busiest)  # the mirror at ties
    trees = []
    for p in (up, second):
        parent = np.full(n, -1)
        parent[1:] = np.where(p >= 0, p + 1, 0)
        trees.append(parent)
    return trees[0], trees[1]


def _plan(
    topology: Topology, rs: tuple[str, ...], root: int
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """`rooted_trees` over the ranks in ring order from the root (module docstring)."""
    order = [rs.index(r) for r in ring_order(topology, rs)]
    at = order.index(root)
    return rooted_trees(len(rs)), np.array(order[at:] + order[:at])


register_rooted(
    "dbtree",
    "",
    _plan,
    "{what} the root: two pipelined binary trees over the other ranks, half of the `chunks` each "
    "(even; default: enough to pipeline the trees' depth).",
)
