"""The ranks' boxes: equal groups of ranks that the topology suggests (GPUs on one box fabric,
servers on one leaf). `algorithms.groups` matches rank j of every group with rank j of the
others (a rail) for the schedules that work in boxes and along rails; the MSCCL export keeps
each rail's connections on a channel of its own."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from arsched.topology.core import Topology


def _components(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The connected-component label of every node over the undirected edges src–dst."""
    graph = sp.csr_array((np.ones(len(src)), (src, dst)), shape=(num_nodes, num_nodes))
    return connected_components(graph, directed=True, connection="weak")[1]


def _partition(labels: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """Rank indices grouped by label, groups ordered by their first rank."""
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(labels.tolist()):
        groups.setdefault(x, []).append(i)
    return tuple(tuple(g) for g in groups.values())


def usable(groups: tuple[tuple[int, ...], ...], equal: bool = True) -> bool:
    """Two or more groups, all of one size of two or more (`equal`), or else one of two or more."""
    if equal:
        return len(groups) > 1 and len(groups[0]) > 1 and len({len(g) for g in groups}) == 1
    return len(groups) > 1 and max(map(len, groups)) > 1


def candidate_groups(
    topology: Topology, ranks: Sequence[str], by_switch: bool = True, equal: bool = True
) -> list[tuple[tuple[int, ...], ...]]:
    """The usable groupings of the ranks (rank indices; ≥ 2 groups of equal size ≥ 2, or with
    `equal` off of any sizes, one ≥ 2) that the topology suggests: for every link bandwidth b,
    the ranks joined by links of bandwidth ≥ b (boxes on their fast fabric), and with
    `by_switch` the ranks joined through switches they attach to directly (servers of one
    leaf)."""
    c = topology.compiled
    nodes = np.array([c.index[r] for r in ranks])
    out: list[tuple[tuple[int, ...], ...]] = []
    for b in np.unique(c.capacity)[::-1].tolist():
        fast = c.capacity >= b
        groups = _partition(_components(c.num_nodes, c.link_src[fast], c.link_dst[fast])[nodes])
        if usable(groups, equal) and groups not in out:
            out.append(groups)
    if not by_switch:
        return out
    to_switch = c.is_server[c.link_src] & ~c.is_server[c.link_dst]
    groups = _partition(_components(c.num_nodes, c.link_src[to_switch], c.link_dst[to_switch])[nodes])
    if usable(groups, equal) and groups not in out:
        out.append(groups)
    return out
