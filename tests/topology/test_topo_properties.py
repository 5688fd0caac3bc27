"""Hypothesis properties that every topology family must have, over small random parameters."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import networkx as nx
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from arsched.errors import TopologyError
from arsched.topology import (
    SERVER,
    Topology,
    bcube,
    dcell,
    fattree,
    from_dict,
    jellyfish,
    leafspine,
    ring,
    star,
    to_dict,
    torus,
)

# fewer examples than the profile (every example builds topologies); the family strategies filter
SETTINGS = settings(
    max_examples=30, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


# ---- strategies: (builder, kwargs) of small members of every family ---------------------------
def _bcube():
    return (
        st.tuples(st.integers(2, 4), st.integers(0, 2))
        .filter(lambda nk: nk[0] ** (nk[1] + 1) <= 64)
        .map(lambda nk: (bcube, {"n": nk[0], "k": nk[1]}))
    )


def _dcell():
    return st.sampled_from([(2, 0), (3, 0), (2, 1), (3, 1), (4, 1), (5, 1), (2, 2)]).map(
        lambda nk: (dcell, {"n": nk[0], "k": nk[1]})
    )


def _fattree():
    return st.sampled_from([2, 4, 6]).map(lambda k: (fattree, {"k": k}))


def _torus():
    return (
        st.lists(st.integers(1, 5), min_size=1, max_size=3)
        .filter(lambda d: math.prod(d) >= 2)
        .map(lambda d: (torus, {"dims": tuple(d)}))
    )


def _ring():
    return st.integers(2, 12).map(lambda n: (ring, {"n": n}))


def _star():
    return st.integers(2, 10).map(lambda n: (star, {"n": n}))


def _leafspine():
    return (
        st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(1, 4))
        .filter(lambda p: p[0] * p[2] >= 2)
        .map(lambda p: (leafspine, {"leaves": p[0], "spines": p[1], "servers_per_leaf": p[2]}))
    )


def _jellyfish():
    return (
        st.integers(5, 12)
        .flatmap(
            lambda s: st.tuples(
                st.just(s), st.integers(3, min(5, s - 1)), st.integers(1, 2), st.integers(0, 10**6)
            )
        )
        .map(
            lambda p: (
                jellyfish,
                {"switches": p[0], "ports": p[1] + p[2], "net_ports": p[1], "seed": p[3]},
            )
        )
    )


FAMILY = st.one_of(_bcube(), _dcell(), _fattree(), _torus(), _ring(), _star(), _leafspine(), _jellyfish())


def build(spec) -> Topology:
    builder, kwargs = spec
    try:
        return builder(**kwargs)
    except TopologyError as e:
        # only Jellyfish may legitimately fail (a random graph that came out disconnected)
        assert builder is jellyfish and "disconnected" in str(e), str(e)
        assume(False)
        raise


def digraph(topo: Topology) -> nx.DiGraph:
    """A networkx graph built straight from the link list (not via `to_networkx`)."""
    g = nx.DiGraph()
    g.add_nodes_from(topo.nodes)
    g.add_edges_from((lk.src, lk.dst) for lk in topo.links)
    return g


# ---- properties ------------------------------------------------------------------------------
@SETTINGS
@given(FAMILY)
def test_links_are_full_duplex(spec):
    t = build(spec)
    pairs = {(lk.src, lk.dst): (lk.bandwidth, lk.latency) for lk in t.links}
    assert len(pairs) == len(t.links)
    for (u, v), attrs in pairs.items():
        assert pairs.get((v, u)) == attrs
        assert u != v
        assert u in t and v in t


@SETTINGS
@given(FAMILY)
def test_compiled_arrays_agree_with_links(spec):
    t = build(spec)
    c = t.compiled
    assert c.node_ids == t.nodes
    assert c.num_nodes == len(t.nodes)
    assert c.num_links == len(t.links)
    assert c.index == {n: i for i, n in enumerate(t.nodes)}
    assert c.is_server.tolist() == [t.kind(n) == SERVER for n in t.nodes]
    assert c.link_src.tolist() == [c.index[lk.src] for lk in t.links]
    assert c.link_dst.tolist() == [c.index[lk.dst] for lk in t.links]
    assert c.capacity.tolist() == [lk.bandwidth for lk in t.links]
    assert c.latency.tolist() == [lk.latency for lk in t.links]
    for i, lk in enumerate(t.links):
        assert c.link_index(c.index[lk.src], c.index[lk.dst]) == i
    assert c.adjacency.nnz == len(t.links)
    out_degree = Counter(lk.src for lk in t.links)
    assert [t.ports(n) for n in t.nodes] == [out_degree.get(n, 0) for n in t.nodes]


@SETTINGS
@given(FAMILY)
def test_every_server_pair_is_reachable_and_hops_match_networkx(spec):
    t = build(spec)
    m = t.router.hop_matrix(t.servers)
    g = digraph(t)
    expected = np.array([[nx.shortest_path_length(g, s, d) for d in t.servers] for s in t.servers])
    assert (m == expected).all()
    assert (np.diag(m) == 0).all()
    assert (m == m.T).all()  # every family is full duplex


@SETTINGS
@given(FAMILY, st.randoms(use_true_random=False))
def test_paths_are_valid_shortest_and_lowest_index(spec, rnd):
    t = build(spec)
    g = digraph(t)
    c = t.compiled
    servers = list(t.servers)
    pairs = [tuple(rnd.sample(servers, 2)) for _ in range(8)]
    # a switch endpoint too, where there is one
    if t.switches:
        pairs.append((rnd.choice(servers), rnd.choice(t.switches)))
    assert t.router.paths(pairs) == [t.path(s, d) for s, d in pairs]
    for s, d in pairs:
        p = t.router.path(s, d)
        assert p[0] == s and p[-1] == d
        assert len(set(p)) == len(p)
        assert all(t.has_link(a, b) for a, b in itertools.pairwise(p))
        assert len(p) - 1 == t.router.hops(s, d) == nx.shortest_path_length(g, s, d)
        links = c.path_links(p)
        assert (links >= 0).all()
        assert [(t.links[i].src, t.links[i].dst) for i in links] == list(itertools.pairwise(p))
        # the tie-break: fewest hops, then lowest node index at every step
        all_shortest = sorted(tuple(c.index[x] for x in q) for q in nx.all_shortest_paths(g, s, d))
        assert tuple(c.index[x] for x in p) == all_shortest[0]
        ecmp = t.router.ecmp_paths(s, d)
        if len(all_shortest) <= 64:
            assert [tuple(c.index[x] for x in q) for q in ecmp] == all_shortest
        assert ecmp[0] == p


@SETTINGS
@given(FAMILY)
def test_building_is_deterministic(spec):
    a, b = build(spec), build(spec)
    assert a == b
    assert a.links == b.links
    assert a.nodes == b.nodes
    assert hash(a) == hash(b)
    assert a.path(a.servers[0], a.servers[-1]) == b.path(b.servers[0], b.servers[-1])


@SETTINGS
@given(FAMILY)
def test_json_dict_round_trip(spec):
    t = build(spec)
    back = from_dict(json.loads(json.dumps(to_dict(t))))
    assert back == t
    assert back.links == t.links


@SETTINGS
@given(FAMILY)
def test_to_networkx_round_trip(spec):
    t = build(spec)
    g = t.to_networkx()
    assert set(g.nodes) == set(t.nodes)
    assert g.number_of_edges() == len(t.links)
    assert {n: k for n, k in g.nodes(data="kind")} == {n: t.kind(n) for n in t.nodes}
    back = Topology.from_networkx(g)
    assert back.name == t.name
    assert set(back.links) == set(t.links)
    assert back.nodes == t.nodes


@given(
    st.integers(4, 14).flatmap(lambda s: st.tuples(st.just(s), st.integers(2, s - 1), st.integers(0, 10**6))),
)
def test_jellyfish_near_regular(params):
    switches, net_ports, seed = params
    try:
        t = jellyfish(switches, net_ports + 2, net_ports, seed=seed)
    except TopologyError as e:
        assert "disconnected" in str(e)
        return
    sw = set(t.switches)
    degree = Counter(lk.src for lk in t.links if lk.src in sw and lk.dst in sw)
    assert max(degree.values()) <= net_ports
    # maximal: no two switches that both have a free network port are left unjoined
    free = [w for w in t.switches if degree[w] < net_ports]
    assert all(t.has_link(a, b) for a in free for b in free if a != b)
    # at most one port left free: at most one cable short of S*r/2
    cables = sum(degree.values()) // 2
    assert switches * net_ports // 2 - 1 <= cables <= switches * net_ports // 2
    assert len(t.servers) == 2 * switches
    g = nx.Graph((lk.src, lk.dst) for lk in t.links)
    assert nx.is_connected(g)
    assert jellyfish(switches, net_ports + 2, net_ports, seed=seed).links == t.links
