"""Flow trees and their round engine (arsched.algorithms.flowtrees): the tree shapes span the
ranks within their fanout, chains follow the ring order, and the engine offers and runs only
flows whose inputs arrived, in conflict-free rounds."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms.flowtrees import BROADCAST, REDUCE, FlowTreeEngine, build_trees
from arsched.errors import ArschedError
from arsched.topology import parse_spec, star


@pytest.mark.parametrize("shape", ["bfs", "balanced"])
@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "fattree:k=4", "torus:dims=3x3", "star:n=5"])
def test_trees_span_the_ranks_and_respect_the_fanout(spec, shape):
    topo = parse_spec(spec)
    ranks = topo.servers
    trees = build_trees(topo, ranks, 2 * len(ranks), fanout=2, shape=shape)
    assert [t.chunk for t in trees] == list(range(2 * len(ranks)))
    for t in trees:
        assert t.root == t.chunk % len(ranks) and t.parent[t.root] == -1
        for v in range(len(ranks)):  # every rank reaches the root without a cycle
            seen, u = set(), v
            while t.parent[u] >= 0:
                assert u not in seen
                seen.add(u)
                u = int(t.parent[u])
            assert u == t.root
        assert np.bincount(t.parent[t.parent >= 0], minlength=len(ranks)).max() <= 2


@pytest.mark.parametrize(
    "spec", ["bcube:n=3,k=1", "dcell:n=2,k=1", "torus:dims=3x3,oneway=1", "ring:n=6,reverse=100Gbps"]
)
def test_spt_trees_are_shortest_path_trees_that_spread_the_load(spec):
    topo = parse_spec(spec)
    ranks = topo.servers
    n = len(ranks)
    hops = topo.router.hop_matrix(ranks)
    trees = build_trees(topo, ranks, 3 * n, shape="spt")
    for t in trees:
        assert t.root == t.chunk % n and t.parent[t.root] == -1
        for v in set(range(n)) - {t.root}:  # a nearest rank one step closer on a shortest path
            u = int(t.parent[v])
            closer = [
                w for w in range(n) if hops[w, t.root] < hops[v, t.root] == hops[w, t.root] + hops[v, w]
            ]
            assert u in closer and hops[v, u] == min(hops[v, w] for w in closer)
    if spec.startswith("bcube"):  # a root's chunks take different dimension orders
        assert len({tuple(t.parent) for t in trees if t.root == 0}) > 1


def test_engine_flows_and_initial_availability():
    topo = star(4)
    trees = build_trees(topo, topo.servers, 4)
    e = FlowTreeEngine(topo, topo.servers, 1e6, trees)
    assert e.num_flows == 4 * 2 * 3  # 4 trees, 3 edges each, up and down
    # exactly the leaves' reduces are available at first
    for f in np.flatnonzero(e.available):
        tree = trees[e.flow_tree[f]]
        assert e.flow_kind[f] == REDUCE and e.flow_src[f] not in tree.parent
    assert not e.available[e.flow_kind == BROADCAST].any()


def test_engine_refuses_bad_rounds():
    topo = star(4)
    e = FlowTreeEngine(topo, topo.servers, 1e6, build_trees(topo, topo.servers, 4))
    with pytest.raises(ArschedError, match="at least one"):
        e.execute([])
    waiting = int(np.flatnonzero(~e.available)[0])
    with pytest.raises(ArschedError, match="not available"):
        e.execute([waiting])
    avail = np.flatnonzero(e.available)
    clash = [int(a) for a in avail if e.flow_dst[a] == e.flow_dst[avail[0]]][:2]
    if len(clash) == 2:  # two flows into one rank share its downlink from the switch
        with pytest.raises(ArschedError, match="share a directed link"):
            e.execute(clash)
    with pytest.raises(ArschedError, match="not finished"):
        e.schedule()


def test_chain_trees_are_paths_along_the_order_ending_at_their_root():
    topo = star(5)
    order = [2, 0, 4, 1, 3]
    trees = build_trees(topo, topo.servers, 10, shape="chain", order=order)
    for t in trees:
        assert t.root == t.chunk % 5 and (np.bincount(t.parent[t.parent >= 0], minlength=5) <= 1).all()
        way = order if t.chunk < 5 else order[::-1]  # the second chunk of a root runs the other way
        nxt = {way[i]: way[(i + 1) % 5] for i in range(5)}
        assert all(t.parent[v] == nxt[v] for v in range(5) if v != t.root)
    with pytest.raises(ArschedError, match="cyclic order"):
        build_trees(topo, topo.servers, 5, shape="chain", order=[0, 1, 2])
    with pytest.raises(ArschedError, match="unknown tree shape"):
        build_trees(topo, topo.servers, 5, shape="spiral")
