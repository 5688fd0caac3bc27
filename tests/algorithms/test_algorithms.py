"""Every registered algorithm on every topology family yields a schedule the validator and the
numeric check accept; closed forms for ring, halving-doubling and parameter servers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arsched.algorithms import NotApplicable, UnknownAlgorithm, algorithms, build, get
from arsched.algorithms.dbtree import tree_heights
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import bcube, parse_spec, ring, star, torus

NAMES = [a.name for a in algorithms()]
NATIVE = {"bcube-native": "bcube", "torus-native": "torus"}  # apply to one family, all servers
SPECS = [
    "bcube:n=2,k=1",
    "bcube:n=3,k=1",
    "dcell:n=2,k=1",
    "dcell:n=3,k=1",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=3",
    "torus:dims=3x3",
    "torus:dims=2x2x2",
    "fattree:k=4",
    "ring:n=7",
    "star:n=6",
    "leafspine:leaves=3,spines=2,servers_per_leaf=3",
]


def test_registry_has_the_documented_names():
    assert {"ps", "sharded-ps", "ring", "multi-ring", "rhd", "dbtree", "bcube-native", "torus-native"} <= set(
        NAMES
    )
    for a in algorithms():
        assert a.summary and a.build.__doc__


def test_unknown_algorithm_is_one_sentence():
    with pytest.raises(UnknownAlgorithm) as info:
        get("nope")
    assert "\n" not in str(info.value) and "ring" in str(info.value)


@settings(max_examples=60)
@given(
    name=st.sampled_from(NAMES),
    spec=st.sampled_from(SPECS),
    data=st.data(),
    nbytes=st.floats(min_value=1.0, max_value=1e9),
)
def test_every_algorithm_on_every_family_is_valid(name, spec, data, nbytes):
    topo = parse_spec(spec)
    n = data.draw(st.integers(min_value=2, max_value=len(topo.servers)), label="ranks")
    ranks = list(data.draw(st.permutations(topo.servers), label="order"))[:n]
    if name in NATIVE and not (spec.startswith(NATIVE[name]) and tuple(ranks) == topo.servers):
        with pytest.raises(NotApplicable):
            build(name, topo, ranks, nbytes)
        return
    s = build(name, topo, ranks, nbytes)
    report = validate(s)
    assert report.ok, report.message
    assert numeric_check(s, seed=1).ok
    assert s.ranks == tuple(ranks) and s.nbytes == nbytes and s.algorithm == name


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name):
    topo = parse_spec("torus:dims=3x3" if name == "torus-native" else "bcube:n=3,k=1")
    a, b = build(name, topo, None, 1e6), build(name, topo, None, 1e6)
    for col in ("step", "chunk", "src", "dst", "op", "path_id"):
        assert np.array_equal(getattr(a, col), getattr(b, col))
    assert a.paths == b.paths


@pytest.mark.parametrize("name", NAMES)
def test_bad_input(name):
    topo = star(4)
    with pytest.raises(NotApplicable):
        build(name, topo, ["s0"], 1e6)
    with pytest.raises(ArschedError):
        build(name, topo, ["s0", "w0"], 1e6)
    with pytest.raises(ArschedError):
        build(name, topo, None, -1.0)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("alpha", [0.0, 5e-6])
def test_ring_closed_form_on_a_ring_graph(n, alpha):
    bw, lat, m = 1e9, 2e-6, 4e6
    s = build("ring", ring(n, bandwidth=bw, latency=lat), None, m, order="given")
    flow = simulate_flow(s, alpha=alpha)
    assert flow.time_s == pytest.approx(2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat), rel=1e-9)
    rounds = simulate_rounds(s, alpha=alpha)
    assert rounds.rounds == 2 * (n - 1)
    assert len(s) == 2 * (n - 1) * n


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17])
def test_rhd_step_count(n):
    s = build("rhd", star(n), None, 1e6)
    k = math.floor(math.log2(n))
    assert s.num_steps == (2 * k if n == 2**k else 2 * k + 2)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_rhd_moves_the_bandwidth_optimal_volume_for_powers_of_two(n):
    s = build("rhd", star(n), None, 1e6)
    # every rank sends (N-1)/N of the vector in each phase: 2(N-1) chunk-sends of size M/N
    assert len(s) * s.chunk_bytes == pytest.approx(n * 2 * (n - 1) / n * 1e6)


@pytest.mark.parametrize("n", [3, 6, 9])
def test_ps_traffic_and_time_on_a_star(n):
    m, bw, lat, alpha = 8e6, 1e9, 1e-6, 5e-6
    s = build("ps", star(n, bandwidth=bw, latency=lat), None, m)
    assert len(s) == 2 * (n - 1)  # every non-root rank sends once and receives once
    t = simulate_flow(s, alpha=alpha).time_s
    # N-1 flows share the root's downlink, then N-1 share its uplink; two links per path
    assert t == pytest.approx(2 * ((n - 1) * m / bw + alpha + 2 * lat), rel=1e-9)


def test_ps_root_given_and_chosen():
    topo = parse_spec("bcube:n=3,k=1")
    assert build("ps", topo, None, 1e6, root="s4").meta["params"]["root"] == "s4"
    with pytest.raises(ArschedError):
        build("ps", topo, None, 1e6, root="w0_0")
    chosen = build("ps", topo, None, 1e6)
    # the chosen root is at least as fast as every other root
    best = simulate_flow(chosen).time_s
    for r in topo.servers:
        assert best <= simulate_flow(build("ps", topo, None, 1e6, root=r)).time_s * (1 + 1e-12)


def test_sharded_ps_is_bandwidth_optimal_on_a_star():
    n, m, bw = 8, 8e6, 1e9
    s = build("sharded-ps", star(n, bandwidth=bw, latency=0.0), None, m)
    bound = simulate_flow(s, alpha=0.0).bound_s
    assert simulate_flow(s, alpha=0.0).time_s == pytest.approx(bound, rel=1e-9)


def test_chunks_must_divide():
    with pytest.raises(ArschedError):
        build("ring", star(4), None, 1e6, chunks=6)
    s = build("ring", star(4), None, 1e6, chunks=8)
    assert s.num_chunks == 8 and validate(s).ok


@pytest.mark.parametrize(
    ("name", "topo"),
    [
        ("bcube-native", lambda: bcube(4, 1, latency=0.0)),
        ("bcube-native", lambda: bcube(3, 2, latency=0.0)),
        ("bcube-native", lambda: bcube(2, 0, latency=0.0)),
        ("torus-native", lambda: torus((4, 4), latency=0.0)),
        ("torus-native", lambda: torus((3, 3, 3), latency=0.0)),
        ("torus-native", lambda: torus((5,), latency=0.0)),
    ],
)
@pytest.mark.parametrize("synchronous", [False, True])
def test_native_schemes_attain_the_bandwidth_bound(name, topo, synchronous):
    """With no latency and no overhead every port carries its share in every phase."""
    s = build(name, topo(), None, 1e8)
    assert validate(s).ok and numeric_check(s).ok
    r = simulate_flow(s, alpha=0.0, synchronous=synchronous)
    assert r.time_s == pytest.approx(r.bound_s, rel=1e-9)


@pytest.mark.parametrize("name", ["bcube-native", "torus-native"])
def test_native_schemes_refuse_other_topologies_and_subsets(name):
    with pytest.raises(NotApplicable, match="applies only"):
        build(name, parse_spec("fattree:k=4"), None, 1e6)
    own = parse_spec("bcube:n=3,k=1" if name == "bcube-native" else "torus:dims=3x3")
    with pytest.raises(NotApplicable, match="all servers"):
        build(name, own, own.servers[:4], 1e6)


@pytest.mark.parametrize("spec", ["torus:dims=4x4", "ring:n=8", "dcell:n=3,k=1"])
def test_multi_ring_is_no_slower_than_one_ring(spec):
    topo = parse_spec(spec)
    multi = simulate_flow(build("multi-ring", topo, None, 64e6)).time_s
    assert multi <= simulate_flow(build("ring", topo, None, 64e6)).time_s * (1 + 1e-9)


@pytest.mark.parametrize(
    "spec", ["star:n=6", "bcube:n=3,k=1", "dcell:n=3,k=1", "torus:dims=3x3", "fattree:k=4", "bcube:n=3,k=2"]
)
def test_tree_packing_lp_reaches_the_bound(spec):
    """The packed trees' total rate X gives the bound: M / X = 2·T*_AG (ForestColl's theorem),
    within the stopping tolerance; the shallower packing gives up at most DEPTH_SLACK; every
    tree spans the ranks and fits the capacities with the others."""
    from arsched.algorithms.packing import DEPTH_SLACK, TOLERANCE, pack, pair_usage
    from arsched.bounds import allreduce_bound

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
    from arsched.algorithms.packing import _Oracles, _TreeLP, multiplicative_weights, pair_usage
    from arsched.bounds import allreduce_bound

    topo = parse_spec("bcube:n=3,k=2")
    ranks = tuple(topo.servers)
    iu, iv, usage = pair_usage(topo, ranks)
    caps = topo.compiled.capacity / topo.compiled.capacity.max()
    oracles = _Oracles(len(ranks), iu, iv, seed=0)
    stars = _TreeLP(caps)
    for tree, _ in oracles.prims(np.ones(len(iu)), np.arange(len(ranks)), (1,)):
        stars.add(np.asarray(usage[tree].sum(axis=0)).ravel())
    lp = _TreeLP(caps)
    for tree in multiplicative_weights(usage, caps, oracles):
        assert len(tree) == len(ranks) - 1
        lp.add(np.asarray(usage[tree].sum(axis=0)).ravel())
    best = 1 / (allreduce_bound(topo, ranks, 1.0) * topo.compiled.capacity.max())
    assert stars.solve()[0].sum() < 0.8 * best
    assert lp.solve()[0].sum() >= 0.95 * best


def test_tree_packing_on_a_fattree_uses_stars_over_spread_paths():
    """d-mod-k spreading makes every rank's star optimal on a fat-tree, and the schedule's
    transfers take the spread paths, not the lowest-index default routes."""
    from arsched.algorithms.packing import pack

    topo = parse_spec("fattree:k=4")
    p = pack(topo, tuple(topo.servers))
    assert (p.heights == 1).all() and p.iterations == 1
    s = build("tree-packing", topo, None, 1e6)
    assert validate(s).ok
    default = {(t.src, t.dst): topo.path(t.src, t.dst) for t in s}
    assert any(t.path != default[t.src, t.dst] for t in s)


def test_hang_picks_the_centre():
    """Hung from its centre a tree is as low as it can be: its height is the smallest
    eccentricity, checked against networkx on random trees."""
    import networkx as nx

    from arsched.algorithms.packing import hang

    rng = np.random.default_rng(3)
    for n in (2, 3, 7, 20):
        iu, iv = np.triu_indices(n, 1)
        index = {(a, b): k for k, (a, b) in enumerate(zip(iu.tolist(), iv.tolist(), strict=True))}
        g = nx.random_labeled_tree(n, seed=int(rng.integers(1000)))
        tree = np.array(sorted(index[min(e), max(e)] for e in g.edges))
        parent, h = hang(n, iu, iv, tree)
        assert h == min(nx.eccentricity(g).values()) == tree_heights(parent).max()
        assert {frozenset((v, int(parent[v]))) for v in range(n) if parent[v] >= 0} == {
            frozenset(e) for e in g.edges
        }


def test_prim_trees_respect_their_depth_limit():
    from arsched.algorithms.packing import DEPTHS, _Oracles

    n = 9
    iu, iv = np.triu_indices(n, 1)
    price = np.random.default_rng(0).random(len(iu))
    trees = _Oracles(n, iu, iv, seed=0).prims(price, np.arange(n))
    expected = [(limit, root) for limit in DEPTHS for root in range(n)]
    for (tree, depth), (limit, root) in zip(trees, expected, strict=True):
        g = {(int(iu[k]), int(iv[k])) for k in tree}
        assert len(g) == n - 1 and depth <= limit
        if limit == 1:  # a star around its root
            assert all(root in e for e in g)


def test_tree_packing_streams_close_to_the_bound_with_in_order_connections():
    topo = parse_spec("dcell:n=3,k=1")
    s = build("tree-packing", topo, None, 256e6, stages=24)
    assert validate(s).ok
    fifo, ring_ = simulate_flow(s, fifo=True), simulate_flow(build("ring", topo, None, 256e6), fifo=True)
    assert fifo.gap < 1.1 and fifo.time_s < ring_.time_s / 3


def test_step_time_of_a_path_matches_the_hand_count():
    """A path 0-1-2 hung from 1: the leaves add into 1 at step 0, 1 copies back at step 2.
    One chunk: two busy steps of M/B; two stages: four busy steps of M/(2B)."""
    from arsched.algorithms.packing import Packing, _tree_edges, step_time
    from arsched.algorithms.routes import route

    topo = parse_spec("ring:n=3")
    bw, m, over = float(topo.compiled.capacity[0]), 3e6, 7e-6
    parent = np.array([1, -1, 1])
    p = Packing(bw, bw, bw, [np.array([0, 2])], [parent], np.array([1]), np.array([bw]), 1)
    routes = route(topo, tuple(topo.servers), *_tree_edges(p.parents))
    cap = topo.compiled.capacity
    assert step_time(p, routes, cap, 1, 1, m, over) == pytest.approx(2 * m / bw + 2 * over)
    assert step_time(p, routes, cap, 1, 2, m, over) == pytest.approx(4 * m / (2 * bw) + 4 * over)


@pytest.mark.parametrize("spec", ["fattree:k=4", "bcube:n=3,k=1"])
def test_tree_packing_pipelines_only_where_it_pays(spec):
    """Without level steps, the default picks between the pipeline and one unpipelined step per
    level: on a fat-tree (stars, every step loads the links alike) the unpipelined schedule, on
    BCube (deep trees) the pipeline; either way it is at least as fast as the other in the flow
    model."""
    from arsched.algorithms.packing import UNITS

    topo = parse_spec(spec)
    chosen = build("tree-packing", topo, None, 64e6, levels=False)
    flat = chosen.meta["params"]["stages"] == 1
    assert flat == spec.startswith("fattree")
    other = build("tree-packing", topo, None, 64e6, units=UNITS, stages=None if flat else 1)
    for s in (chosen, other):
        assert validate(s).ok
    assert simulate_flow(chosen, fifo=True).time_s <= simulate_flow(other, fifo=True).time_s


def test_tree_packing_rejects_bad_parameters():
    topo = parse_spec("star:n=4")
    for params in ({"units": 0}, {"stages": 1.5}, {"alpha": -1.0}, {"iterations": 0}):
        with pytest.raises(ArschedError):
            build("tree-packing", topo, None, 1e6, **params)


def test_tree_packing_refuses_more_than_its_rank_limit():
    from arsched.algorithms.packing import MAX_RANKS

    with pytest.raises(NotApplicable, match="limited"):
        build("tree-packing", star(MAX_RANKS + 1), None, 1e6)
