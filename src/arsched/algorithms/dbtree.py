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

from arsched.algorithms.common import check_ranks, check_size, chunk_multiple
from arsched.algorithms.registry import register
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


def tree_heights(parent: np.ndarray) -> np.ndarray:
    """Height of every node of a tree given by its parent array (leaves 0)."""
    height = np.zeros(len(parent), dtype=np.int64)
    for v in range(len(parent)):
        h, u = 0, v
        while parent[u] >= 0:
            u, h = int(parent[u]), h + 1
            height[u] = max(height[u], h)
    return height


def edge_steps(parent: np.ndarray, height: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(children, reduce step, copy step) of a tree's edges relative to a chunk's entry: a child
    of height h adds into its parent at step h; a child at depth d gets the result at step H + d,
    H the root's height."""
    root = int(np.flatnonzero(parent < 0)[0])
    depth = np.zeros(len(parent), dtype=np.int64)
    for v in np.argsort(-height, kind="stable"):  # parents (taller) before children
        if parent[v] >= 0:
            depth[v] = depth[parent[v]] + 1
    kids = np.flatnonzero(parent >= 0)
    return kids, height[kids], int(height[root]) + depth[kids]


def add_tree(
    b: ScheduleBuilder,
    members: np.ndarray,
    parent: np.ndarray,
    height: np.ndarray,
    tree_chunks: np.ndarray,
    offsets: np.ndarray | None = None,
    path_ids: np.ndarray | None = None,
) -> None:
    """Pipelined reduce up and broadcast down one tree (positions index `members`); chunk k
    enters the pipeline at step offsets[k] (default k: one chunk per step), each edge at its
    `edge_steps`. Transfers take the default routes, or `path_ids[src rank, dst rank]` (ids
    interned in `b`)."""
    kids, up_step, down_step = edge_steps(parent, height)
    chunks = np.asarray(tree_chunks)
    starts = np.arange(len(chunks)) if offsets is None else np.asarray(offsets)

    def add(nodes: np.ndarray, first: int, src: np.ndarray, dst: np.ndarray, op: str) -> None:
        k = len(nodes)  # every chunk crosses these edges, chunk c at step first + starts[c]
        step = np.repeat(starts + first, k)
        reps = len(chunks)
        pids = None if path_ids is None else np.tile(path_ids[src, dst], reps)
        b.add_rank_arrays(step, np.repeat(chunks, k), np.tile(src, reps), np.tile(dst, reps), op, pids)

    for h in np.unique(up_step):
        up = kids[up_step == h]
        add(up, int(h), members[up], members[parent[up]], "reduce")
    for d in np.unique(down_step):
        down = kids[down_step == d]
        add(down, int(d), members[parent[down]], members[down], "copy")


@register("dbtree", "NCCL's double binary tree: two mirrored pipelined trees, half the data each")
def dbtree(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Double binary tree; `chunks` (even, default 2·⌈log2 N⌉) sets the pipeline depth."""
    rs = check_ranks(topology, ranks, "dbtree")
    nbytes = check_size(nbytes, "dbtree")
    n = len(rs)
    default = 2 * max(1, int(np.ceil(np.log2(n))))
    chunks = chunk_multiple(default if chunks is None else chunks, 2, "dbtree")
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "dbtree", {"params": {"chunks": chunks}})
    parent, height = binary_tree(n)
    members = np.arange(n)
    add_tree(b, members, parent, height, np.arange(0, chunks, 2))
    add_tree(b, members[::-1].copy(), parent, height, np.arange(1, chunks, 2))
    return b.build()
