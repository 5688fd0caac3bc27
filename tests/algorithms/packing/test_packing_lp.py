"""The tree-packing LP (arsched.algorithms.packing.lp): its rate against the cut bound, the
multiplicative-weights start, the oracles' trees, and stars over spread paths on a fat-tree."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.packing.lp import (
    DEPTH_SLACK,
    DEPTHS,
    TOLERANCE,
    TreeLP,
    TreeOracles,
    multiplicative_weights,
    pack,
    pair_usage,
)
from arsched.algorithms.trees import tree_heights
from arsched.bounds import allreduce_bound
from arsched.collective import validate
from arsched.topology import parse_spec


@pytest.mark.parametrize(
    "spec", ["star:n=6", "bcube:n=3,k=1", "dcell:n=3,k=1", "torus:dims=3x3", "fattree:k=4", "bcube:n=3,k=2"]
)
def test_tree_packing_lp_reaches_the_bound(spec):
    """The packed trees' total rate X gives the bound: M / X = 2·T*_AG (ForestColl's theorem),
    within the stopping tolerance; the shallower packing gives up at most DEPTH_SLACK; every
    tree spans the ranks and fits the capacities with the others."""
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    p = pack(topo, ranks)
    bound_rate = 1 / allreduce_bound(topo, nbytes=1.0)
    assert bound_rate * (1 - TOLERANCE) <= p.optimum <= bound_rate * (1 + 1e-9)
    assert p.rate >= p.optimum * (1 - DEPTH_SLACK) * (1 - 1e-9)
    assert p.weights.sum() == pytest.approx(p.rate)
    _, _, usage = pair_usage(topo, ranks)
    load = sum(w * np.asarray(usage[t].sum(axis=0)).ravel() for t, w in zip(p.pairs, p.weights, strict=True))
    assert (load <= topo.compiled.capacity * (1 + 1e-6)).all()
    for t, parent, h in zip(p.pairs, p.parents, p.heights, strict=True):
        assert len(t) == len(ranks) - 1 and (parent < 0).sum() == 1
        assert tree_heights(parent).max() == h


def test_multiplicative_weights_alone_nearly_reach_the_bound():
    """The trees of the multiplicative-weights start, weighted by an LP over them alone, are
    within a few percent of the optimum on BCube(3,2), where the stars are far from it."""
    topo = parse_spec("bcube:n=3,k=2")
    ranks = tuple(topo.servers)
    iu, iv, usage = pair_usage(topo, ranks)
    caps = topo.compiled.capacity / topo.compiled.capacity.max()
    oracles = TreeOracles(len(ranks), iu, iv, seed=0)
    stars = TreeLP(caps)
    for tree, _ in oracles.prims(np.ones(len(iu)), np.arange(len(ranks)), (1,)):
        stars.add(np.asarray(usage[tree].sum(axis=0)).ravel())
    lp = TreeLP(caps)
    for tree in multiplicative_weights(usage, caps, oracles):
        assert len(tree) == len(ranks) - 1
        lp.add(np.asarray(usage[tree].sum(axis=0)).ravel())
    best = 1 / (allreduce_bound(topo, ranks, 1.0) * topo.compiled.capacity.max())
    assert stars.solve()[0].sum() < 0.8 * best
    assert lp.solve()[0].sum() >= 0.95 * best


def test_tree_packing_on_a_fattree_uses_stars_over_spread_paths():
    """d-mod-k spreading makes every rank's star optimal on a fat-tree, and the schedule's
    transfers take the spread paths, not the lowest-index default routes."""
    topo = parse_spec("fattree:k=4")
    p = pack(topo, tuple(topo.servers))
    assert (p.heights == 1).all() and p.iterations == 1
    s = build("tree-packing", topo, None, 1e6)
    assert validate(s).ok
    default = {(t.src, t.dst): topo.path(t.src, t.dst) for t in s}
    assert any(t.path != default[t.src, t.dst] for t in s)


def test_prim_trees_respect_their_depth_limit():
    n = 9
    iu, iv = np.triu_indices(n, 1)
    price = np.random.default_rng(0).random(len(iu))
    trees = TreeOracles(n, iu, iv, seed=0).prims(price, np.arange(n))
    expected = [(limit, root) for limit in DEPTHS for root in range(n)]
    for (tree, depth), (limit, root) in zip(trees, expected, strict=True):
        g = {(int(iu[k]), int(iv[k])) for k in tree}
        assert len(g) == n - 1 and depth <= limit
        if limit == 1:  # a star around its root
            assert all(root in e for e in g)
