"""Lower bounds: the cut bound against closed forms, the background.md §3 table and a brute force
over all node subsets; the latency bound against hand-computed cases; bad ranks."""

from __future__ import annotations

import math
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arsched.bounds import (
    BoundError,
    allgather_bound,
    allgather_cut,
    allreduce_bound,
    latency_bound,
    lower_bound,
)
from arsched.errors import ArschedError
from arsched.topology import (
    DEFAULT_BANDWIDTH,
    Topology,
    bcube,
    dcell,
    fattree,
    jellyfish,
    parse_spec,
    ring,
    star,
    torus,
)


def brute_force_cut(t: Topology, ranks=None) -> float:
    """max over node sets S holding some but not all ranks of |S ∩ ranks| / N / egress(S)."""
    ranks = list(t.servers if ranks is None else ranks)
    c = t.compiled
    n = c.num_nodes
    assert n <= 12
    masks = ((np.arange(1, 2**n - 1)[:, None] >> np.arange(n)) & 1).astype(bool)
    egress = (masks[:, c.link_src] & ~masks[:, c.link_dst]) @ c.capacity
    k = masks[:, [c.index[r] for r in ranks]].sum(axis=1)
    ok = (k >= 1) & (k <= len(ranks) - 1)
    assert (egress[ok] > 0).all()
    return float((k[ok] / len(ranks) / egress[ok]).max())


def check_cut_consistent(t: Topology, ranks=None) -> None:
    """The reported cut really has the reported ranks inside and egress, and gives the value."""
    ranks = list(t.servers if ranks is None else ranks)
    cut = allgather_cut(t, ranks)
    inside = set(cut.cut)
    assert cut.ranks_inside == sum(r in inside for r in ranks)
    assert 1 <= cut.ranks_inside < len(ranks)
    egress = sum(lk.bandwidth for lk in t.links if lk.src in inside and lk.dst not in inside)
    assert cut.egress == pytest.approx(egress, rel=1e-12)
    assert cut.seconds_per_byte == pytest.approx(cut.ranks_inside / len(ranks) / egress, rel=1e-12)


# ---- background.md §3 -----------------------------------------------------------------------------


def _dcell_servers(n: int, k: int) -> int:
    t = n
    for _ in range(k):
        t = t * (t + 1)
    return t


# (topology, number of ranks N, ports per server p, value in the table). Every family below has
# a binding cut of all servers but one behind its p links: bound = 2 (N-1) / N / p in M/B.
TABLE = [
    pytest.param(lambda: bcube(4, 1), 4**2, 2, 0.938, id="BCube(4,1)"),
    pytest.param(lambda: bcube(4, 2), 4**3, 3, 0.656, id="BCube(4,2)"),
    pytest.param(lambda: dcell(4, 1), _dcell_servers(4, 1), 2, 0.950, id="DCell(4,1)"),
    pytest.param(lambda: dcell(3, 2), _dcell_servers(3, 2), 3, 0.662, id="DCell(3,2)"),
    pytest.param(lambda: torus((4, 4)), 4 * 4, 4, 0.469, id="torus-4x4"),
    pytest.param(lambda: fattree(4), 4**3 // 4, 1, 1.875, id="fattree-4"),
    pytest.param(lambda: fattree(8), 8**3 // 4, 1, 1.984, id="fattree-8"),
    pytest.param(lambda: jellyfish(16, 4, 3, seed=1), 16 * (4 - 3), 1, 1.875, id="jellyfish-16-4-3"),
]


@pytest.mark.parametrize(("make", "n", "ports", "table"), TABLE)
def test_bound_table(make, n, ports, table):
    t = make()
    assert len(t.servers) == n
    assert {t.ports(s) for s in t.servers} == {ports}
    closed = Fraction(2 * (n - 1), n * ports)
    value = allreduce_bound(t, nbytes=1) * DEFAULT_BANDWIDTH
    assert abs(value - float(closed)) < 1e-3
    assert abs(float(closed) - table) <= 5e-4 + 1e-12  # the table rounds the closed form
    cut = allgather_cut(t)
    assert cut.exact
    assert value == pytest.approx(2 * cut.seconds_per_byte * DEFAULT_BANDWIDTH, rel=1e-12)


# ---- hand-computed cases ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_star(n):
    b, m = 12.5e9, 1e8
    expected = 2 * (n - 1) / n * m / b
    assert allreduce_bound(star(n, bandwidth=b), nbytes=m) == pytest.approx(expected, rel=1e-12)
    assert allgather_bound(star(n, bandwidth=b), nbytes=m) == pytest.approx(expected / 2, rel=1e-12)


@pytest.mark.parametrize("n", [3, 4, 7, 10])
def test_ring_graph_uses_both_ports(n):
    b, m = 3e9, 5e7
    expected = 2 * (n - 1) / n * m / (2 * b)
    assert allreduce_bound(ring(n, bandwidth=b), nbytes=m) == pytest.approx(expected, rel=1e-12)


def test_bound_scales_with_size_and_bandwidth():
    slow, fast = bcube(3, 1), bcube(3, 1, bandwidth=4 * DEFAULT_BANDWIDTH)
    assert allreduce_bound(slow, nbytes=7e6) == pytest.approx(7e6 * allreduce_bound(slow), rel=1e-12)
    assert allreduce_bound(fast) == pytest.approx(allreduce_bound(slow) / 4, rel=1e-12)
    assert allreduce_bound(slow) == pytest.approx(2 * allgather_bound(slow), rel=1e-15)


def test_binding_cut_is_a_whole_rack():
    """Two switches with two servers each at bandwidth 10, one inter-switch cable at 1: the
    rack behind the slow cable binds (2 ranks behind 1), not a single server (3 behind 10)."""
    cables = [
        ("a0", "A", 10, 0),
        ("a1", "A", 10, 0),
        ("b0", "B", 10, 0),
        ("b1", "B", 10, 0),
        ("A", "B", 1, 0),
    ]
    t = Topology.from_cables("two-racks", ["a0", "a1", "b0", "b1"], ["A", "B"], cables)
    m = 8.0
    assert allreduce_bound(t, nbytes=m) == pytest.approx(2 * (m / 4) * 2 / 1, rel=1e-12)
    cut = allgather_cut(t)
    assert (cut.ranks_inside, cut.egress) == (2, 1.0)
    assert set(cut.cut) in ({"A", "a0", "a1"}, {"B", "b0", "b1"})
    assert 2 * (m / 4) * 3 / 10 < allreduce_bound(t, nbytes=m)  # the single-server cut is weaker
    assert allreduce_bound(t, nbytes=m) == pytest.approx(2 * m * brute_force_cut(t), rel=1e-12)


def _hetero(bw_low: float, bw_high: float) -> Topology:
    cables = [
        ("a0", "A", bw_low),
        ("a1", "A", bw_high),
        ("b0", "B", bw_low),
        ("b1", "B", bw_high),
        ("A", "B", bw_low),
        ("c0", "B", bw_high),
        ("c0", "a0", bw_low),
        ("a1", "b1", bw_high),
        ("d0", "C", bw_high),
        ("C", "A", bw_low),
    ]
    return Topology.from_cables(
        "hetero", ["a0", "a1", "b0", "b1", "c0", "d0"], ["A", "B", "C"], [(*c, 1e-6) for c in cables]
    )


@pytest.mark.parametrize("ranks", [None, ("b1", "a0", "d0"), ("c0", "a1")])
def test_non_integer_bandwidth_ratio_against_brute_force(ranks):
    t = _hetero(3e9, 7.3e9)
    assert len(t.nodes) <= 10
    cut = allgather_cut(t, ranks)
    assert cut.seconds_per_byte == pytest.approx(brute_force_cut(t, ranks), rel=1e-9)
    check_cut_consistent(t, ranks)


@pytest.mark.parametrize("ranks", [None, ("b1", "a0", "d0")])
def test_irrational_bandwidth_ratio_is_a_true_lower_bound(ranks):
    t = _hetero(3e9, 3e9 * math.sqrt(2) * math.pi)
    cut = allgather_cut(t, ranks)
    best = brute_force_cut(t, ranks)
    assert 0 <= cut.tolerance <= 1e-3
    assert cut.seconds_per_byte <= best * (1 + 1e-12)  # never above the optimum: a true bound
    assert cut.seconds_per_byte >= best * (1 - cut.tolerance) * (1 - 1e-12)
    check_cut_consistent(t, ranks)


@st.composite
def small_graphs(draw):
    n = draw(st.integers(2, 9))
    g = nx.gnp_random_graph(n, draw(st.floats(0.0, 0.7)), seed=draw(st.integers(0, 2**31)))
    for i in range(1, n):  # a random spanning tree keeps it connected
        g.add_edge(i, draw(st.integers(0, i - 1)))
    assert nx.is_connected(g)
    kinds = draw(st.lists(st.sampled_from(["server", "switch"]), min_size=n, max_size=n))
    kinds[0] = kinds[n - 1] = "server"
    asymmetric = draw(st.booleans())
    d = nx.DiGraph()
    for v in g:
        d.add_node(v, kind=kinds[v])
    for u, v in g.edges:
        bw = draw(st.integers(1, 9))
        d.add_edge(u, v, bandwidth=bw, latency=1e-6)
        d.add_edge(v, u, bandwidth=draw(st.integers(1, 9)) if asymmetric else bw, latency=1e-6)
    t = Topology.from_networkx(d, name="random")
    servers = list(t.servers)
    order = draw(st.permutations(servers))
    ranks = None if draw(st.booleans()) else order[: draw(st.integers(2, len(servers)))]
    return t, ranks


@settings(max_examples=50)
@given(small_graphs())
def test_property_cut_equals_brute_force(case):
    t, ranks = case
    cut = allgather_cut(t, ranks)
    assert cut.exact
    assert cut.seconds_per_byte == pytest.approx(brute_force_cut(t, ranks), rel=1e-9)
    check_cut_consistent(t, ranks)


# ---- latency bound ----------------------------------------------------------------------------


def levels(n: int, k: int) -> int:
    """ceil(log_{k+1} n) in integers: the fewest rounds in which k ports can reach n ranks."""
    lv, reach = 0, 1
    while reach < n:
        reach *= k + 1
        lv += 1
    return lv


@pytest.mark.parametrize("n", [2, 3, 4, 8, 9, 10])
@pytest.mark.parametrize("alpha", [0.0, 3e-6, 2e-5])
def test_latency_bound_on_a_ring(n, alpha):
    lat = 1e-6
    t = ring(n, latency=lat)
    far = lat * (n // 2)
    assert latency_bound(t, alpha=alpha) == pytest.approx(alpha + far, rel=1e-12)
    ports = 1 if n == 2 else 2
    expected = max(alpha + far, levels(n, ports) * (alpha + lat))
    assert latency_bound(t, alpha=alpha, port_model=True) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 5, 8, 9])
@pytest.mark.parametrize("alpha", [0.0, 1e-6])
def test_latency_bound_on_a_star(n, alpha):
    lat = 2e-6
    t = star(n, latency=lat)
    assert latency_bound(t, alpha=alpha) == pytest.approx(alpha + 2 * lat, rel=1e-12)
    expected = max(alpha + 2 * lat, levels(n, 1) * (alpha + 2 * lat))
    assert latency_bound(t, alpha=alpha, port_model=True) == pytest.approx(expected, rel=1e-12)


def test_latency_bound_takes_the_fastest_path_and_the_ranks_given():
    t = Topology.from_cables(
        "tri",
        ["a", "b", "c", "d"],
        [],
        [("a", "b", 1e9, 10e-6), ("a", "c", 1e9, 1e-6), ("c", "b", 1e9, 1e-6)],
    )
    assert latency_bound(t, ranks=["a", "b", "c"]) == pytest.approx(2e-6, rel=1e-12)
    assert latency_bound(ring(8, latency=1e-6), ranks=["s0", "s1"]) == pytest.approx(1e-6, rel=1e-12)
    with pytest.raises(BoundError, match="cannot reach"):
        latency_bound(t)  # d is isolated


def test_lower_bound_is_the_larger_of_the_two():
    t = ring(6, latency=1e-6)
    for nbytes in (1.0, 1e9):
        expected = max(allreduce_bound(t, nbytes=nbytes), latency_bound(t, alpha=5e-6))
        assert lower_bound(t, nbytes=nbytes, alpha=5e-6) == expected
    assert lower_bound(t, nbytes=1.0, alpha=5e-6) == latency_bound(t, alpha=5e-6)
    assert lower_bound(t, nbytes=1e9) == allreduce_bound(t, nbytes=1e9)


# ---- bad ranks ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranks", "words"),
    [
        (["s0", "s1", "s0"], "duplicate"),
        (["s0", "w0"], "'w0'"),
        (["s0"], "two ranks"),
        ([], "two ranks"),
        (["s0", "nowhere"], "'nowhere'"),
    ],
)
@pytest.mark.parametrize("fn", [allgather_cut, allreduce_bound, latency_bound])
def test_bad_ranks_raise_bound_error(ranks, words, fn):
    with pytest.raises(BoundError) as e:
        fn(star(4), ranks)
    assert words in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, ArschedError)


def test_spec_bandwidths_reach_the_bound():
    t = parse_spec("fattree:k=4,bandwidth=100Gbps/100Gbps/100Gbps")
    assert allreduce_bound(t, nbytes=1) == pytest.approx(2 * 15 / 16 / (100e9 / 8), rel=1e-12)


def test_bandwidths_1e308_apart_give_a_true_finite_bound():
    """A 1e-300 B/s link beside 100 Gb/s ones: their ratio overflows a float, so the cut is
    searched on rounded capacities; the slow link is bypassed through the ring's other side."""
    t = ring(4)
    slow = Topology(
        "slow",
        [(n, t.kind(n)) for n in t.nodes],
        [
            (lk.src, lk.dst, 1e-300 if (lk.src, lk.dst) == ("s0", "s1") else lk.bandwidth, lk.latency)
            for lk in t.links
        ],
    )
    cut = allgather_cut(slow)
    assert not cut.exact and math.isfinite(cut.seconds_per_byte)
    assert cut.seconds_per_byte >= allgather_cut(t).seconds_per_byte  # never below the fast ring's
    assert cut.egress <= 2 * DEFAULT_BANDWIDTH


# ---- shortcuts: the certificate and twin symmetry give the plain search's very result --------------


def assert_same_as_plain(t: Topology, ranks=None) -> None:
    """Fast and plain search agree on everything but the number of max flows (the certificate
    may spend one max flow that the search then does not reuse)."""
    fast = allgather_cut(t, ranks)
    plain = allgather_cut(t, ranks, shortcuts=False)
    assert plain.seconds_per_byte == fast.seconds_per_byte  # bit for bit
    assert (plain.cut, plain.ranks_inside, plain.egress) == (fast.cut, fast.ranks_inside, fast.egress)
    assert (plain.exact, plain.tolerance) == (fast.exact, fast.tolerance)
    assert fast.maxflows <= plain.maxflows + 1  # the certificate's one test may be wasted


def _reweighted(t: Topology, rng: np.random.Generator, values, directed: bool) -> Topology:
    """The same wiring with bandwidths drawn from `values` per cable (per link if directed);
    with `directed`, a few links lose their reverse (every node keeps a way in and out)."""
    drawn = {}
    links = []
    for lk in t.links:
        cable = lk.src, lk.dst if directed else tuple(sorted((lk.src, lk.dst)))
        bw = drawn.setdefault(cable, float(rng.choice(values)))
        links.append((lk.src, lk.dst, bw, lk.latency))
    if directed:
        keep = []
        for lk in links:
            if rng.random() < 0.15 and lk[0] < lk[1]:
                continue  # one-way: the reverse link stays
            keep.append(lk)
        links = keep
    return Topology(f"{t.name}-re", [(n, t.kind(n)) for n in t.nodes], links)


FAMILIES = [
    "fattree:k=4",
    "fattree:k=6",
    "bcube:n=3,k=1",
    "bcube:n=2,k=2",
    "dcell:n=3,k=1",
    "torus:dims=3x4",
    "ring:n=7",
    "star:n=6",
    "leafspine:leaves=3,spines=2,servers_per_leaf=3",
    "jellyfish:switches=10,ports=4,net_ports=3,seed=2",
]


@pytest.mark.parametrize("spec", FAMILIES)
@pytest.mark.parametrize("seed", range(6))
def test_shortcuts_match_the_plain_search(spec, seed):
    """Every family, as built and with random bandwidths (uniform, a few shared levels, or
    arbitrary ratios; symmetric or directed with one-way links), on all ranks and a subset."""
    rng = np.random.default_rng(seed)
    base = parse_spec(spec)
    values = [[1e9], [1e9, 4e9], [1e9, 1e9, 2.5e9, 1e10], [1e9, 1.7e9, 3.3e9, 9.1e9]][seed % 4]
    t = base if seed == 0 else _reweighted(base, rng, values, directed=seed >= 3)
    try:
        latency_bound(t)
    except BoundError:
        return  # a one-way link cut some rank off
    assert_same_as_plain(t)
    servers = list(t.servers)
    subset = [
        servers[i] for i in sorted(rng.choice(len(servers), size=max(2, len(servers) // 2), replace=False))
    ]
    assert_same_as_plain(t, subset)


def _oversubscribed(leaves: int, spines: int, per_leaf: int, server_bw: float, uplink_bw: float) -> Topology:
    servers = [f"s{i}" for i in range(leaves * per_leaf)]
    cables = [(s, f"l{i // per_leaf}", server_bw, 1e-6) for i, s in enumerate(servers)]
    cables += [(f"l{i}", f"p{j}", uplink_bw, 1e-6) for i in range(leaves) for j in range(spines)]
    return Topology.from_cables(
        "oversub", servers, [f"l{i}" for i in range(leaves)] + [f"p{j}" for j in range(spines)], cables
    )


@pytest.mark.parametrize("uplink", [0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 1.0, 2.0])
def test_one_link_servers_across_the_oversubscription_edge(uplink):
    """Leaf-spine with slower and slower uplinks: where the single-server cut binds, the
    certificate answers without a max flow; where a rack binds, the search finds the rack;
    either way the plain search's result, and the brute force's value on the small one."""
    t = _oversubscribed(4, 2, 4, 1e9, uplink * 1e9)
    assert_same_as_plain(t)
    small = _oversubscribed(2, 1, 4, 1e9, uplink * 1e9)
    assert_same_as_plain(small)
    assert allgather_cut(small).seconds_per_byte == pytest.approx(brute_force_cut(small), rel=1e-12)
    single = (len(t.servers) - 1) / len(t.servers) / 1e9
    if allgather_cut(t).seconds_per_byte == pytest.approx(single, rel=1e-12):
        assert allgather_cut(t).ranks_inside == len(t.servers) - 1


@settings(max_examples=60)
@given(small_graphs())
def test_property_shortcuts_match_the_plain_search(case):
    t, ranks = case
    assert_same_as_plain(t, ranks)


def test_one_link_per_server_fattree_needs_no_max_flow():
    """Issue 21's target: the k=8 fat-tree's bound without the 128 max flows of the plain search."""
    t = fattree(8)
    fast, plain = allgather_cut(t), allgather_cut(t, shortcuts=False)
    assert (fast.maxflows, plain.maxflows) == (0, 128)
    assert fast.seconds_per_byte == plain.seconds_per_byte


def test_twin_servers_share_their_max_flows():
    """Servers on one switch are twins: the search tests one of them per ratio, not each."""
    t = _oversubscribed(4, 2, 4, 1e9, 0.1e9)  # a rack binds: no certificate, the search runs
    fast, plain = allgather_cut(t), allgather_cut(t, shortcuts=False)
    assert fast.ranks_inside == 12 and fast.seconds_per_byte == plain.seconds_per_byte  # all racks but one
    assert fast.maxflows < plain.maxflows / 2


@pytest.mark.parametrize("spec", ["torus:dims=8x8", "bcube:n=8,k=1", "ring:n=64", "dcell:n=7,k=1"])
@pytest.mark.parametrize("seed", range(4))
def test_checked_automorphisms_keep_the_plain_result(spec, seed):
    """Networks with many ranks and no twins: the automorphisms found (and checked) merge
    the ranks' tests; reweighted or one-way copies break the symmetry, and a wrongly
    trusted map would show here as a different cut."""
    base = parse_spec(spec)
    rng = np.random.default_rng(seed)
    values = [[1e9], [1e9, 2e9], [1e9, 1.3e9, 4e9], [1e9, 2e9]][seed]
    t = base if seed == 0 else _reweighted(base, rng, values, directed=seed == 3)
    try:
        latency_bound(t)
    except BoundError:
        return
    assert_same_as_plain(t)
    if seed == 0 and spec in ("torus:dims=8x8", "ring:n=64"):
        assert allgather_cut(t).maxflows < allgather_cut(t, shortcuts=False).maxflows / 4


def test_only_checked_maps_count_as_automorphisms():
    """The Frucht graph is 3-regular (colour refinement cannot tell its nodes apart) yet has no
    automorphism but the identity: every candidate map is proposed and rejected by the check."""
    from arsched.bounds import _CutSearch, _Symmetry

    g = nx.DiGraph()
    g.add_nodes_from((f"s{u}", {"kind": "server"}) for u in range(12))
    for u, v in nx.frucht_graph().edges:
        g.add_edge(f"s{u}", f"s{v}", bandwidth=1e9, latency=1e-6)
        g.add_edge(f"s{v}", f"s{u}", bandwidth=1e9, latency=1e-6)
    t = Topology.from_networkx(g, name="frucht")
    search = _CutSearch(t, tuple(t.servers))
    sym = _Symmetry(search)
    sym.budget = 10**6
    base = sym.refine(sym.is_rank.astype(np.uint64))
    assert len(np.unique(base)) == 1
    idx = search.rank_idx
    assert all(sym.mapping(base, int(idx[0]), int(v)) is None for v in idx[1:])
    assert sym.is_automorphism(np.arange(search.n))
    swap = np.arange(search.n)
    swap[[idx[0], idx[1]]] = swap[[idx[1], idx[0]]]
    assert not sym.is_automorphism(swap)
    torus_search = _CutSearch(torus((4, 4)), tuple(torus((4, 4)).servers))
    shift = (np.arange(16) + 4) % 16  # one step along the first axis of the row-major 4x4 torus
    assert _Symmetry(torus_search).is_automorphism(shift)
