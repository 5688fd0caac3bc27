"""Rail trees for rooted packings on GPU boxes (arsched.algorithms.packing.rails): spanning
arborescences at the root, few hops deep, that cross every other box's NICs once and box 0's
at most once, so the LP reaches the bound with them; their schedules are valid."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.groups import align
from arsched.algorithms.packing.forest import pack_forest
from arsched.algorithms.packing.lp import TOLERANCE
from arsched.algorithms.packing.rails import _fan_out, _rail, _trees, rail_trees
from arsched.collective import numeric_check, validate
from arsched.topology import parse_spec
from arsched.topology.boxes import candidate_groups

# Fabrics no constant was tuned on: box counts and sizes drawn from a seed, an H100 Clos.
_rng = np.random.default_rng(25)
FABRICS = [
    f"hgx:boxes={_rng.integers(3, 7)},gpus_per_box={_rng.choice([2, 4])}",
    "hgx:boxes=5,gpus_per_box=4,gen=h100,fabric=clos",
]


def depths(parent: np.ndarray, root: int) -> np.ndarray:
    """Every rank's depth below `root`, failing on a cycle or a rank not below the root."""
    n = len(parent)
    out = np.zeros(n, dtype=np.int64)
    for v in range(n):
        u, d = v, 0
        while u != root:
            u, d = int(parent[u]), d + 1
            assert u >= 0 and d <= n, f"rank {v} is not below the root"
        out[v] = d
    assert parent[root] == -1
    return out


@pytest.mark.parametrize("spec", FABRICS)
def test_rail_trees_span_the_ranks_in_few_hops_and_cross_each_nic_once(spec):
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    root = int(np.random.default_rng(3).integers(len(ranks)))
    grid = align(topo, ranks, candidate_groups(topo, ranks)[0], False)
    box = np.empty(len(ranks), dtype=np.int64)
    for b, row in enumerate(grid):
        box[row] = b
    home = box[root]
    trees = _trees(grid, root, topo.router.hop_matrix(ranks))
    per_box = grid.shape[0]
    assert len(trees) >= 2 * grid.shape[1]
    for tree in trees:  # a heap's depth grows with the boxes, a star's does not
        assert depths(tree, root).max() <= 3 + int(np.log2(per_box - 1))
        kids = np.flatnonzero(tree >= 0)
        crossing = kids[box[kids] != box[tree[kids]]]  # arcs between boxes, by their child
        into = np.bincount(box[crossing], minlength=per_box)
        assert into[home] == 0 and (np.delete(into, home) == 1).all()  # each other box entered once
        assert (box[tree[crossing]] == home).sum() == 1  # box 0's NICs send the chunk once


def test_a_heap_pair_shares_no_inner_box_and_the_stars_reach_every_box_in_two_hops():
    """Down a rail of 7 other boxes: the two heap trees share no inner box (every NIC sends at
    most twice per pair), and the star through box k reaches every box in two hops."""
    members, a = np.arange(1, 8) * 10, 0
    ways = _rail(members, a)
    assert len(ways) == 2 + len(members)
    inner = []
    for order, above in ways[:2]:
        parent = dict(zip(order.tolist(), above.tolist(), strict=True))
        inner.append({p for p in parent.values() if p != a})
        assert all(sum(p == u for p in parent.values()) <= 2 for u in members.tolist())
    assert not inner[0] & inner[1]
    for k, (order, above) in zip(members.tolist(), ways[2:], strict=True):
        assert (above == np.where(order == k, a, k)).all()


def test_a_mesh_box_copies_down_shortest_paths():
    """On a 3 × 3 torus of direct links, `_fan_out` hangs every rank below a neighbour one hop
    nearer the source: each rank's depth is its distance."""
    topo = parse_spec("torus:dims=3x3")
    ranks = tuple(topo.servers)
    hops = topo.router.hop_matrix(ranks)
    for source in (0, 4):
        parent = np.full(len(ranks), -1)
        _fan_out(parent, np.arange(len(ranks)), source, hops)
        assert parent[source] == -1
        kids = np.flatnonzero(parent >= 0)
        assert (hops[parent[kids], kids] == 1).all()
        assert (depths(parent, source) == hops[source]).all()


@pytest.mark.parametrize("spec", FABRICS)
def test_the_packing_reaches_the_bound_within_four_levels_and_its_schedules_are_valid(spec):
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    root = len(ranks) // 2 + 1
    for collective in ("broadcast", "reduce"):
        f = pack_forest(topo, ranks, collective, root)
        assert f.rate >= f.limit * (1 - TOLERANCE)
        assert f.heights.max() <= 4
        s = build("tree-packing", topo, None, 16e6, collective, ranks[root])
        assert validate(s).ok and numeric_check(s, seed=4).ok


@pytest.mark.parametrize("spec", ["torus:dims=3x4,oneway=1", "fattree:k=4"])
def test_networks_without_boxes_get_none(spec):
    """Servers grouped only by their leaf switch are no boxes: their hub trees are shallower."""
    topo = parse_spec(spec)
    assert rail_trees(topo, tuple(topo.servers), 0) == []
