"""Tree packing for AllGather, ReduceScatter, Broadcast and Reduce (packing.forest,
packing.collectives): valid schedules on two-way, one-way and asymmetric networks, LP rates at
the collectives' bounds, Broadcast at the max flow from its root."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import algorithms, build
from arsched.algorithms.packing import collectives as packing_collectives
from arsched.algorithms.packing.forest import pack_forest
from arsched.algorithms.packing.lp import DEPTH_SLACK, TOLERANCE
from arsched.algorithms.packing.pipeline import MAX_STAGES, stage_candidates
from arsched.collective import dumps, numeric_check, validate
from arsched.collective_bounds import bandwidth_bound
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

COLLECTIVES = ["allgather", "reduce_scatter", "broadcast", "reduce"]
NETWORKS = [
    "star:n=6",
    "bcube:n=3,k=1",
    "dcell:n=2,k=1",
    "torus:dims=3x3",
    "torus:dims=3x3,oneway=1",
    "ring:n=8,bandwidth=400Gbps,reverse=100Gbps",
    "fattree:k=4",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=3",
]


def test_tree_packing_builds_every_collective_but_alltoall():
    for collective in COLLECTIVES:
        assert "tree-packing" in {a.name for a in algorithms(collective)}
    assert "tree-packing" not in {a.name for a in algorithms("alltoall")}


@pytest.mark.parametrize("spec", NETWORKS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_schedules_are_valid_and_never_beat_the_bound(spec, collective):
    topo = parse_spec(spec)
    root = topo.servers[-1] if collective in ("broadcast", "reduce") else None
    s = build("tree-packing", topo, None, 16e6, collective, root)
    assert (s.collective, s.root, s.algorithm) == (collective, root, "tree-packing")
    report = validate(s)
    assert report.ok, report.message
    assert numeric_check(s, seed=1).ok
    assert simulate_flow(s).gap >= 1 - 1e-9


@pytest.mark.parametrize("spec", NETWORKS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_the_lp_reaches_the_bound(spec, collective):
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    rooted = collective in ("broadcast", "reduce")
    f = pack_forest(topo, ranks, collective, 0 if rooted else None)
    seconds = bandwidth_bound(topo, ranks, 1.0, collective, ranks[0] if rooted else None)
    assert f.limit == pytest.approx(1 / (seconds if rooted else seconds * len(ranks)))
    assert f.optimum >= f.limit * (1 - TOLERANCE)
    assert f.optimum <= f.limit * (1 + 1e-6)
    assert f.rate >= f.optimum * (1 - DEPTH_SLACK) * (1 - 1e-6)
    per_root = np.bincount(f.roots, weights=f.weights)
    assert (per_root[np.unique(f.roots)] >= f.rate * (1 - 1e-6)).all()
    assert len(np.unique(f.roots)) == (1 if rooted else len(ranks))


@pytest.mark.parametrize(("spec", "ports"), [("star:n=8", 1), ("bcube:n=4,k=1", 2)])
def test_broadcast_reaches_the_max_flow_from_its_root(spec, ports):
    """A server of a star has one link each way, a BCube(4, 1) server one to each of its two
    switches: the max flow from the root is `ports` links, which the packing reaches."""
    topo = parse_spec(spec)
    c = topo.compiled
    link = float(c.capacity[c.link_src == c.index[topo.servers[0]]].max())
    for collective in ("broadcast", "reduce"):
        f = pack_forest(topo, tuple(topo.servers), collective, 0)
        assert f.optimum == pytest.approx(ports * link, rel=TOLERANCE)


def test_a_gpu_box_pair_broadcasts_over_trees_three_deep_at_the_full_rate():
    """Two A100 boxes: the root's box NICs carry the other box's copy, so a tree needs the root,
    a GPU of its box, that GPU's rail peer and its box: three levels. The two-hub trees reach
    the max flow at that depth (the one-hub trees and Prim's stop at four)."""
    topo = parse_spec("hgx:boxes=2")
    for collective in ("broadcast", "reduce"):
        f = pack_forest(topo, tuple(topo.servers), collective, 0)
        assert f.rate >= f.limit * (1 - TOLERANCE)
        assert f.heights.max() == 3
        s = build("tree-packing", topo, None, 16e6, collective, topo.servers[0])
        assert validate(s).ok and numeric_check(s, seed=2).ok


def test_two_hub_trees_hang_every_rank_within_three_levels():
    """`_chains` on random prices: row i is a tree from the root whose first hub (the i-th
    other rank) is the root's child, its height is its depth, and it costs what the cheapest
    second hub's tree costs (brute force over every second hub)."""
    from arsched.algorithms.packing.forest import _chains
    from arsched.algorithms.trees import tree_depths

    rng = np.random.default_rng(5)
    n, root = 7, 2
    price = rng.random((n, n))
    np.fill_diagonal(price, 0.0)
    parents, heights = _chains(price, root)
    hubs = [v for v in range(n) if v != root]
    assert len(parents) == len(hubs)
    for a, tree, height in zip(hubs, parents, heights, strict=True):
        assert tree[root] == -1 and tree[a] == root and (np.delete(tree, root) >= 0).all()
        assert tree_depths(tree).max() == height <= 3
        rest = [v for v in range(n) if v != root]
        cheapest = min(
            price[root, a]
            + price[a, b]
            + sum(min(price[root, v], price[a, v], price[b, v]) for v in rest if v not in (a, b))
            for b in rest
            if b != a
        )
        assert sum(price[tree[v], v] for v in rest) == pytest.approx(cheapest)


def test_rank_subsets_in_any_order_and_roots():
    topo = parse_spec("bcube:n=3,k=1")
    ranks = [topo.servers[i] for i in (7, 2, 4, 0, 5)]
    for collective in COLLECTIVES:
        root = ranks[2] if collective in ("broadcast", "reduce") else None
        s = build("tree-packing", topo, ranks, 1e6, collective, root, stages=3, units=4)
        assert s.ranks == tuple(ranks) and validate(s).ok


def test_bad_arguments_are_refused_in_one_sentence():
    topo = parse_spec("star:n=4")
    with pytest.raises(ArschedError, match="root"):
        build("tree-packing", topo, None, 1e6, "broadcast", "nowhere")
    with pytest.raises(ArschedError, match="no root"):
        build("tree-packing", topo, None, 1e6, "allgather", topo.servers[0])
    with pytest.raises(ArschedError, match="stages"):
        build("tree-packing", topo, None, 1e6, "allgather", stages=0)
    with pytest.raises(ArschedError, match="alpha"):
        build("tree-packing", topo, None, 1e6, "reduce", alpha=-1.0)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_the_chosen_pipeline_is_the_fastest_candidate(collective, monkeypatch):
    options = [(32, 2), (8, 16), (64, 8)]
    monkeypatch.setattr(packing_collectives, "stage_candidates", lambda first, stages: options)
    topo = parse_spec("torus:dims=3x3,oneway=1")
    root = topo.servers[0] if collective in ("broadcast", "reduce") else None
    pipeline_only = {} if root else {"levels": False}  # the sharded ones' unpipelined trees win here
    chosen = build("tree-packing", topo, None, 16e6, collective, root, **pipeline_only)
    params = chosen.meta["params"]
    times = {
        (u, s): simulate_flow(
            build("tree-packing", topo, None, 16e6, collective, root, units=u, stages=s)
        ).time_s
        for u, s in options
    }
    assert times[params["units"], params["stages"]] == min(times.values())
    assert simulate_flow(chosen).time_s == min(times.values())


def test_candidates_are_distinct_and_within_the_stage_limit():
    options = stage_candidates((40, 1), MAX_STAGES)
    assert options[0] == (40, 1)
    assert len(set(options)) == len(options)
    assert all(1 <= s <= MAX_STAGES for _, s in options)


def test_candidates_past_the_transfer_budget_are_not_simulated(monkeypatch):
    """The choice is bounded by work, not by the clock: a candidate whose transfers do not fit
    in what is left of the budget is skipped, so the same inputs give the same bytes."""
    options = [(32, 2), (8, 16), (64, 8)]
    monkeypatch.setattr(packing_collectives, "stage_candidates", lambda first, stages: options)
    topo = parse_spec("torus:dims=3x3,oneway=1")
    sizes = {
        o: len(build("tree-packing", topo, None, 16e6, "allgather", units=o[0], stages=o[1])) for o in options
    }
    monkeypatch.setattr(packing_collectives, "SELECT_TRANSFERS", min(sizes[o] for o in options[1:]) - 1)
    chosen = build("tree-packing", topo, None, 16e6, "allgather", levels=False)
    assert (chosen.meta["params"]["units"], chosen.meta["params"]["stages"]) == options[0]
    assert dumps(chosen) == dumps(build("tree-packing", topo, None, 16e6, "allgather", levels=False))


def test_beyond_the_rank_limit_reduce_scatter_and_allgather_are_balanced_halves(monkeypatch):
    """Past `MAX_RANKS` (lowered here, so that the test stays small) there is no LP: ReduceScatter
    and AllGather are the halves of the balanced AllReduce steps, valid, exact and near their
    bound on a network no constant was tuned on; the rooted collectives, a forced pipeline and
    one-way links, which need the LP, are refused."""
    from arsched.algorithms import NotApplicable

    monkeypatch.setattr(packing_collectives, "MAX_RANKS", 8)
    topo = parse_spec("jellyfish:switches=6,ports=4,net_ports=2,seed=11")
    for collective in ("reduce_scatter", "allgather"):
        s = build("tree-packing", topo, None, 16e6, collective)
        assert validate(s).ok and numeric_check(s).ok and s.meta["params"]["levels"] is True
        assert simulate_flow(s).gap < 1.3
        with pytest.raises(NotApplicable, match="only for ReduceScatter and AllGather"):
            build("tree-packing", topo, None, 16e6, collective, units=2, stages=4)
    for collective in ("broadcast", "reduce"):
        with pytest.raises(NotApplicable, match="only for ReduceScatter and AllGather"):
            build("tree-packing", topo, None, 16e6, collective)
    with pytest.raises(NotApplicable, match="equal reverses"):
        build("tree-packing", parse_spec("torus:dims=3x3,oneway=1"), None, 16e6, "allgather")
