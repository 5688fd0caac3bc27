"""Tree helpers (arsched.algorithms.trees) against networkx on random trees: heights, depths,
hanging from a root and from the centre, and the steps of a pipelined tree."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from arsched.algorithms.trees import edge_steps, hang, hang_from, tree_depths, tree_edges, tree_heights


def _random_tree(n: int, seed: int) -> tuple[nx.Graph, tuple[np.ndarray, np.ndarray]]:
    """A random labelled tree and its edges as (a, b) arrays."""
    g = nx.random_labeled_tree(n, seed=seed)
    edges = np.array(list(g.edges), dtype=np.int64)
    return g, (edges[:, 0], edges[:, 1])


def _edge_set(parent: np.ndarray) -> set[frozenset[int]]:
    return {frozenset((v, int(parent[v]))) for v in range(len(parent)) if parent[v] >= 0}


@pytest.mark.parametrize(("n", "seed"), [(2, 0), (3, 1), (7, 2), (20, 3), (41, 4)])
def test_hang_from_a_root_gives_networkx_depths_and_heights(n, seed):
    g, edges = _random_tree(n, seed)
    root = seed % n
    parent = hang_from(edges, n, root)
    assert parent[root] == -1 and (parent >= 0).sum() == n - 1
    assert _edge_set(parent) == {frozenset(e) for e in g.edges}
    depth = nx.single_source_shortest_path_length(g, root)
    assert tree_depths(parent).tolist() == [depth[v] for v in range(n)]
    below = nx.bfs_tree(g, root)  # edges point away from the root
    want = [max(nx.single_source_shortest_path_length(below, v).values()) for v in range(n)]
    assert tree_heights(parent).tolist() == want


@pytest.mark.parametrize(("n", "seed"), [(2, 5), (3, 6), (7, 7), (20, 8)])
def test_hang_picks_the_centre(n, seed):
    """Hung from its centre a tree is as low as it can be: its height is the smallest
    eccentricity."""
    g, edges = _random_tree(n, seed)
    parent, h = hang(edges, n)
    assert h == min(nx.eccentricity(g).values()) == tree_heights(parent).max()
    assert _edge_set(parent) == {frozenset(e) for e in g.edges}


def test_edge_steps_and_tree_edges_of_a_path():
    """A path 0-1-2-3 hung from 1: 0 and 2 are one below the root, 3 two; leaves add in at step
    0, 2 at step 1; the copy into a node at depth d comes at step H + d, H = 2."""
    parent = np.array([1, -1, 1, 2])
    kids, up, down = edge_steps(parent, tree_heights(parent))
    assert kids.tolist() == [0, 2, 3] and up.tolist() == [0, 1, 0] and down.tolist() == [3, 3, 4]
    src, dst = tree_edges([parent, np.array([-1, 0])])
    assert list(zip(src.tolist(), dst.tolist(), strict=True)) == [
        (0, 1),
        (2, 1),
        (3, 2),
        (1, 0),
        (1, 0),
        (1, 2),
        (2, 3),
        (0, 1),
    ]
