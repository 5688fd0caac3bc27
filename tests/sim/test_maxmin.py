"""Max-min fair rates (sim.maxmin): the hand-computed three-flows-on-two-links case, directly
and through flow-model timings whose phases are worked out by hand; random incidences against
an independent bottleneck-link algorithm and the max-min definition itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simref import water_fill

from arsched.collective import Schedule, Transfer
from arsched.sim import simulate_flow
from arsched.sim.maxmin import incidence, maxmin_rates
from arsched.sim.paths import CompiledPaths, compile_paths
from arsched.topology import Link, Topology


def tiny_paths(flow_links: list[list[int]]) -> CompiledPaths:
    """A CompiledPaths built by hand: flow f uses links flow_links[f]."""
    lens = [len(x) for x in flow_links]
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    links = np.array([lk for x in flow_links for lk in x], dtype=np.int64)
    owner = np.repeat(np.arange(len(flow_links)), lens)
    zeros = np.zeros(len(flow_links))
    return CompiledPaths(ptr, links, owner, zeros, zeros + 1.0)


@pytest.mark.parametrize(("c1", "c2"), [(1.0, 3.0), (2.0, 3.0), (10.0, 10.5), (1e9, 1.25e10)])
def test_three_flows_two_links_hand_case(c1, c2):
    # A on link 0, B on links 0 and 1, C on link 1, c1 < c2: link 0 fills first at level c1/2
    # (two flows), freezing A and B; C then takes what B leaves of link 1
    cp = tiny_paths([[0], [0, 1], [1]])
    rates = maxmin_rates(np.arange(3), cp, np.array([c1, c2]))
    np.testing.assert_allclose(rates, [c1 / 2, c1 / 2, c2 - c1 / 2], rtol=1e-12)


def test_three_flows_reversed_capacities():
    # c1 > c2: link 1 fills first at c2/2 (B and C), then A takes the rest of link 0
    cp = tiny_paths([[0], [0, 1], [1]])
    rates = maxmin_rates(np.arange(3), cp, np.array([5.0, 2.0]))
    np.testing.assert_allclose(rates, [5.0 - 1.0, 1.0, 1.0], rtol=1e-12)


def test_subset_of_flows_and_order():
    cp = tiny_paths([[0], [0, 1], [1]])
    cap = np.array([1.0, 3.0])
    # alone, each flow gets its bottleneck; A and C share nothing
    np.testing.assert_allclose(maxmin_rates(np.array([1]), cp, cap), [1.0])
    np.testing.assert_allclose(maxmin_rates(np.array([2, 0]), cp, cap), [3.0, 1.0])
    # positions follow the order of `flows`
    np.testing.assert_allclose(maxmin_rates(np.array([2, 1, 0]), cp, cap), [2.5, 0.5, 0.5])
    assert len(maxmin_rates(np.zeros(0, dtype=np.int64), cp, cap)) == 0


def test_incidence_lists_every_link_of_every_flow():
    cp = tiny_paths([[0], [0, 1], [1], [2, 0, 1]])
    pos, link = incidence(np.array([3, 1]), cp)
    assert pos.tolist() == [0, 0, 0, 1, 1]
    assert link.tolist() == [2, 0, 1, 0, 1]


def test_equal_share_on_one_link():
    cp = tiny_paths([[0]] * 7)
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(incidences())
def test_property_maxmin_matches_reference_and_definition(case):
    flows, cap = case
    cp = tiny_paths(flows)
    rates = maxmin_rates(np.arange(len(flows)), cp, cap)
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


# ---- through the flow model -----------------------------------------------------------------


def chain(c1: float, c2: float, l1: float, l2: float) -> Topology:
    """Servers u -> v -> w: link 1 (u->v) of bandwidth c1, link 2 (v->w) of c2 (and unused
    reverse links, so that the lower bound sees a connected network)."""
    nodes = [("u", "server"), ("v", "server"), ("w", "server")]
    links = [Link("u", "v", c1, l1), Link("v", "w", c2, l2), Link("v", "u", c1, l1), Link("w", "v", c2, l2)]
    return Topology("chain", nodes, links)


@pytest.mark.parametrize("alpha", [0.0, 3e-6])
def test_three_flows_in_the_flow_model(alpha):
    c1, c2, l1, l2 = 1e9, 3e9, 2e-6, 5e-6
    size = 1e6  # bytes per chunk (3 chunks of a 3 MB vector)
    top = chain(c1, c2, l1, l2)
    a = Transfer(0, 0, "u", "v", "reduce", ("u", "v"))
    b = Transfer(0, 1, "u", "w", "reduce", ("u", "v", "w"))
    c = Transfer(0, 2, "v", "w", "reduce", ("v", "w"))
    s = Schedule.from_transfers(top, ("u", "v", "w"), 3 * size, 3, [a, b, c])
    cp = compile_paths(s)
    np.testing.assert_allclose(maxmin_rates(np.arange(3), cp, top.compiled.capacity), [0.5e9, 0.5e9, 2.5e9])
    res = simulate_flow(s, alpha)
    assert res.notes["method"] == "events"
    # phase 1: A = B = c1/2, C = c2 - c1/2 until C's last byte; phase 2: A and B still split
    # link 1, so their rates do not change
    t_c = alpha + size / (c2 - c1 / 2)
    t_ab = alpha + size / (c1 / 2)
    assert t_c < t_ab
    np.testing.assert_allclose(res.start, [0, 0, 0], atol=1e-18)
    np.testing.assert_allclose(res.end, [t_ab + l1, t_ab + l1 + l2, t_c + l2], rtol=1e-12)
    assert res.time_s == pytest.approx(t_ab + l1 + l2, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 1e-6])
def test_rates_change_when_a_flow_joins_and_leaves(alpha):
    """C sends alone on link 2; B (waiting for A, which writes B's source buffer) joins it, the
    two split link 2 until C's last byte, then B has it alone."""
    c1, c2, l1, l2 = 4e9, 1e9, 1e-6, 2e-6
    size = 2e6
    top = chain(c1, c2, l1, l2)
    a = Transfer(0, 0, "u", "v", "reduce", ("u", "v"))
    c = Transfer(0, 1, "v", "w", "reduce", ("v", "w"))
    b = Transfer(1, 0, "v", "w", "reduce", ("v", "w"))
    s = Schedule.from_transfers(top, ("u", "v", "w"), 2 * size, 2, [a, c, b])
    res = simulate_flow(s, alpha)
    assert res.notes["method"] == "events"
    done_a = alpha + size / c1 + l1
    start_b = done_a + alpha  # B starts sending
    rem_c = size - c2 * (start_b - alpha)  # C's bytes left when B joins
    assert 0 < rem_c < size
    sent_c = start_b + rem_c / (c2 / 2)
    sent_b = sent_c + (size - rem_c) / c2  # B sent rem_c while sharing, the rest alone
    np.testing.assert_allclose(res.start, [0.0, 0.0, done_a], rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(res.end, [done_a, sent_c + l2, sent_b + l2], rtol=1e-12)
