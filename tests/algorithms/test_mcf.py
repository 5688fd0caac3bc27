"""AllToAll's concurrent-flow LP (`collective_bounds.alltoall_flow`) and the `mcf` schedule built
from it: the LP's flows checked link by link and node by node, closed forms, the fallback to
the cut bound, and schedules near the bound on networks whose direct routes crowd some links."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arsched.collective_bounds as cb
from arsched.algorithms import NotApplicable, build
from arsched.algorithms.mcf import deal, decompose
from arsched.collective import numeric_check, validate
from arsched.sim import simulate_flow
from arsched.topology import parse_spec
from test_collective_bounds import random_network

M = 256e6


def check_flow(t, flow) -> None:
    """Every link within capacity; each source's traffic conserved, r arriving at every other rank."""
    c = t.compiled
    rs = t.servers
    assert (flow.flows.sum(axis=0) <= c.capacity * (1 + 1e-7)).all()
    for s, r in enumerate(rs):
        net = np.bincount(c.link_dst, flow.flows[s], c.num_nodes) - np.bincount(
            c.link_src, flow.flows[s], c.num_nodes
        )
        want = np.zeros(c.num_nodes)
        want[[c.index[x] for x in rs]] = flow.rate
        want[c.index[r]] = -(len(rs) - 1) * flow.rate
        assert net == pytest.approx(want, abs=1e-6 * flow.rate)


@pytest.mark.parametrize("spec", ["star:n=6", "bcube:n=3,k=1", "torus:dims=3x3,oneway=1", "dcell:n=2,k=1"])
def test_the_lp_flow_is_a_feasible_concurrent_flow(spec):
    t = parse_spec(spec)
    check_flow(t, cb.alltoall_flow(t, t.servers))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 6))
def test_the_lp_on_random_directed_networks(seed, n):
    t = random_network(seed, n)
    flow = cb.alltoall_flow(t, t.servers)
    check_flow(t, flow)
    # the LP is at least as tight as the candidate cuts it replaces
    assert cb.bandwidth_bound(t, t.servers, M, "alltoall") >= M * cb._alltoall_seconds_per_byte(
        t, t.servers
    ) * (1 - 1e-9)


@pytest.mark.parametrize("n", [3, 5, 6])
def test_one_way_ring_closed_form(n):
    """On a one-way ring a block from s to d crosses (d − s) mod n links; the n links carry
    Σ_k k·M/n per source, (n − 1)·M/2 each, so T ≥ (n − 1)·M / (2b)."""
    t = parse_spec(f"ring:n={n},oneway=1")
    b = t.links[0].bandwidth
    assert cb.bandwidth_bound(t, t.servers, M, "alltoall") == pytest.approx((n - 1) * M / (2 * b), rel=1e-6)


def test_too_large_a_flow_lp_falls_back_to_the_cuts(monkeypatch):
    t = parse_spec("torus:dims=3x3")
    monkeypatch.setattr(cb, "MAX_FLOW_VARIABLES", 10)
    cb._FLOW_CACHE.clear()
    try:
        assert cb.bandwidth_bound(t, t.servers, M, "alltoall") == pytest.approx(
            M * cb._alltoall_seconds_per_byte(t, t.servers)
        )
        with pytest.raises(NotApplicable, match="too large"):
            build("mcf", t, None, M, "alltoall")
    finally:
        cb._FLOW_CACHE.clear()


@pytest.mark.parametrize(
    "spec",
    [
        "torus:dims=4x4",
        "torus:dims=3x4,oneway=1",
        "ring:n=8,bandwidth=400Gbps,reverse=100Gbps",
        "bcube:n=3,k=1",
        "jellyfish:switches=10,ports=5,net_ports=3,seed=7",
    ],
)
def test_mcf_schedules_are_valid_and_follow_the_lp(spec):
    """Within a few per cent of the LP's bound where the direct routes are far from it."""
    t = parse_spec(spec)
    s = build("mcf", t, None, M, "alltoall")
    assert validate(s).ok and numeric_check(s).ok
    gap = simulate_flow(s).gap
    direct = simulate_flow(build("direct", t, None, M, "alltoall")).gap
    assert 1 - 1e-9 <= gap <= min(direct, 1.05)


def test_decomposition_carries_each_demand_on_simple_paths():
    t = parse_spec("torus:dims=3x3")
    c = t.compiled
    flow = cb.alltoall_flow(t, t.servers)
    src = c.index[t.servers[0]]
    sinks = np.array([c.index[r] for r in t.servers[1:]])
    paths = decompose(t, flow.flows[0], src, sinks, flow.rate)
    for sink in sinks:
        mine = [(p, a) for d, p, a in paths if d == sink]
        assert sum(a for _, a in mine) == pytest.approx(flow.rate)
        for p, _ in mine:
            assert p[0] == src and p[-1] == sink and len(set(p)) == len(p)


@given(st.lists(st.floats(0.01, 10), min_size=1, max_size=8), st.integers(1, 40))
def test_deal_gives_every_piece_in_proportion(rates, pieces):
    counts = deal(np.array(rates), pieces)
    assert counts.sum() == pieces
    assert (np.abs(counts - np.array(rates) / sum(rates) * pieces) < 1).all()
