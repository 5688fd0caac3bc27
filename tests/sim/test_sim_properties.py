"""Properties of both simulators on random valid schedules (ring, parameter server, recursive
doubling from tests/schedules.py on random small topologies, rank subsets, orders and sizes):
never faster than the lower bound, deterministic, causal, bytes conserved; and the two models
agree exactly when no link is ever shared within a step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simref import (
    bfs_route,
    link_lists,
    make,
    ps_allreduce,
    recursive_doubling_allreduce,
    ring_allreduce,
    semantic_preds,
    steps_of,
    topo,
)

from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import ring, star, torus

SMALL = [
    "ring:n=6",
    "star:n=6",
    "bcube:n=3,k=1",
    "torus:dims=3x3",
    "fattree:k=4",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=1",
    "dcell:n=2,k=1",
]

PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def schedules(draw):
    t = topo(draw(st.sampled_from(SMALL)))
    order = draw(st.permutations(t.servers))
    algo = draw(st.sampled_from(["ring", "ps", "rd"]))
    nbytes = draw(st.sampled_from([1e3, 1e5, 3.3e6, 1e8]))
    route = bfs_route(t) if draw(st.booleans()) else None
    if algo == "rd":
        k = draw(st.sampled_from([k for k in (2, 4, 8) if k <= len(order)]))
        return recursive_doubling_allreduce(t, order[:k], nbytes, draw(st.integers(1, 2)), route)
    ranks = tuple(order[: draw(st.integers(2, min(7, len(order))))])
    if algo == "ring":
        return ring_allreduce(t, ranks, nbytes, draw(st.integers(1, 2)), route)
    return ps_allreduce(t, ranks, nbytes, draw(st.integers(1, 3)), draw(st.sampled_from(ranks)), route)


def _bottlenecks(s) -> np.ndarray:
    top = s.topology
    return np.array([min(top.link(u, v).bandwidth for u, v in ls) for ls in link_lists(s)])


@PROPERTY
@given(schedules(), st.sampled_from([0.0, 1e-6, 5e-6]), st.booleans())
def test_property_simulators(s, alpha, synchronous):
    flow = simulate_flow(s, alpha, synchronous=synchronous)
    rounds = simulate_rounds(s, alpha)
    hops = sum(len(t.path) - 1 for t in s.transfers)
    preds = semantic_preds(s, synchronous)
    for res in (flow, rounds):
        # never faster than the lower bound
        assert res.bound_s > 0
        assert res.time_s >= res.bound_s * (1 - 1e-9)
        assert res.gap >= 1 - 1e-9
        # per transfer: ends after it starts, and starts only once every dependency has ended
        assert (res.end >= res.start).all()
        assert res.time_s == pytest.approx(np.max(res.end), rel=1e-12)
        tol = 1e-12 * res.time_s
        for t, ps in enumerate(preds):
            for u in ps:
                assert res.start[t] >= res.end[u] - tol
        # bytes are conserved: one chunk per hop of every path
        assert res.link_bytes.sum() == pytest.approx(s.chunk_bytes * hops, rel=1e-12)
        assert (res.link_bytes >= 0).all()
        assert len(res.link_bytes) == len(s.topology.links)
    # a flow never sends faster than its path's slowest link
    assert (flow.end - flow.start >= (alpha + s.chunk_bytes / _bottlenecks(s)) * (1 - 1e-9)).all()
    # deterministic
    again = simulate_flow(s, alpha, synchronous=synchronous)
    assert np.array_equal(again.start, flow.start) and np.array_equal(again.end, flow.end)
    assert again.time_s == flow.time_s and again.notes == flow.notes
    r2 = simulate_rounds(s, alpha)
    assert np.array_equal(r2.start, rounds.start) and np.array_equal(r2.end, rounds.end)
    assert (r2.time_s, r2.rounds) == (rounds.time_s, rounds.rounds)


@st.composite
def disjoint_schedules(draw):
    """Schedules whose every step uses each directed link at most once, on uniform links:
    one-chunk rings and recursive doubling on stars, rings in order on rings, recursive
    doubling on the 2x2x2 torus (a cube: partners are neighbours)."""
    bw = draw(st.sampled_from([1e9, 1.25e10]))
    lat = draw(st.sampled_from([0.0, 1e-6, 3e-6]))
    nbytes = draw(st.sampled_from([1e4, 2e6, 5e7]))
    kind = draw(st.sampled_from(["ring-star", "rd-star", "ring-ring", "rd-cube"]))
    if kind == "ring-ring":
        t = ring(draw(st.integers(2, 7)), bw, lat)
        return ring_allreduce(t, t.servers, nbytes)
    if kind == "rd-cube":
        t = torus((2, 2, 2), bw, lat)
        return recursive_doubling_allreduce(t, t.servers, nbytes)
    t = star(draw(st.integers(4, 8)), bw, lat)
    order = draw(st.permutations(t.servers))
    if kind == "ring-star":
        return ring_allreduce(t, tuple(order[: draw(st.integers(2, len(order)))]), nbytes)
    return recursive_doubling_allreduce(t, tuple(order[: draw(st.sampled_from([2, 4]))]), nbytes)


@PROPERTY
@given(disjoint_schedules(), st.sampled_from([0.0, 2e-6, 5e-6]))
def test_property_models_agree_without_shared_links(s, alpha):
    links = link_lists(s)
    for rows in steps_of(s).values():  # the precondition, checked independently
        used = [lk for i in rows for lk in links[i]]
        assert len(used) == len(set(used))
    rounds = simulate_rounds(s, alpha)
    flow = simulate_flow(s, alpha, synchronous=True)
    assert rounds.rounds == s.num_steps
    assert rounds.time_s == pytest.approx(flow.time_s, rel=1e-9)
    assert flow.notes["method"] == "sweep"


@PROPERTY
@given(schedules(), st.sampled_from([0.0, 5e-6]), st.booleans(), st.randoms(use_true_random=False))
def test_property_stored_order_does_not_matter(s, alpha, synchronous, rnd):
    """The flow model depends on the set of transfers only; the round model on the order within
    each step (first fit), not on how the steps are interleaved in storage."""
    tr = s.transfers
    perm = list(range(len(tr)))
    rnd.shuffle(perm)
    shuffled = make(s.topology, s.ranks, [tr[i] for i in perm], s.num_chunks, s.nbytes)
    flow, flow2 = simulate_flow(s, alpha, synchronous), simulate_flow(shuffled, alpha, synchronous)
    np.testing.assert_allclose(flow2.end, flow.end[perm], rtol=1e-9)
    np.testing.assert_allclose(flow2.start, flow.start[perm], rtol=1e-9, atol=1e-15)
    assert flow2.time_s == pytest.approx(flow.time_s, rel=1e-9)
    # interleave steps but keep each step's own order
    keys = {i: rnd.random() for i in range(len(tr))}
    by_step = steps_of(s)
    for rows in by_step.values():
        ranks_in_step = sorted(keys[i] for i in rows)
        for i, k in zip(rows, ranks_in_step, strict=True):
            keys[i] = k
    order = sorted(range(len(tr)), key=keys.__getitem__)
    interleaved = make(s.topology, s.ranks, [tr[i] for i in order], s.num_chunks, s.nbytes)
    rounds, rounds2 = simulate_rounds(s, alpha), simulate_rounds(interleaved, alpha)
    assert rounds2.rounds == rounds.rounds
    np.testing.assert_allclose(rounds2.end, rounds.end[order], rtol=1e-12)
    assert rounds2.time_s == pytest.approx(rounds.time_s, rel=1e-12)
