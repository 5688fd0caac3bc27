"""Routing: default paths, ECMP alternatives, k-shortest paths and hop matrices."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from arsched.errors import TopologyError
from arsched.topology import (
    SERVER,
    SWITCH,
    Link,
    Topology,
    bcube,
    dcell,
    fattree,
    jellyfish,
    leafspine,
    ring,
    star,
    torus,
)


def assert_valid_path(t: Topology, p: tuple[str, ...], src: str, dst: str) -> None:
    assert p[0] == src and p[-1] == dst
    assert len(set(p)) == len(p), "path repeats a node"
    assert all(t.has_link(a, b) for a, b in itertools.pairwise(p))


# ---- ECMP on the fat-tree ----------------------------------------------------------------------
@pytest.mark.parametrize("k", [4, 6])
def test_fattree_ecmp_between_pods(k):
    t = fattree(k)
    h = k // 2
    src, dst = t.servers[0], t.servers[-1]  # hosts of pod 0 and pod k-1
    paths = t.router.ecmp_paths(src, dst)
    assert len(paths) == h * h  # one per core switch
    assert len(set(paths)) == len(paths)
    assert {len(p) for p in paths} == {7}
    assert paths[0] == t.path(src, dst)
    assert sorted(p[3] for p in paths) == sorted(f"c{i}" for i in range(h * h))
    for p in paths:
        assert_valid_path(t, p, src, dst)


def test_fattree_ecmp_within_pod_and_edge():
    t = fattree(4)
    # hosts s0, s1 share edge switch e0_0; s2 is under e0_1 in the same pod
    assert t.router.ecmp_paths("s0", "s1") == [("s0", "e0_0", "s1")]
    same_pod = t.router.ecmp_paths("s0", "s2")
    assert len(same_pod) == 2  # via either aggregation switch of the pod
    assert {p[2] for p in same_pod} == {"a0_0", "a0_1"}
    assert {len(p) for p in same_pod} == {5}


def test_ecmp_limit_and_order():
    t = bcube(3, 2)
    src, dst = "s0", t.servers[-1]  # differ in all three digits: 3! orders
    paths = t.router.ecmp_paths(src, dst)
    assert len(paths) == 6
    index = t.compiled.index
    keys = [tuple(index[x] for x in p) for p in paths]
    assert keys == sorted(keys)
    assert t.router.ecmp_paths(src, dst, limit=2) == paths[:2]


# ---- k shortest paths -------------------------------------------------------------------------
def test_k_shortest_paths_fattree():
    t = fattree(4)
    g = nx.DiGraph((lk.src, lk.dst) for lk in t.links)
    k = 8
    paths = t.router.k_shortest_paths("s0", "s15", k)
    assert len(paths) == k
    assert len(set(paths)) == k
    lengths = [len(p) for p in paths]
    assert lengths == sorted(lengths)
    assert lengths[0] == t.router.hops("s0", "s15") + 1
    # the first (k/2)^2 = 4 are exactly the equal-cost shortest paths, then longer ones follow
    assert set(paths[:4]) == set(t.router.ecmp_paths("s0", "s15"))
    assert lengths[4] > lengths[3]
    for p in paths:
        assert_valid_path(t, p, "s0", "s15")
    # independent: the k shortest lengths among all simple paths (bounded enumeration)
    all_lengths = sorted(len(p) for p in nx.all_simple_paths(g, "s0", "s15", cutoff=8))
    assert lengths == all_lengths[:k]


def test_k_shortest_paths_ring_has_only_two():
    t = ring(5)
    paths = t.router.k_shortest_paths("s0", "s2", 5)
    assert paths == [("s0", "s1", "s2"), ("s0", "s4", "s3", "s2")]


def test_k_shortest_paths_increasing_on_leafspine():
    t = leafspine(3, 2, 2)
    paths = t.router.k_shortest_paths("s0", "s5", 4)
    assert [len(p) for p in paths] == sorted(len(p) for p in paths)
    assert len(paths) == 4
    assert len(paths[0]) == 5


def test_k_shortest_paths_same_node():
    with pytest.raises(TopologyError):
        ring(4).router.k_shortest_paths("s0", "s0", 2)


def test_k_shortest_paths_bad_k():
    t = ring(4)
    for k in (0, -1):
        with pytest.raises(TopologyError):
            t.router.k_shortest_paths("s0", "s1", k)


# ---- unreachable and unknown nodes -------------------------------------------------------------
@pytest.fixture
def islands() -> Topology:
    """Two separate stars: {a0, a1} on switch wa and {b0, b1} on switch wb."""
    return Topology.from_cables(
        "islands",
        ["a0", "a1", "b0", "b1"],
        ["wa", "wb"],
        [
            ("a0", "wa", 1.0, 0.0),
            ("a1", "wa", 1.0, 0.0),
            ("b0", "wb", 1.0, 0.0),
            ("b1", "wb", 1.0, 0.0),
        ],
    )


def test_unreachable_raises(islands):
    r = islands.router
    with pytest.raises(TopologyError, match="reach"):
        r.hops("a0", "b0")
    with pytest.raises(TopologyError, match="reach"):
        r.path("a0", "b1")
    with pytest.raises(TopologyError):
        islands.path("b0", "a1")
    with pytest.raises(TopologyError):
        r.ecmp_paths("a0", "b0")
    with pytest.raises(TopologyError):
        r.k_shortest_paths("a0", "b0", 3)
    with pytest.raises(TopologyError):
        r.paths([("a0", "a1"), ("a0", "b0")])
    assert r.path("a0", "a1") == ("a0", "wa", "a1")


def test_hop_matrix_marks_unreachable(islands):
    m = islands.router.hop_matrix(["a0", "a1", "b0", "b1"])
    expected = np.array([[0, 2, -1, -1], [2, 0, -1, -1], [-1, -1, 0, 2], [-1, -1, 2, 0]])
    assert (m == expected).all()


def test_unknown_nodes_and_same_node(islands):
    r = islands.router
    for call in (
        lambda: r.hops("a0", "nope"),
        lambda: r.hops("nope", "a0"),
        lambda: r.path("nope", "a0"),
        lambda: r.ecmp_paths("a0", "nope"),
        lambda: r.k_shortest_paths("nope", "a0", 1),
        lambda: r.hop_matrix(["a0", "nope"]),
        lambda: r.prepare(["nope"]),
        lambda: r.path("a0", "a0"),
        lambda: r.ecmp_paths("a0", "a0"),
    ):
        with pytest.raises(TopologyError):
            call()
    assert r.hops("a0", "a0") == 0


# ---- hop matrices -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "topo",
    [
        bcube(3, 1),
        dcell(3, 1),
        fattree(4),
        torus((3, 4)),
        ring(7),
        star(5),
        leafspine(3, 2, 2),
        jellyfish(10, 5, 3, seed=3),
    ],
    ids=lambda t: t.name,
)
def test_hop_matrix_symmetric_and_matches_hops(topo):
    nodes = list(topo.nodes)
    m = topo.router.hop_matrix(nodes)
    assert m.shape == (len(nodes), len(nodes))
    assert (m == m.T).all()
    assert (np.diag(m) == 0).all()
    g = nx.Graph((lk.src, lk.dst) for lk in topo.links)
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    for (i, u), (j, v) in itertools.product(enumerate(nodes[:12]), enumerate(nodes)):
        assert m[i, j] == lengths[u][v] == topo.router.hops(u, v)


def test_directed_links_are_routed_one_way():
    # a directed triangle x -> y -> z -> x: going back costs two hops
    t = Topology(
        "triangle",
        [("x", SERVER), ("y", SERVER), ("z", SWITCH)],
        [Link("x", "y"), Link("y", "z"), Link("z", "x")],
    )
    m = t.router.hop_matrix(["x", "y", "z"])
    assert m.tolist() == [[0, 1, 2], [2, 0, 1], [1, 2, 0]]
    assert t.path("y", "x") == ("y", "z", "x")
    assert t.path("x", "y") == ("x", "y")
    assert t.router.ecmp_paths("y", "x") == [("y", "z", "x")]


def test_default_path_breaks_ties_by_lowest_index():
    # a square s0 - w1 - s3 and s0 - w2 - s3: both are two hops; w1 comes first in node order
    cables = [
        ("s0", "w2", 1.0, 0.0),
        ("s0", "w1", 1.0, 0.0),
        ("w1", "s3", 1.0, 0.0),
        ("w2", "s3", 1.0, 0.0),
    ]
    t = Topology.from_cables("square", ["s0", "s3"], ["w1", "w2"], cables)
    assert t.path("s0", "s3") == ("s0", "w1", "s3")
    assert t.path("s3", "s0") == ("s3", "w1", "s0")
    # declare the switches in the other order and the tie goes the other way
    u = Topology.from_cables("square", ["s0", "s3"], ["w2", "w1"], cables)
    assert u.path("s0", "s3") == ("s0", "w2", "s3")


def test_router_is_cached_and_paths_stable():
    t = torus((4, 4))
    assert t.router is t.router
    pairs = [(a, b) for a in t.servers[:4] for b in t.servers[-4:]]
    t.router.prepare(b for _, b in pairs)
    first = t.router.paths(pairs)
    assert first == [t.path(a, b) for a, b in pairs]
    assert first == t.router.paths(pairs)
    for (a, b), p in zip(pairs, first, strict=True):
        assert_valid_path(t, p, a, b)


def test_path_links_marks_missing_hops():
    t = ring(6)
    c = t.compiled
    assert c.path_links(("s0", "s2")).tolist() == [-1]
    assert c.path_links(("s0", "nope", "s1")).tolist() == [-1, -1]
    assert c.path_links(("s0",)).tolist() == []
    links = c.path_links(("s0", "s1", "s2")).tolist()
    assert [(t.links[i].src, t.links[i].dst) for i in links] == [("s0", "s1"), ("s1", "s2")]
    assert c.link_index(c.index["s0"], c.index["s3"]) == -1


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "fattree:k=4", "dcell:n=2,k=1", "torus:dims=3x3"])
def test_link_paths_match_path_one_by_one(spec):
    from arsched.topology import parse_spec

    t = parse_spec(spec)
    c, r = t.compiled, t.router
    idx = np.array([c.index[s] for s in t.servers])
    src, dst = np.repeat(idx, len(idx)), np.tile(idx, len(idx))
    keep = src != dst
    ptr, links = r.link_paths(src[keep], dst[keep])
    for i, (a, b) in enumerate(zip(src[keep], dst[keep], strict=True)):
        expect = c.path_links(r.path(c.node_ids[a], c.node_ids[b]))
        assert links[ptr[i] : ptr[i + 1]].tolist() == expect.tolist()


def test_link_paths_refuse_a_pair_with_no_path(islands):
    c = islands.compiled
    with pytest.raises(TopologyError, match="reach"):
        islands.router.link_paths(np.array([c.index["a0"]]), np.array([c.index["b0"]]))


def _all_pairs(t: Topology) -> tuple[np.ndarray, np.ndarray]:
    c = t.compiled
    idx = np.array([c.index[s] for s in t.servers])
    src, dst = np.repeat(idx, len(idx)), np.tile(idx, len(idx))
    keep = src != dst
    return src[keep], dst[keep]


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "fattree:k=4", "dcell:n=2,k=1", "torus:dims=3x3"])
def test_spread_paths_are_equal_cost_paths(spec):
    from arsched.topology import parse_spec

    t = parse_spec(spec)
    c, r = t.compiled, t.router
    src, dst = _all_pairs(t)
    ptr, links = r.link_paths(src, dst, spread=True)
    for i, (a, b) in enumerate(zip(src, dst, strict=True)):
        mine = links[ptr[i] : ptr[i + 1]]
        nodes = (c.node_ids[a], *(c.node_ids[c.link_dst[x]] for x in mine))
        assert nodes in r.ecmp_paths(c.node_ids[a], c.node_ids[b], limit=1000)
        assert nodes[-1] == c.node_ids[b]


@pytest.mark.parametrize(
    "spec", ["fattree:k=4", "hgx:boxes=3,gpus_per_box=4", "leafspine:leaves=3,spines=2,servers_per_leaf=2"]
)
def test_spread_paths_follow_the_digit_rule_pair_by_pair(spec):
    """The vectorised spreading equals the rule applied to one pair at a time: at a switch, the
    (t mod count)-th next hop on a shortest path in neighbour order, t the destination's spread
    key with the digits of the earlier switches divided out; at a server, the first."""
    from arsched.topology import parse_spec

    t = parse_spec(spec)
    c, r = t.compiled, t.router
    src, dst = _all_pairs(t)
    ptr, links = r.link_paths(src, dst, spread=True)
    by_source = np.lexsort((c.link_dst, c.link_src))
    for i, (a, b) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        dist, digits, at, mine = r._dist_to(b), int(t.spread_key[b]), a, []
        while at != b:
            out = by_source[c.link_src[by_source] == at]
            good = [x for x in out.tolist() if dist[c.link_dst[x]] == dist[at] - 1]
            pick = 0
            if t.kind(c.node_ids[at]) == "switch":
                pick, digits = digits % len(good), digits // len(good)
            mine.append(good[pick])
            at = int(c.link_dst[good[pick]])
        assert links[ptr[i] : ptr[i + 1]].tolist() == mine


@pytest.mark.parametrize("k", [4, pytest.param(8, marks=pytest.mark.slow)])
def test_spread_balances_all_to_all_on_a_fattree(k):
    """d-mod-k: all-to-all traffic loads every switch-to-switch link of a layer equally, which
    lowest-index routing does not; traffic to one destination follows a single tree."""
    t = fattree(k)
    c = t.compiled
    src, dst = _all_pairs(t)
    loads = {}
    for spread in (False, True):
        ptr, links = t.router.link_paths(src, dst, spread=spread)
        loads[spread] = np.bincount(links, minlength=c.num_links)
        if spread:
            owner = np.repeat(np.arange(len(src)), np.diff(ptr))
            hop = np.stack([dst[owner], c.link_src[links]], axis=1)
            nexts = {tuple(h): set() for h in hop.tolist()}
            for h, x in zip(hop.tolist(), c.link_dst[links].tolist(), strict=True):
                nexts[tuple(h)].add(x)
            assert max(len(v) for v in nexts.values()) == 1
    layer = np.array([n[0] for n in c.node_ids])  # s(erver), e(dge), a(ggregation), c(ore)
    for up in ("se", "ea", "ac"):
        for a, b in (up, up[::-1]):
            on = (layer[c.link_src] == a) & (layer[c.link_dst] == b)
            assert loads[True][on].max() == loads[True][on].min(), (a, b)
    assert loads[False].max() > loads[True].max()


@pytest.mark.parametrize(
    "spec",
    ["leafspine:leaves=4,spines=3,servers_per_leaf=3", "fattree:k=4", "torus:dims=4x3",
     "jellyfish:switches=12,ports=6,net_ports=3,seed=1", "bcube:n=3,k=1", "dcell:n=3,k=1"],
)  # fmt: skip
def test_ecmp_picks_are_the_listed_paths(spec):
    from arsched.topology import parse_spec

    t = parse_spec(spec)
    c = t.compiled
    sources = np.array([c.index[s] for s in t.servers])
    for b in t.servers:
        for pick in (0, 1, 5, 7919 * 3 + 2):
            ptr, links = t.router.ecmp_picks(sources, c.index[b], sources * pick + 3, 16)
            for i, a in enumerate(t.servers):
                got = links[ptr[i] : ptr[i + 1]]
                if a == b:
                    assert len(got) == 0
                    continue
                paths = t.router.ecmp_paths(a, b, limit=16)
                assert np.array_equal(got, c.path_links(paths[(sources[i] * pick + 3) % len(paths)]))


def _leaf_uplink_loads(t: Topology, order_kept: bool) -> list[np.ndarray]:
    """Per leaf, the pairs its uplinks carry when every GPU sends to every GPU of its rail (its
    local index) in the other boxes, routed with spreading; on `t` as built, or on the same
    network without its spread order."""
    if not order_kept:
        t = Topology(t.name, [(n, t.kind(n)) for n in t.nodes], t.links)
    c = t.compiled
    gpus = 4
    pairs = [
        (c.index[f"s{a}"], c.index[f"s{b}"])
        for a in range(len(t.servers))
        for b in range(len(t.servers))
        if a % gpus == b % gpus and a // gpus != b // gpus
    ]
    src, dst = map(np.array, zip(*pairs, strict=True))
    _, links = t.router.link_paths(src, dst, spread=True)
    load = np.bincount(links, minlength=c.num_links)
    leaves = [n for n in t.switches if n.startswith("leaf")]
    return [
        load[
            (c.link_src == c.index[leaf])
            & np.isin(c.link_dst, [c.index[s] for s in t.switches if s.startswith("spine")])
        ]
        for leaf in leaves
    ]


def test_spread_balances_every_rail_over_the_spines_of_a_gpu_cluster():
    """A rail leaf gathers GPU i of every box of its unit, so numbered box by box the GPUs of a
    rail share their index mod 4 and d-mod-k sends a rail's traffic to the other units over one
    spine of two; read in the fabric's rail-major spread order, each leaf splits it evenly."""
    from arsched.topology import parse_spec

    t = parse_spec("hgx:boxes=6,gpus_per_box=4,su=2,spines=2")
    balanced = _leaf_uplink_loads(t, order_kept=True)
    assert all(up.min() == up.max() > 0 for up in balanced)
    lopsided = _leaf_uplink_loads(t, order_kept=False)
    assert all(up.min() == 0 for up in lopsided)


def test_spread_order_defaults_to_node_order_and_names_servers_only():
    t = fattree(4)
    assert (t.spread_key == np.arange(t.compiled.num_nodes)).all()
    nodes = [(n, t.kind(n)) for n in t.nodes]
    s = Topology("again", nodes, t.links, spread_order=list(reversed(t.servers)))
    assert s.spread_key[s.compiled.index[t.servers[-1]]] == 0
    assert s.spread_key[s.compiled.index[t.switches[0]]] == len(t.servers)
    for bad in ([t.switches[0]], [t.servers[0], t.servers[0]], ["nowhere"]):
        with pytest.raises(TopologyError, match="spread order"):
            Topology("bad", nodes, t.links, spread_order=bad)
