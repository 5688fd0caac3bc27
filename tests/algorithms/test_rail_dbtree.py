"""rail-dbtree: Broadcast and Reduce along the rails of GPU boxes, for any number of boxes (seeded
grids, odd counts, any root): trees rooted at the root, crossing boxes only along a rail, each
GPU's NIC carrying at most its rail's share of the buffer, each box taking in the buffer once."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import NotApplicable, build
from arsched.algorithms.rail_dbtree import rail_trees
from arsched.collective import numeric_check, validate
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


@pytest.mark.parametrize("seed", range(30))
def test_trees_cross_boxes_only_along_rails_and_once_per_box(seed):
    rng = np.random.default_rng(seed)
    boxes, g = int(rng.integers(1, 20)), int(rng.integers(2, 9))
    n = boxes * g
    grid = rng.permutation(n).reshape(boxes, g)
    root = int(rng.integers(n))
    trees = rail_trees(grid, root, n)
    box = np.empty(n, dtype=int)
    rail = np.empty(n, dtype=int)
    box[grid.ravel()] = np.repeat(np.arange(boxes), g)
    rail[grid.ravel()] = np.tile(np.arange(g), boxes)
    sends = np.zeros(n)  # each rank's sends to other boxes, in parts of the buffer
    for parent in trees:
        assert parent[root] == -1 and (np.delete(parent, root) >= 0).all()
        for v in range(n):  # every rank reaches the root: no cycle
            u = v
            for _ in range(n):
                u = parent[u] if u >= 0 else u
            assert u == -1
        kids = np.flatnonzero(parent >= 0)
        cross = kids[box[kids] != box[parent[kids]]]
        assert (rail[cross] == rail[parent[cross]]).all()  # between boxes only along a rail
        taken = np.bincount(box[cross], minlength=boxes)
        assert (taken[np.arange(boxes) != box[root]] == 1).all() and taken[box[root]] == 0
        np.add.at(sends, parent[cross], 1 / len(trees))
    assert sends.max() <= 1 / g + 1e-9  # a NIC carries at most its rail's share


@pytest.mark.parametrize("spec", ["hgx:boxes=3,gpus_per_box=4", "hgx:boxes=5,gen=h100"])
@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
def test_valid_and_ahead_of_trees_over_all_ranks(spec, collective):
    t = parse_spec(spec)
    root = t.servers[len(t.servers) // 2 + 1]
    s = build("rail-dbtree", t, None, 256e6, collective, root)
    assert validate(s).ok and numeric_check(s).ok
    others = [
        simulate_flow(build(a, t, None, 256e6, collective, root)) for a in ("dbtree", "group-trees", "ring")
    ]
    assert simulate_flow(s).time_s < min(o.time_s for o in others)


def test_needs_boxes():
    with pytest.raises(NotApplicable, match="rail-dbtree needs boxes"):
        build("rail-dbtree", parse_spec("fattree:k=4"), None, 1e6, "broadcast")
