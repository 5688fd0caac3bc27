"""Double binary tree AllReduce (Sanders, Speck & Träff 2009; NCCL's tree algorithm).

Two balanced binary trees over the ranks, the second the mirror image of the first, so that
(for even N) the leaves of one are inner nodes of the other and every rank sends and receives
at about full rate. Each tree carries half of the chunks, pipelined: a node at height h adds
chunk c into its parent in step h + c (once all its children's chunk c arrived), and the
result travels back down as copies, a node at depth d passing chunk c on in step H + 1 + d + c.
Logarithmic depth with pipelining; more chunks shorten the pipeline's fill and drain.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.registry import register
from arsched.algorithms.trees import add_tree
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
