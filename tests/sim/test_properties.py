"""Properties of both simulators on random valid schedules (tests/sim/simcases.py): never below
the lower bound, deterministic, causal (no transfer starts before its dependencies end), bytes
conserved link by link, no faster than each path allows; the round model's rounds are a first-fit
packing of each step; the flow model does not depend on the stored order, the round model only
on the order within a step; and the two models agree when no link is ever shared in a step."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simcases import allreduce_schedules, disjoint_schedules
from simref import (
    disjoint_steps,
    link_numbers,
    path_bottleneck,
    path_latency,
    semantic_preds,
    steps_of,
    uniform_bandwidth,
)

from arsched.collective import validate
from arsched.sim import simulate_flow, simulate_rounds
from schedules import make

REL = 1e-9
ALPHAS = st.sampled_from([0.0, 1e-6, 5e-6])


def _common_checks(s, r, alpha):
    assert r.alpha == alpha
    assert r.bound_s > 0
    assert r.time_s >= r.bound_s * (1 - REL)
    assert r.gap >= 1 - REL
    assert (r.end >= r.start).all()
    assert (r.start >= 0).all()
    assert r.time_s == pytest.approx(r.end.max(), rel=1e-12)
    # bytes: one chunk per hop of every transfer's written path, link by link
    count = Counter(lk for links in link_numbers(s) for lk in links)
    expect = np.zeros(len(s.topology.links))
    for lk, c in count.items():
        expect[lk] = c * s.chunk_bytes
    assert r.link_bytes == pytest.approx(expect, rel=1e-12)
    hops = sum(len(t.path) - 1 for t in s.transfers)
    assert r.link_bytes.sum() == pytest.approx(s.chunk_bytes * hops, rel=1e-12)
    u = r.link_utilisation
    assert (u >= 0).all() and (u <= 1 + REL).all()


def _causal(r, preds):
    """No transfer starts before every predecessor of it has ended."""
    for t, ps in enumerate(preds):
        if ps:
            assert r.start[t] >= max(r.end[d] for d in ps) * (1 - REL)


def _same(a, b):
    assert a.time_s == b.time_s and a.rounds == b.rounds and a.notes == b.notes
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)
    assert np.array_equal(a.link_bytes, b.link_bytes)


@settings(max_examples=25)
@given(allreduce_schedules(), ALPHAS)
def test_flow_model_properties(s, alpha):
    assert validate(s).ok
    least = alpha + s.chunk_bytes / path_bottleneck(s) + path_latency(s)
    for sync in (False, True):
        r = simulate_flow(s, alpha, synchronous=sync)
        _common_checks(s, r, alpha)
        _same(r, simulate_flow(s, alpha, synchronous=sync))  # deterministic
        _causal(r, semantic_preds(s, sync))
        assert r.time_s == r.end.max()
        assert r.rounds is None and r.model == "flow"
        # every transfer needs at least α + chunk / bottleneck + path latency
        assert (r.end - r.start >= least * (1 - REL)).all()
        if r.notes["method"] == "sweep":
            # no contention: the exact event simulation finds the same times
            e = simulate_flow(s, alpha, synchronous=sync, method="events")
            assert e.start == pytest.approx(r.start, rel=REL, abs=REL * r.time_s)
            assert e.end == pytest.approx(r.end, rel=REL, abs=REL * r.time_s)


@settings(max_examples=25)
@given(allreduce_schedules(), ALPHAS)
def test_round_model_properties(s, alpha):
    r = simulate_rounds(s, alpha)
    _common_checks(s, r, alpha)
    _same(r, simulate_rounds(s, alpha))  # deterministic
    assert r.model == "rounds" and r.notes == {}
    steps = np.array([t.step for t in s.transfers])
    # steps run one after another: a transfer starts after every earlier-step transfer ends,
    # hence after its semantic predecessors too
    _causal(r, [set(np.flatnonzero(steps < steps[t]).tolist()) for t in range(len(s))])
    # rounds: transfers starting together form a round (a round lasts > 0)
    links = [set(x) for x in link_numbers(s)]
    bn, lat = path_bottleneck(s), path_latency(s)
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
    # opportunistic: whenever the drawn schedule shares no link in a step, the models agree
    if disjoint_steps(s) and uniform_bandwidth(s.topology):
        assert r.rounds == s.num_steps
        assert r.time_s == pytest.approx(simulate_flow(s, alpha, synchronous=True).time_s, rel=1e-12)


@settings(max_examples=25)
@given(disjoint_schedules(), ALPHAS)
def test_models_agree_on_disjoint_schedules(s, alpha):
    assert disjoint_steps(s) and uniform_bandwidth(s.topology)  # the precondition, independently
    rounds = simulate_rounds(s, alpha)
    flow = simulate_flow(s, alpha, synchronous=True)
    assert rounds.rounds == s.num_steps
    assert rounds.time_s == pytest.approx(flow.time_s, rel=1e-12)
    assert flow.notes["method"] == "sweep"


@settings(max_examples=25)
@given(allreduce_schedules(), st.sampled_from([0.0, 5e-6]), st.booleans(), st.randoms(use_true_random=False))
def test_stored_order_does_not_matter(s, alpha, synchronous, rnd):
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
    for rows in steps_of(s).values():
        ranks_in_step = sorted(keys[i] for i in rows)
        for i, k in zip(rows, ranks_in_step, strict=True):
            keys[i] = k
    order = sorted(range(len(tr)), key=keys.__getitem__)
    interleaved = make(s.topology, s.ranks, [tr[i] for i in order], s.num_chunks, s.nbytes)
    rounds, rounds2 = simulate_rounds(s, alpha), simulate_rounds(interleaved, alpha)
    assert rounds2.rounds == rounds.rounds
    np.testing.assert_allclose(rounds2.end, rounds.end[order], rtol=1e-12)
    assert rounds2.time_s == pytest.approx(rounds.time_s, rel=1e-12)
