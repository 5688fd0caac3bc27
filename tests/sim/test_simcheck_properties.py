"""Properties of both simulators on random valid schedules (ring, parameter server, recursive
doubling from tests/schedules.py, random rank subsets and orders, sizes, routes) on small
topologies of every family: never below the lower bound, deterministic, causal (no transfer
starts before its dependencies end), bytes conserved on links; the round model's rounds are a
first-fit packing; the flow model equals an independent event simulator; the two models agree
when no link is ever shared."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simcheck_reference import (
    disjoint_steps,
    path_bottleneck,
    path_latency,
    reference_deps,
    reference_flow,
    transfer_links,
    uniform_bandwidth,
)

from arsched.collective import validate
from arsched.sim import simulate_flow, simulate_rounds
from arsched.sim.deps import derive
from arsched.sim.flow import _events
from arsched.sim.paths import compile_paths
from arsched.topology import ring
from schedules import bfs_route, ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

SPECS = [
    "ring:n=6",
    "star:n=6",
    "bcube:n=3,k=1,bandwidth=100Gbps/40Gbps,latency=1us/3us",
    "bcube:n=2,k=2",
    "torus:dims=3x3",
    "torus:dims=2x2x2,latency=0s",
    "fattree:k=4",
    "fattree:k=4,bandwidth=100Gbps/100Gbps/400Gbps",
    "jellyfish:switches=8,ports=4,net_ports=3,seed=2",
]
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REL = 1e-9


@st.composite
def schedules(draw, specs=tuple(SPECS), max_ranks: int = 8):
    t = topo(draw(st.sampled_from(specs)))
    alg = draw(st.sampled_from(["ring", "ps", "rd"]))
    if alg == "rd":
        n = draw(st.sampled_from([k for k in (2, 4, 8) if k <= min(len(t.servers), max_ranks)]))
    else:
        n = draw(st.integers(2, min(len(t.servers), max_ranks)))
    ranks = tuple(draw(st.permutations(t.servers))[:n])
    nbytes = draw(st.sampled_from([1e3, 4096.0, 1e6, 3.3e7]))
    route = bfs_route(t) if draw(st.booleans()) else None
    if alg == "ring":
        s = ring_allreduce(t, ranks, nbytes, draw(st.integers(1, 2)), route=route)
    elif alg == "ps":
        ps = draw(st.sampled_from(ranks))
        s = ps_allreduce(t, ranks, nbytes, draw(st.integers(1, 3)), ps=ps, route=route)
    else:
        s = recursive_doubling_allreduce(t, ranks, nbytes, draw(st.integers(1, 2)), route=route)
    return s


ALPHAS = st.sampled_from([0.0, 1e-6, 5e-6])


def _common_checks(s, r, alpha):
    assert r.alpha == alpha
    assert r.time_s >= r.bound_s * (1 - REL)
    assert r.gap >= 1 - REL
    assert (r.end >= r.start).all()
    assert (r.start >= 0).all()
    # bytes: one chunk per hop of every transfer's written path, link by link
    count = Counter(lk for links in transfer_links(s) for lk in links)
    expect = np.zeros(len(s.topology.links))
    for lk, c in count.items():
        expect[lk] = c * s.chunk_bytes
    assert r.link_bytes == pytest.approx(expect, rel=1e-12)
    hops = sum(len(t.path) - 1 for t in s)
    assert r.link_bytes.sum() == pytest.approx(s.chunk_bytes * hops, rel=1e-12)
    u = r.link_utilisation
    assert (u >= 0).all() and (u <= 1 + REL).all()


def _causal(s, r, deps):
    """No transfer starts before every dependency of it has ended."""
    for t, ds in enumerate(deps):
        if ds:
            assert r.start[t] >= max(r.end[d] for d in ds) * (1 - REL)


def _same(a, b):
    assert a.time_s == b.time_s and a.rounds == b.rounds and a.notes == b.notes
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)
    assert np.array_equal(a.link_bytes, b.link_bytes)


@PROPERTY
@given(schedules(), ALPHAS)
def test_flow_model_properties(s, alpha):
    assert validate(s).ok
    for sync in (False, True):
        r = simulate_flow(s, alpha, synchronous=sync)
        _common_checks(s, r, alpha)
        _same(r, simulate_flow(s, alpha, synchronous=sync))
        _causal(s, r, reference_deps(s, sync))
        assert r.time_s == r.end.max()
        assert r.rounds is None and r.model == "flow"
        # every transfer needs at least alpha + chunk / bottleneck + path latency
        least = alpha + s.chunk_bytes / np.array(path_bottleneck(s)) + np.array(path_latency(s))
        assert (r.end - r.start >= least * (1 - REL)).all()
        if r.notes["method"] == "sweep":
            # no contention: the exact event simulation finds the same times
            send, done, _ = _events(s, derive(s, sync), compile_paths(s), alpha)
            assert send - alpha == pytest.approx(r.start, rel=REL, abs=REL * r.time_s)
            assert done == pytest.approx(r.end, rel=REL, abs=REL * r.time_s)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(max_ranks=6), ALPHAS, st.booleans())
def test_flow_model_equals_an_independent_event_simulation(s, alpha, sync):
    r = simulate_flow(s, alpha, synchronous=sync)
    ready, done = reference_flow(s, alpha, sync)
    assert r.start == pytest.approx(ready, rel=1e-7, abs=1e-9 * r.time_s)
    assert r.end == pytest.approx(done, rel=1e-7, abs=1e-9 * r.time_s)


@PROPERTY
@given(schedules(), ALPHAS)
def test_round_model_properties(s, alpha):
    r = simulate_rounds(s, alpha)
    _common_checks(s, r, alpha)
    _same(r, simulate_rounds(s, alpha))
    assert r.model == "rounds" and r.notes == {}
    steps = np.array([t.step for t in s])
    # steps run one after another: a transfer starts after every earlier-step transfer ends
    _causal(s, r, [set(np.flatnonzero(steps < steps[t]).tolist()) for t in range(len(s))])
    # rounds: transfers starting together form a round (a round lasts > 0)
    links = [set(x) for x in transfer_links(s)]
    bn, lat = np.array(path_bottleneck(s)), np.array(path_latency(s))
    starts = sorted(set(r.start.tolist()))
    assert len(starts) == r.rounds
    clock = 0.0
    members_by_round = []
    for k, t0 in enumerate(starts):
        members = np.flatnonzero(r.start == t0)
        members_by_round.append(members)
        assert len(set(steps[members].tolist())) == 1  # a round lies within one step
        used = [lk for m in members for lk in links[m]]
        assert len(used) == len(set(used))  # one flow per directed link
        duration = s.chunk_bytes / bn[members].min() + lat[members].max() + alpha
        assert t0 == pytest.approx(clock, rel=REL, abs=REL * r.time_s)
        assert r.end[members] == pytest.approx(t0 + s.chunk_bytes / bn[members] + lat[members] + alpha)
        clock = t0 + duration
        if k:
            assert steps[members[0]] >= steps[members_by_round[k - 1][0]]
    assert r.time_s == pytest.approx(clock, rel=REL)
    # first fit: a transfer in a later round of its step conflicts, in every earlier round of
    # that step, with a transfer stored before it
    round_of = np.empty(len(s), dtype=int)
    for k, members in enumerate(members_by_round):
        round_of[members] = k
    for t in range(len(s)):
        for k in range(round_of[t]):
            mem = members_by_round[k]
            if steps[mem[0]] == steps[t]:
                assert any(m < t and links[m] & links[t] for m in mem)
    # a step needs at least as many rounds as its most loaded link
    for step in set(steps.tolist()):
        load = Counter(lk for t in np.flatnonzero(steps == step) for lk in links[t])
        assert len(set(round_of[steps == step].tolist())) >= max(load.values())


@PROPERTY
@given(schedules(), ALPHAS)
def test_models_agree_when_no_link_is_shared_in_a_step(s, alpha):
    """Opportunistic: whenever the drawn schedule happens to qualify, the models agree."""
    if disjoint_steps(s) and uniform_bandwidth(s.topology):
        rounds = simulate_rounds(s, alpha)
        assert rounds.rounds == s.num_steps
        assert rounds.time_s == pytest.approx(simulate_flow(s, alpha, synchronous=True).time_s, rel=1e-12)


@st.composite
def disjoint_schedules(draw):
    """Schedules whose every step uses each directed link at most once, on uniform links."""
    kind = draw(st.sampled_from(["ring", "rd-hypercube", "rd-bcube", "ring-bcube", "ps2"]))
    nbytes = draw(st.sampled_from([1e3, 1e6, 5e7]))
    if kind == "ring":
        n = draw(st.integers(2, 9))
        t = ring(n, draw(st.sampled_from([1e9, 12.5e9])), draw(st.sampled_from([0.0, 1e-6, 7e-6])))
        order = list(t.servers)
        k = draw(st.integers(0, n - 1))
        order = order[k:] + order[:k]
        if draw(st.booleans()):
            order.reverse()
        return ring_allreduce(t, order, nbytes)
    if kind == "rd-hypercube":
        t = topo("torus:dims=2x2x2")
        return recursive_doubling_allreduce(t, t.servers, nbytes)
    if kind == "rd-bcube":
        t = topo("bcube:n=2,k=2")
        return recursive_doubling_allreduce(t, t.servers, nbytes)
    if kind == "ring-bcube":
        t = topo("bcube:n=4,k=1")
        return ring_allreduce(t, t.servers, nbytes)
    t = topo("star:n=2")
    return ps_allreduce(t, t.servers, nbytes)


@PROPERTY
@given(disjoint_schedules(), ALPHAS)
def test_models_agree_on_disjoint_schedules(s, alpha):
    assert disjoint_steps(s) and uniform_bandwidth(s.topology)
    rounds = simulate_rounds(s, alpha)
    flow = simulate_flow(s, alpha, synchronous=True)
    assert rounds.rounds == s.num_steps
    assert rounds.time_s == pytest.approx(flow.time_s, rel=1e-12)
    assert flow.notes["method"] == "sweep"
