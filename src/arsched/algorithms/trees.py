"""Rooted trees over the ranks as parent arrays: heights, depths, hanging, and the pipelined
reduce-and-broadcast schedule of one tree.

A tree over n nodes is a parent array: `parent[v]` is v's parent and −1 at the root. The
algorithms that work with trees (double binary trees, tree packing and its balanced steps, the
flow trees of greedy-trees and hrl) share these helpers, so that depth and height mean the same
everywhere: a node's *depth* is its number of edges to the root, its *height* the number of
edges on the longest path down to a leaf (leaves 0; the root's height is the tree's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from arsched.algorithms.common import check_nbytes, check_ranks, check_root, chunk_multiple, pipeline_chunks
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


@numba.njit(cache=True)
def tree_heights(parent: np.ndarray) -> np.ndarray:
    """Height of every node of a tree given by its parent array (leaves 0). Compiled: tree
    packing's balanced steps take it for thousands of trees per plan."""
    height = np.zeros(len(parent), dtype=np.int64)
    for v in range(len(parent)):
        h, u = 0, v
        while parent[u] >= 0:
            u, h = parent[u], h + 1
            height[u] = max(height[u], h)
    return height


def tree_depths(parent: np.ndarray, height: np.ndarray | None = None) -> np.ndarray:
    """Depth of every node of a tree given by its parent array (the root 0); `height`
    (`tree_heights`) if known."""
    height = tree_heights(parent) if height is None else height
    depth = np.zeros(len(parent), dtype=np.int64)
    for v in np.argsort(-height, kind="stable"):  # parents (taller) before children
        if parent[v] >= 0:
            depth[v] = depth[parent[v]] + 1
    return depth


def tree_edges(parents: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Both directions of every edge of these trees: (sources, destinations), children to
    parents first, then parents to children."""
    kids = np.concatenate([np.flatnonzero(p >= 0) for p in parents])
    ups = np.concatenate([p[p >= 0] for p in parents])
    return np.concatenate([kids, ups]), np.concatenate([ups, kids])


def _graph(edges: tuple[np.ndarray, np.ndarray], n: int) -> sp.csr_array:
    return sp.csr_array((np.ones(len(edges[0])), edges), shape=(n, n))


def _hung(graph: sp.csr_array, root: int) -> np.ndarray:
    _, pred = breadth_first_order(graph, root, directed=False, return_predecessors=True)
    parent = np.where(pred < 0, -1, pred)
    parent[root] = -1
    return parent


def hang_from(edges: tuple[np.ndarray, np.ndarray], n: int, root: int) -> np.ndarray:
    """The parent array of the tree over n nodes with these undirected edges (a, b), hung from
    `root` (breadth-first: in a graph with cycles, the breadth-first tree from `root`)."""
    return _hung(_graph(edges, n), root)


def hang(edges: tuple[np.ndarray, np.ndarray], n: int) -> tuple[np.ndarray, int]:
    """(parent array, height) of the tree over n nodes with these undirected edges (a, b),
    hung from its centre: the middle of a longest path, which minimises the height."""
    g = _graph(edges, n)
    far = int(breadth_first_order(g, 0, directed=False, return_predecessors=False)[-1])  # a farthest node
    order, pred = breadth_first_order(g, far, directed=False, return_predecessors=True)
    path = [int(order[-1])]
    while path[-1] != far:
        path.append(int(pred[path[-1]]))
    return _hung(g, path[len(path) // 2]), len(path) // 2


def edge_steps(parent: np.ndarray, height: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(children, reduce step, copy step) of a tree's edges relative to a chunk's entry: a child
    of height h adds into its parent at step h; a child at depth d gets the result at step H + d,
    H the root's height."""
    root = int(np.flatnonzero(parent < 0)[0])
    depth = tree_depths(parent, height)
    kids = np.flatnonzero(parent >= 0)
    return kids, height[kids], int(height[root]) + depth[kids]


Sends = tuple[np.ndarray, np.ndarray, np.ndarray]  # (sources, destinations, steps) of a chunk's sends


def tree_sends(parent: np.ndarray, height: np.ndarray | None = None) -> Sends:
    """(sources, destinations, steps) of every send of a chunk up and down one tree relative to
    its entry (`edge_steps`; `height` from `tree_heights` if known): the reduces first, then
    the copies."""
    kids, up, down = edge_steps(parent, tree_heights(parent) if height is None else height)
    return (
        np.concatenate([kids, parent[kids]]),
        np.concatenate([parent[kids], kids]),
        np.concatenate([up, down]),
    )


def in_out_sends(in_parent: np.ndarray, out_parent: np.ndarray) -> Sends:
    """(sources, destinations, steps) of every send of a chunk reduced up an in-tree and
    broadcast down an out-tree with the same root, relative to its entry: a child of in-height h
    adds into its in-parent at step h, a node at out-depth d gets the sum at step H + d, H the
    in-tree's height. With the out-tree the in-tree reversed these are `tree_sends`."""
    height = tree_heights(in_parent)
    depth = tree_depths(out_parent)
    root = int(np.flatnonzero(in_parent < 0)[0])
    ups, downs = np.flatnonzero(in_parent >= 0), np.flatnonzero(out_parent >= 0)
    return (
        np.concatenate([ups, out_parent[downs]]),
        np.concatenate([in_parent[ups], downs]),
        np.concatenate([height[ups], int(height[root]) + depth[downs]]),
    )


def add_sends(
    b: ScheduleBuilder,
    members: np.ndarray,
    sends: Sends,
    tree_chunks: np.ndarray,
    offsets: np.ndarray | None = None,
    path_ids: np.ndarray | None = None,
) -> None:
    """Pipelined `sends` (`tree_sends`, `in_out_sends`: the first half of them reduce, the
    rest copy; positions index `members`); chunk k enters the pipeline at step offsets[k]
    (default k: one chunk per step). Transfers take the default routes, or
    `path_ids[src rank, dst rank]` (ids interned in `b`)."""
    src, dst, at = sends
    half = len(src) // 2
    for part, op in ((slice(0, half), "reduce"), (slice(half, len(src)), "copy")):
        add_pipelined(b, members, (src[part], dst[part], at[part]), op, tree_chunks, offsets, path_ids)


def add_pipelined(
    b: ScheduleBuilder,
    members: np.ndarray,
    sends: Sends,
    op: str,
    tree_chunks: np.ndarray,
    offsets: np.ndarray | None = None,
    path_ids: np.ndarray | None = None,
) -> None:
    """Pipelined `sends`, all with `op` (as in `add_sends`)."""
    src, dst, at = sends
    chunks = np.asarray(tree_chunks)
    starts = np.arange(len(chunks)) if offsets is None else np.asarray(offsets)
    reps = len(chunks)
    for h in np.unique(at):
        on = at == h  # every chunk crosses these edges, chunk c at step h + starts[c]
        s, d = members[src[on]], members[dst[on]]
        step = np.repeat(starts + int(h), len(s))
        pids = None if path_ids is None else np.tile(path_ids[s, d], reps)
        b.add_rank_arrays(step, np.repeat(chunks, len(s)), np.tile(s, reps), np.tile(d, reps), op, pids)


def add_tree(
    b: ScheduleBuilder,
    members: np.ndarray,
    parent: np.ndarray,
    height: np.ndarray,
    tree_chunks: np.ndarray,
    offsets: np.ndarray | None = None,
    path_ids: np.ndarray | None = None,
) -> None:
    """Pipelined reduce up and broadcast down one tree (positions index `members`), each edge
    at its `edge_steps` (see `add_sends`)."""
    add_sends(b, members, tree_sends(parent, height), tree_chunks, offsets, path_ids)


def add_rooted(
    b: ScheduleBuilder,
    members: np.ndarray,
    trees: Sequence[np.ndarray],
    collective: str,
    chunks: int,
    per_step: int = 1,
) -> None:
    """A Broadcast (copies down) or Reduce (adds up) over `trees` (parents over positions of
    `members`, rooted at the collective's root), chunk c on tree c mod len(trees), pipelined: a
    rank at depth d passes its tree's k-th chunk on at step d − 1 + k // per_step (Broadcast), a
    rank of height h adds it into its parent at step h + k // per_step (Reduce): `per_step`
    chunks at once on every edge, which a striped connection (`ScheduleBuilder(multipath=)`)
    sends over as many routes."""
    op = "copy" if collective == "broadcast" else "reduce"
    for first, parent in enumerate(trees):
        kids = np.flatnonzero(parent >= 0)
        if collective == "broadcast":
            sends = (parent[kids], kids, tree_depths(parent)[kids] - 1)
        else:
            sends = (kids, parent[kids], tree_heights(parent)[kids])
        mine = np.arange(first, chunks, len(trees))
        add_pipelined(b, members, sends, op, mine, np.arange(len(mine)) // per_step)


def rooted_schedule(
    name: str,
    collective: str,
    topology: Topology,
    ranks: tuple[str, ...],
    nbytes: float,
    root: str,
    trees: Sequence[np.ndarray],
    members: np.ndarray,
    chunks: int | None,
    multipath: int = 1,
) -> Schedule:
    """`name`'s pipelined Broadcast or Reduce over `trees` (`add_rooted`; positions index
    `members`), an equal share of `chunks` each (a multiple of their number; default: enough to
    pipeline the deepest path, each tree's share of the buffer at half a rank's rate,
    `pipeline_chunks`), on routes spread over equal-cost paths. With `multipath`, a pair's
    transfers are striped over its first `multipath` routes (`ScheduleBuilder`), and where a
    tree edge has w > 1 distinct ones, every edge carries w chunks per step (the default chunks
    w times as many): a connection serialises its steps, so one chunk per step would use one
    route at a time."""
    n, k = len(ranks), len(trees)
    probe = ScheduleBuilder(topology, ranks, nbytes, 1, name, spread=True, multipath=multipath)
    child, parent = (
        np.concatenate(x) for x in zip(*[(np.flatnonzero(p >= 0), p[p >= 0]) for p in trees], strict=True)
    )
    down = collective == "broadcast"  # a Broadcast sends parent to child, a Reduce child to parent
    src, dst = members[parent if down else child], members[child if down else parent]
    per_step = int(probe.ways(src, dst).max(initial=1))
    if chunks is None:
        hops = int(max(tree_depths(p).max() for p in trees))
        chunks = per_step * k * pipeline_chunks(topology, ranks, nbytes * 2 / k, hops)
    chunks = chunk_multiple(chunks, k, name, ranks=n, paths=2 * k * n * per_step)
    b = ScheduleBuilder(
        topology, ranks, nbytes, chunks, name, {"params": {"chunks": chunks}}, spread=True,
        collective=collective, root=root, multipath=multipath if per_step > 1 else 1,
    )  # fmt: skip
    add_rooted(b, members, trees, collective, chunks, per_step)
    return b.build()


Plan = Callable[[Topology, tuple[str, ...], int], tuple[Sequence[np.ndarray], np.ndarray]]
"""plan(topology, ranks, root's index): the trees of a rooted collective (parents over
positions, the root at a position with parent −1 in each) and the rank index at each position."""


Chunks = Callable[[Topology, tuple[str, ...], float], int]
"""chunks(topology, ranks, nbytes): a rooted builder's default chunk count."""


def register_rooted(
    name: str, summary: str, plan: Plan, doc: str, multipath: int = 1, default_chunks: Chunks | None = None
) -> None:
    """Register `name`'s Broadcast and Reduce over the trees `plan` gives (`rooted_builder`),
    each with the docstring `doc` (formatted with `what`: 'Broadcast from' or 'Reduce into')."""
    for collective, what in (("broadcast", "Broadcast from"), ("reduce", "Reduce into")):
        build = rooted_builder(name, collective, plan, doc.format(what=what), multipath, default_chunks)
        register(name, summary, collective)(build)


def rooted_builder(
    name: str, collective: str, plan: Plan, doc: str, multipath: int = 1, default_chunks: Chunks | None = None
) -> Callable[..., Schedule]:
    """`name`'s builder of `collective` (Broadcast or Reduce) over the trees `plan` gives
    (`rooted_schedule`, striped over `multipath` routes; without `chunks`, `default_chunks`' count
    where given, else `rooted_schedule`'s), with the registry's rooted signature and the
    docstring `doc`."""

    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        chunks: int | None = None,
        root: str | None = None,
    ) -> Schedule:
        rs = check_ranks(topology, ranks, name)
        nbytes = check_nbytes(nbytes, name)
        top = check_root(rs, root, name)
        trees, members = plan(topology, rs, rs.index(top))
        if chunks is None and default_chunks is not None:
            chunks = default_chunks(topology, rs, nbytes)
        return rooted_schedule(name, collective, topology, rs, nbytes, top, trees, members, chunks, multipath)

    build.__doc__ = doc
    return build
