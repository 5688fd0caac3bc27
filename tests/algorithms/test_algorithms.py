"""Every registered algorithm on every topology family yields a schedule the validator and the
numeric check accept; closed forms for ring, halving-doubling and parameter servers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arsched.algorithms import NotApplicable, UnknownAlgorithm, algorithms, build, get
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import bcube, parse_spec, ring, star, torus

NAMES = [a.name for a in algorithms() if a.name != "auto"]  # auto returns the others' (test_auto.py)
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
    try:
        s = build(name, topo, ranks, nbytes)
    except NotApplicable:
        assert name == "hierarchical"  # needs two or more equal groups of ranks (test_hierarchical.py)
        return
    report = validate(s)
    assert report.ok, report.message
    assert numeric_check(s, seed=1).ok
    assert s.ranks == tuple(ranks) and s.nbytes == nbytes and s.algorithm == name


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name):
    leaves = "leafspine:leaves=3,spines=2,servers_per_leaf=3"  # hierarchical needs groups
    topo = parse_spec({"torus-native": "torus:dims=3x3", "hierarchical": leaves}.get(name, "bcube:n=3,k=1"))
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
    s = build("rhd", star(n), None, 1e6, stages=1)
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


@pytest.mark.parametrize(
    ("name", "k"), [("rhd", 4), ("rhd", 8), ("sharded-ps", 4), ("sharded-ps", 6), ("sharded-ps", 8)]
)
def test_textbook_schemes_attain_the_bound_on_fat_trees_with_spread_routes(name, k):
    """Halving-doubling (a power-of-two number of hosts) and the sharded PS are bandwidth-optimal on
    a non-blocking fat-tree when switches spread their pairs over the equal-cost uplinks; on the
    lowest-index routes their core traffic met at one core switch (k=8: 14× the bound)."""
    s = build(name, parse_spec(f"fattree:k={k},latency=0"), None, 1e8)
    assert validate(s).ok
    r = simulate_flow(s, alpha=0.0)
    assert r.time_s == pytest.approx(r.bound_s, rel=1e-9)


@pytest.mark.parametrize("name", ["bcube-native", "torus-native"])
def test_native_schemes_refuse_other_topologies_and_subsets(name):
    with pytest.raises(NotApplicable, match="built by arsched, not fattree"):
        build(name, parse_spec("fattree:k=4"), None, 1e6)
    own = parse_spec("bcube:n=3,k=1" if name == "bcube-native" else "torus:dims=3x3")
    with pytest.raises(NotApplicable, match="all servers"):
        build(name, own, own.servers[:4], 1e6)


@pytest.mark.parametrize("spec", ["torus:dims=4x4", "ring:n=8", "dcell:n=3,k=1"])
def test_multi_ring_is_no_slower_than_one_ring(spec):
    topo = parse_spec(spec)
    multi = simulate_flow(build("multi-ring", topo, None, 64e6)).time_s
    assert multi <= simulate_flow(build("ring", topo, None, 64e6)).time_s * (1 + 1e-9)
