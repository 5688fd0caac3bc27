"""Lower bounds of every collective (`collective_bounds`): closed forms on one switch, the
cut searches against brute force over every node set of small random directed networks with
unequal links, and no textbook schedule simulated faster than its bound."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arsched.bounds import BoundError
from arsched.collective import Schedule
from arsched.collective_bounds import bandwidth_bound, collective_bound, reversed_topology
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import Topology, star
from collective.test_kinds import direct, ring_allgather, ring_reduce_scatter

M = 1e8


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_closed_forms_on_one_switch(n):
    t = star(n)
    rs = t.servers
    b = t.links[0].bandwidth
    share = (n - 1) / n * M / b
    assert bandwidth_bound(t, rs, M, "allgather") == pytest.approx(share)
    assert bandwidth_bound(t, rs, M, "reduce_scatter") == pytest.approx(share)
    assert bandwidth_bound(t, rs, M, "allreduce") == pytest.approx(2 * share)
    assert bandwidth_bound(t, rs, M, "alltoall") == pytest.approx(share)
    for c in ("broadcast", "reduce"):
        assert bandwidth_bound(t, rs, M, c, rs[-1]) == pytest.approx(M / b)
    assert reversed_topology(t) is t


def random_network(seed: int, n: int) -> Topology:
    """A strongly connected directed graph of n servers and a switch, links of unequal
    bandwidth, some one way only."""
    rng = np.random.default_rng(seed)
    g = nx.DiGraph()
    for i in range(n):
        g.add_node(f"s{i}", kind="server")
    g.add_node("w", kind="switch")
    order = [f"s{i}" for i in rng.permutation(n)] + ["w"]
    for a, b in itertools.pairwise([*order, order[0]]):  # a directed cycle through everything
        g.add_edge(a, b, bandwidth=float(rng.choice([1e9, 2e9, 5e9])))
    for _ in range(n):
        a, b = rng.choice(order, 2, replace=False)
        g.add_edge(a, b, bandwidth=float(rng.choice([1e9, 3e9])))
    return Topology.from_networkx(g, name=f"random({seed})")


def cuts(t: Topology):
    """(servers inside, egress bytes/s) of every proper non-empty node set."""
    c = t.compiled
    servers = np.array([t.kind(v) == "server" for v in c.node_ids])
    for mask in range(1, 2**c.num_nodes - 1):
        inside = np.array([(mask >> i) & 1 for i in range(c.num_nodes)], dtype=bool)
        egress = float(c.capacity[inside[c.link_src] & ~inside[c.link_dst]].sum())
        yield inside, int(servers[inside].sum()), egress


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 5))
def test_cut_bounds_match_brute_force_on_small_directed_networks(seed, n):
    t = random_network(seed, n)
    rs = t.servers
    c = t.compiled
    ag = rs_ = a2a = 0.0
    flows = {r: np.inf for r in rs[1:]}
    to_root = {r: np.inf for r in rs[1:]}
    for inside, k, egress in cuts(t):
        if 0 < k < n:  # ranks on both sides: data must cross
            ag = max(ag, k / n / egress)
            rs_ = max(rs_, (n - k) / n / egress)
            a2a = max(a2a, k * (n - k) / n / egress)
        root_in = inside[c.index[rs[0]]]
        for r in rs[1:]:
            if root_in and not inside[c.index[r]]:
                flows[r] = min(flows[r], egress)
            if inside[c.index[r]] and not root_in:
                to_root[r] = min(to_root[r], egress)
    assert bandwidth_bound(t, rs, M, "allgather") == pytest.approx(ag * M, rel=1e-9)
    assert bandwidth_bound(t, rs, M, "reduce_scatter") == pytest.approx(rs_ * M, rel=1e-9)
    assert bandwidth_bound(t, rs, M, "broadcast", rs[0]) == pytest.approx(M / min(flows.values()), rel=1e-9)
    assert bandwidth_bound(t, rs, M, "reduce", rs[0]) == pytest.approx(M / min(to_root.values()), rel=1e-9)
    assert bandwidth_bound(t, rs, M, "alltoall") >= a2a * M * (1 - 1e-9)  # the flow LP is within every cut


def schedules(t: Topology) -> list[Schedule]:
    rs = tuple(t.servers)
    n = len(rs)

    def make(name, rows, root=None):
        chunks = n * n if name == "alltoall" else n
        return Schedule.from_transfers(t, rs, M, chunks, rows, collective=name, root=root)

    return [
        make("reduce_scatter", ring_reduce_scatter(rs)),
        make("allgather", ring_allgather(rs)),
        make("allreduce", ring_reduce_scatter(rs) + ring_allgather(rs, start=n - 1)),
        make("broadcast", direct("broadcast", rs, root=rs[1]), root=rs[1]),
        make("reduce", direct("reduce", rs, root=rs[0]), root=rs[0]),
        make("alltoall", direct("alltoall", rs)),
    ]


@pytest.mark.parametrize("seed", [3, 11])
def test_no_schedule_beats_its_bound(seed):
    for t in (star(4), random_network(seed, 4)):
        for s in schedules(t):
            for r in (simulate_flow(s), simulate_flow(s, fifo=False), simulate_rounds(s)):
                assert r.gap >= 1 - 1e-9, (t.name, s.collective, r.model)
            bound = collective_bound(t, s.ranks, M, s.collective, s.root, alpha=5e-6)
            assert simulate_flow(s).bound_s == pytest.approx(bound)


def test_the_ring_meets_the_allgather_bound_on_one_switch():
    """A ring AllGather on a star moves (n-1)/n of the buffer through each NIC: its time is the
    bound plus one two-hop latency per step (α = 0)."""
    n = 6
    t = star(n)
    s = schedules(t)[1]
    hop = t.links[0]
    r = simulate_flow(s, alpha=0.0)
    assert r.time_s == pytest.approx((n - 1) * (M / n / hop.bandwidth + 2 * hop.latency))
    assert r.bound_s == pytest.approx((n - 1) * M / n / hop.bandwidth)


def test_a_root_that_is_not_a_rank_is_refused():
    t = star(3)
    with pytest.raises(BoundError, match="root"):
        bandwidth_bound(t, t.servers, M, "broadcast", "w0")
    with pytest.raises(BoundError, match="collective"):
        bandwidth_bound(t, t.servers, M, "gather")
