"""Max-min fair rates (sim.maxmin): three flows on two links worked out by hand, directly and
through compile_paths; random incidences against the bottleneck-link algorithm of the reference
and the max-min definition itself; and flow-model timings whose rate phases are worked out by
hand (three flows at once, a late flow joining a busy link)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from simref import link_numbers, water_fill

from arsched.collective import Schedule, Transfer
from arsched.sim import simulate_flow
from arsched.sim.maxmin import incidence, maxmin_rates
from arsched.sim.paths import CompiledPaths, compile_paths
from arsched.topology import Link, Topology

REL = 1e-9
CAPS = [(1.0, 3.0), (2.0, 3.0), (10.0, 10.5), (1e9, 1.25e10)]
THREE = [[0], [0, 1], [1]]  # A on link 0, B on links 0 and 1, C on link 1


def hand_paths(flow_links: list[list[int]]) -> CompiledPaths:
    """CompiledPaths built by hand: flow f takes path f, over links flow_links[f]."""
    lens = [len(x) for x in flow_links]
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    links = np.array([lk for x in flow_links for lk in x], dtype=np.int64)
    zeros = np.zeros(len(flow_links))
    return CompiledPaths(np.arange(len(flow_links)), ptr, links, zeros, zeros + 1.0)


@pytest.mark.parametrize(("c1", "c2"), CAPS)
def test_three_flows_on_two_links(c1, c2):
    # c1 < c2: link 0 fills first at c1/2 with two flows, freezing A and B; C takes the rest
    rates = maxmin_rates(np.arange(3), hand_paths(THREE), np.array([c1, c2]))
    np.testing.assert_allclose(rates, [c1 / 2, c1 / 2, c2 - c1 / 2], rtol=1e-12)


def test_three_flows_reversed_capacities():
    # c1 > c2: link 1 fills first at c2/2 (B and C), then A takes the rest of link 0
    rates = maxmin_rates(np.arange(3), hand_paths(THREE), np.array([5.0, 2.0]))
    np.testing.assert_allclose(rates, [5.0 - 1.0, 1.0, 1.0], rtol=1e-12)


def test_subset_of_flows_and_order():
    cp = hand_paths(THREE)
    cap = np.array([1.0, 3.0])
    # alone, each flow gets its bottleneck; A and C share nothing
    np.testing.assert_allclose(maxmin_rates(np.array([1]), cp, cap), [1.0])
    np.testing.assert_allclose(maxmin_rates(np.array([2, 0]), cp, cap), [3.0, 1.0])
    # positions follow the order of `flows`
    np.testing.assert_allclose(maxmin_rates(np.array([2, 1, 0]), cp, cap), [2.5, 0.5, 0.5])
    assert len(maxmin_rates(np.zeros(0, dtype=np.int64), cp, cap)) == 0


def test_incidence_lists_every_link_of_every_flow():
    cp = hand_paths([[0], [0, 1], [1], [2, 0, 1]])
    pos, link = incidence(np.array([3, 1]), cp)
    assert pos.tolist() == [0, 0, 0, 1, 1]
    assert link.tolist() == [2, 0, 1, 0, 1]


def test_equal_share_on_one_link():
    cp = hand_paths([[0]] * 7)
    np.testing.assert_allclose(maxmin_rates(np.arange(7), cp, np.array([7.0])), [1.0] * 7)


@st.composite
def incidences(draw):
    n_links = draw(st.integers(1, 6))
    n_flows = draw(st.integers(1, 8))
    flows = [
        sorted(draw(st.sets(st.integers(0, n_links - 1), min_size=1, max_size=n_links)))
        for _ in range(n_flows)
    ]
    caps = [draw(st.sampled_from([1.0, 2.0, 3.0, 5.0, 7.5, 1e9, 1.25e10])) for _ in range(n_links)]
    return flows, np.array(caps)


@given(incidences())
def test_property_maxmin_matches_reference_and_definition(case):
    flows, cap = case
    rates = maxmin_rates(np.arange(len(flows)), hand_paths(flows), cap)
    ref = water_fill(dict(enumerate(flows)), dict(enumerate(cap.tolist())))
    np.testing.assert_allclose(rates, [ref[f] for f in range(len(flows))], rtol=1e-9)
    # feasible, and every flow has a bottleneck: a full link on which no flow is faster
    load = np.zeros(len(cap))
    for f, links in enumerate(flows):
        load[links] += rates[f]
    assert (load <= cap * (1 + 1e-9)).all()
    for f, links in enumerate(flows):
        assert rates[f] > 0
        assert any(
            load[lk] >= cap[lk] * (1 - 1e-9)
            and all(rates[g] <= rates[f] * (1 + 1e-9) for g, other in enumerate(flows) if lk in other)
            for lk in links
        )


# ---- through compile_paths and the flow model -------------------------------------------------


def line(c1: float, c2: float, l1: float, l2: float) -> Topology:
    """Servers a - b - c; a<->b has bandwidth c1 and latency l1, b<->c has c2 and l2 (the
    reverse links are unused, but keep the network connected for the lower bound)."""
    nodes = [("a", "server"), ("b", "server"), ("c", "server")]
    links = [Link("a", "b", c1, l1), Link("b", "c", c2, l2), Link("b", "a", c1, l1), Link("c", "b", c2, l2)]
    return Topology("line", nodes, links)


def three_flow_schedule(c1, c2, l1, l2, chunk):
    rows = [
        Transfer(0, 0, "a", "b", "reduce", ("a", "b")),  # A: link a->b
        Transfer(0, 1, "a", "c", "reduce", ("a", "b", "c")),  # B: both links
        Transfer(0, 2, "b", "c", "reduce", ("b", "c")),  # C: link b->c
    ]
    return Schedule.from_transfers(line(c1, c2, l1, l2), ("a", "b", "c"), 3 * chunk, 3, rows)


@pytest.mark.parametrize(("c1", "c2"), CAPS)
def test_three_flows_through_compile_paths(c1, c2):
    s = three_flow_schedule(c1, c2, 1e-6, 2e-6, 1e6)
    assert link_numbers(s) == THREE  # the schedule's links, numbered in topology order
    rates = maxmin_rates(np.arange(3), compile_paths(s), s.topology.compiled.capacity)
    np.testing.assert_allclose(rates, [c1 / 2, c1 / 2, c2 - c1 / 2], rtol=1e-12)


@pytest.mark.parametrize(("c1", "c2"), CAPS)
@pytest.mark.parametrize("alpha", [0.0, 4e-6])
def test_three_flows_timing_by_hand(c1, c2, alpha):
    """All three start sending at α. C (rate c2 - c1/2 > c1/2) leaves first; A and B stay capped
    by link a->b at c1/2 each, so their rates do not change, and finish together."""
    l1, l2, chunk = 1e-6, 2e-6, 1e6
    s = three_flow_schedule(c1, c2, l1, l2, chunk)
    r = simulate_flow(s, alpha, fifo=False)
    assert r.notes["method"] == "events"
    t_c = alpha + chunk / (c2 - c1 / 2)
    t_ab = alpha + chunk / (c1 / 2)
    assert t_c < t_ab
    np.testing.assert_allclose(r.start, [0, 0, 0], atol=0)
    np.testing.assert_allclose(r.end, [t_ab + l1, t_ab + l1 + l2, t_c + l2], rtol=REL)
    assert r.time_s == pytest.approx(t_ab + l1 + l2, rel=REL)


@pytest.mark.parametrize("alpha", [0.0, 1e-6, 1e-5])
def test_rates_change_when_a_late_flow_joins_and_leaves(alpha):
    """A (a->b, fast link) and C (b->c) start at α; B forwards A's chunk over b->c, so it starts
    once A is done (A writes B's source buffer) and shares b->c with C: both drop to c2/2 until
    C's last byte, then B has the link alone."""
    c1, c2, l1, l2, chunk = 4e9, 1e9, 5e-6, 3e-6, 1e6
    rows = [
        Transfer(0, 0, "a", "b", "reduce", ("a", "b")),  # A
        Transfer(0, 1, "b", "c", "reduce", ("b", "c")),  # C
        Transfer(1, 0, "b", "c", "reduce", ("b", "c")),  # B: reads (b, 0), written by A
    ]
    s = Schedule.from_transfers(line(c1, c2, l1, l2), ("a", "b", "c"), 2 * chunk, 2, rows)
    r = simulate_flow(s, alpha, fifo=False)
    a_done = alpha + chunk / c1 + l1
    b_send = a_done + alpha
    c_left = chunk - c2 * (b_send - alpha)  # bytes C still has when B joins
    assert 0 < c_left < chunk  # the case is built so that they overlap
    c_sent = b_send + c_left / (c2 / 2)
    b_sent = c_sent + (chunk - c_left) / c2  # B sent c_left while sharing, the rest alone
    assert r.notes["method"] == "events"
    np.testing.assert_allclose(r.start, [0, 0, a_done], rtol=REL, atol=1e-18)
    np.testing.assert_allclose(r.end, [a_done, c_sent + l2, b_sent + l2], rtol=REL)
