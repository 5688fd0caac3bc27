"""Level-balanced tree steps (arsched.algorithms.levels): the step dynamic program against
brute force, the LP against the bandwidth bound, and the schedules against the validator and
the flow model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from arsched.algorithms import NotApplicable, build
from arsched.algorithms import levels as L
from arsched.algorithms.dbtree import tree_heights
from arsched.algorithms.packing import pack
from arsched.algorithms.routes import route
from arsched.bounds import allreduce_bound
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


@pytest.mark.parametrize("seed", range(5))
def test_cheapest_steps_matches_brute_force(seed):
    """Every assignment of steps 1..R to a 6-node tree's edges, a child's before its
    parent's: the dynamic program finds the cheapest, and returns steps that cost that much."""
    rng = np.random.default_rng(seed)
    n, steps = 6, 4
    parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, n)])
    cost = rng.random((n, steps))
    kids = np.arange(1, n)
    best = np.inf
    for choice in itertools.product(range(1, steps + 1), repeat=n - 1):
        step = np.array([steps + 1, *choice])
        if (step[kids] < step[parent[kids]]).all():
            best = min(best, cost[kids, step[kids] - 1].sum())
    value, step = L.cheapest_steps(parent, tree_heights(parent), cost)
    assert value == pytest.approx(best)
    assert step[0] == steps + 1 and (step[kids] < step[parent[kids]]).all()
    assert cost[kids, step[kids] - 1].sum() == pytest.approx(best)


@pytest.mark.parametrize(
    ("spec", "hops", "peers"),
    [("torus:dims=4x4", 1, 4), ("dcell:n=3,k=1", 2, 3), ("bcube:n=3,k=1", 2, 4), ("fattree:k=4", 6, 15)],
)
def test_the_overlay_is_the_nearest_pairs_that_join_all_ranks(spec, hops, peers):
    """A torus's own links; a DCell's cell mates (through the switch) and its direct link; a
    BCube's servers one switch away; on a fat-tree the pods are 6 links apart, so every pair."""
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    routes = L.overlay(topo, ranks)
    assert routes.hops.max() == hops
    assert (np.bincount(routes.src, minlength=len(ranks)) == peers).all()
    every = route(topo, ranks, *np.nonzero(~np.eye(len(ranks), dtype=bool)))
    kept = every.index(routes.src, routes.dst, len(ranks))
    for i, q in enumerate(kept.tolist()):  # the subset keeps each pair's own route
        assert (
            routes.links[routes.ptr[i] : routes.ptr[i + 1]] == every.links[every.ptr[q] : every.ptr[q + 1]]
        ).all()
    assert ((every.hops <= hops).sum()) == len(routes.src)


def test_levels_are_limited_in_ranks():
    topo = parse_spec("bcube:n=4,k=2")
    assert not L.applies(topo, tuple(topo.servers))
    with pytest.raises(NotApplicable, match="limited to 36 ranks"):
        build("tree-packing", topo, None, 1e6, levels=True)


def test_levels_reject_bad_parameters():
    topo = parse_spec("ring:n=4")
    with pytest.raises(ArschedError, match="replace the pipeline"):
        build("tree-packing", topo, None, 1e6, levels=True, stages=4)
    with pytest.raises(ArschedError, match="true or false"):
        build("tree-packing", topo, None, 1e6, levels="yes")


@pytest.mark.parametrize(
    "spec",
    [
        "ring:n=5",
        "torus:dims=3x3",
        "torus:dims=2x2x2",
        "dcell:n=2,k=1",
        "bcube:n=3,k=1",
        "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    ],
)
def test_forced_levels_are_valid(spec):
    """Valid and numerically right, every transfer on its overlay pair's own route."""
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    s = build("tree-packing", topo, None, 16e6, levels=True)
    assert s.meta["params"]["levels"] is True
    assert s.step.min() == 0 and s.step.max() == 2 * s.meta["level_steps"] - 1  # R up, R down
    assert s.num_chunks == L.chunk_count(len(ranks), 16e6) == 16e6 // L.MIN_CHUNK
    assert validate(s).ok and numeric_check(s).ok
    routes = L.overlay(topo, ranks)
    c = topo.compiled
    want = {
        (ranks[a], *(c.node_ids[x] for x in c.link_dst[routes.links[routes.ptr[i] : routes.ptr[i + 1]]]))
        for i, a in enumerate(routes.src.tolist())
    }
    assert {s.paths[i] for i in np.unique(s.path_id).tolist()} <= want


def test_levels_reach_the_bound_on_the_torus():
    """On the 4×4 torus the LP's time is within its tolerance of the bandwidth bound; the
    default picks the level steps at 256 MB, and with in-order connections they run within 5 %
    of the bound, faster than the pipelined trees."""
    topo = parse_spec("torus:dims=4x4")
    ranks = tuple(topo.servers)
    size = 256e6
    bound = allreduce_bound(topo, ranks, size)
    plan = L.balance(topo, ranks, pack(topo, ranks).parents, size, 7e-6, bound)
    assert bound <= plan.lp_time <= bound * (1 + L.TOLERANCE) * (1 + 1e-9)
    assert plan.counts.sum() == L.chunk_count(len(ranks), size) == L.CHUNKS
    chosen = build("tree-packing", topo, None, size)
    assert chosen.meta["params"]["levels"] is True and validate(chosen).ok
    piped = build("tree-packing", topo, None, size, levels=False)
    assert validate(piped).ok
    gap = simulate_flow(chosen, fifo=True).gap
    assert gap <= 1.05
    assert simulate_flow(chosen, fifo=True).time_s < simulate_flow(piped, fifo=True).time_s


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "dcell:n=2,k=1"])
def test_levels_beat_the_pipeline_on_switched_networks(spec):
    """Over the overlay's few peers per rank, in-order connections keep the level steps in
    order on switched networks too: the default picks them at 256 MB, within 5 % of the bound
    in the flow model with in-order connections, and faster than the pipelined trees."""
    topo = parse_spec(spec)
    chosen = build("tree-packing", topo, None, 256e6)
    piped = build("tree-packing", topo, None, 256e6, levels=False)
    assert chosen.meta["params"]["levels"] is True and validate(chosen).ok and validate(piped).ok
    fast = simulate_flow(chosen, fifo=True)
    assert fast.gap <= 1.05
    assert fast.time_s < simulate_flow(piped, fifo=True).time_s
