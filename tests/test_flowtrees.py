"""Flow trees and their round engine (the RL paper's workload representation)."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.greedy import run_greedy
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.flowtrees import BROADCAST, REDUCE, FlowTreeEngine, build_trees
from arsched.sim import simulate_rounds
from arsched.topology import bcube, fattree, parse_spec, star


@pytest.mark.parametrize("spec", ["bcube:n=3,k=1", "fattree:k=4", "torus:dims=3x3", "star:n=5"])
def test_trees_span_the_ranks_and_respect_the_fanout(spec):
    topo = parse_spec(spec)
    ranks = topo.servers
    trees = build_trees(topo, ranks, 2 * len(ranks), fanout=2)
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


@pytest.mark.parametrize("topo", [bcube(3, 1), fattree(4), star(6)])
def test_greedy_runs_every_flow_once_in_conflict_free_rounds(topo):
    e = FlowTreeEngine(topo, topo.servers, 1e6, build_trees(topo, topo.servers, len(topo.servers)))
    run_greedy(e)
    flows = np.concatenate(e.rounds)
    assert sorted(flows.tolist()) == list(range(e.num_flows))
    assert all(e.conflict_free(r.tolist()) for r in e.rounds)
    s = e.schedule()
    assert validate(s).ok and numeric_check(s).ok
    assert simulate_rounds(s).rounds == len(e.rounds)  # one round per step, as executed


def test_greedy_trees_beat_a_ring_on_server_centric_networks_in_the_round_model():
    """The flow-tree pipeline uses all ports of a BCube/DCell server; a ring uses one."""
    for spec in ("bcube:n=4,k=1", "dcell:n=3,k=1"):
        topo = parse_spec(spec)
        greedy = simulate_rounds(build("greedy-trees", topo, None, 64e6)).time_s
        assert greedy < simulate_rounds(build("ring", topo, None, 64e6)).time_s
