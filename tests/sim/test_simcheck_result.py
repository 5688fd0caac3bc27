"""SimResult: bandwidths, gap and bound, link busy time and utilisation, and the summary dict,
checked against their definitions (design §3.5) on results of both models."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from arsched.bounds import allreduce_bound, latency_bound
from arsched.errors import ArschedError
from arsched.sim import DEFAULT_ALPHA, RoundEngine, SimResult, simulate_flow, simulate_rounds
from arsched.topology import ring
from schedules import ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

SCHEDULES = {
    "ring-ring": lambda: ring_allreduce(ring(6, 1e9, 1e-6), ring(6).servers, 6e6),
    "ps-star": lambda: ps_allreduce(topo("star:n=5"), topo("star:n=5").servers, 1e7, num_chunks=2),
    "rd-fattree": lambda: recursive_doubling_allreduce(
        topo("fattree:k=4"), topo("fattree:k=4").servers[3:11]
    ),
    "ring-bcube-subset": lambda: ring_allreduce(topo("bcube:n=4,k=1"), ("s5", "s0", "s10", "s15", "s3")),
}
MODELS = {
    "flow": lambda s: simulate_flow(s, 2e-6),
    "flow-sync": lambda s: simulate_flow(s, 0.0, synchronous=True),
    "rounds": lambda s: simulate_rounds(s, 1e-6),
}
CASES = [(s, m) for s in SCHEDULES for m in MODELS]


def result(case: str, model: str) -> SimResult:
    return MODELS[model](SCHEDULES[case]())


@pytest.mark.parametrize(("case", "model"), CASES)
def test_bandwidths_and_gap(case, model):
    r = result(case, model)
    s = r.schedule
    n = s.num_ranks
    assert r.algbw == pytest.approx(s.nbytes / r.time_s, rel=1e-12)
    assert r.busbw == pytest.approx(2 * (n - 1) / n * s.nbytes / r.time_s, rel=1e-12)
    assert r.gap == pytest.approx(r.time_s / r.bound_s, rel=1e-12)
    assert r.gap >= 1 - 1e-9


@pytest.mark.parametrize(("case", "model"), CASES)
def test_bound_is_the_larger_of_bandwidth_and_latency_bounds(case, model):
    r = result(case, model)
    s = r.schedule
    bw = allreduce_bound(s.topology, s.ranks, s.nbytes)
    lat = latency_bound(s.topology, s.ranks, alpha=r.alpha, port_model=model == "rounds")
    assert r.bound_s == pytest.approx(max(bw, lat), rel=1e-12)


@pytest.mark.parametrize(("case", "model"), CASES)
def test_link_busy_time_and_utilisation(case, model):
    r = result(case, model)
    cap = np.array([lk.bandwidth for lk in r.schedule.topology.links])
    assert r.link_busy == pytest.approx(r.link_bytes / cap, rel=1e-12)
    assert r.link_utilisation == pytest.approx(r.link_bytes / cap / r.time_s, rel=1e-12)
    assert (r.link_utilisation >= 0).all() and (r.link_utilisation <= 1 + 1e-9).all()


def test_ring_on_ring_utilisation_closed_form():
    """Each used link carries 2(N-1) chunks of M/N; the ring uses one direction only."""
    n, m, bw, lat = 6, 6e6, 1e9, 1e-6
    t = ring(n, bw, lat)
    r = simulate_flow(ring_allreduce(t, t.servers, m), 2e-6)
    busy = 2 * (n - 1) * (m / n) / bw
    util = sorted(r.link_utilisation.tolist())
    assert util[:n] == pytest.approx([0.0] * n, abs=0)
    assert util[n:] == pytest.approx([busy / r.time_s] * n, rel=1e-12)


@pytest.mark.parametrize(("case", "model"), CASES)
def test_to_dict(case, model):
    r = result(case, model)
    d = r.to_dict()
    for key in ("time_s", "rounds", "algbw", "busbw", "bound_s", "gap", "transfers"):
        assert key in d
    assert d["time_s"] == r.time_s and d["algbw"] == r.algbw and d["busbw"] == r.busbw
    assert d["bound_s"] == r.bound_s and d["gap"] == r.gap
    assert d["transfers"] == len(r.schedule)
    assert d["rounds"] == (r.rounds if model == "rounds" else None)
    assert d["model"] == model.split("-")[0]
    assert d["ranks"] == r.schedule.num_ranks and d["bytes"] == r.schedule.nbytes
    assert d["alpha_s"] == r.alpha
    # plain JSON types: a strict round trip gives the same dict back
    assert json.loads(json.dumps(d, allow_nan=False)) == d


def test_rounds_is_set_only_by_the_round_model():
    s = SCHEDULES["ps-star"]()
    assert simulate_rounds(s).rounds == 2 * 4 * 2
    assert simulate_flow(s).rounds is None


def test_default_alphas():
    s = SCHEDULES["ring-ring"]()
    assert simulate_flow(s).alpha == DEFAULT_ALPHA == 5e-6
    assert simulate_rounds(s).alpha == 0.0


def test_start_and_end_are_per_transfer():
    s = SCHEDULES["ring-bcube-subset"]()
    for r in (simulate_flow(s), simulate_rounds(s)):
        assert r.start.shape == r.end.shape == (len(s),)
        assert r.link_bytes.shape == (len(s.topology.links),)
        assert math.isfinite(r.time_s) and r.time_s > 0


@pytest.mark.parametrize("alpha", [-1e-6, float("nan"), float("inf"), "5us", None])
def test_alpha_must_be_a_finite_non_negative_number(alpha):
    s = SCHEDULES["ps-star"]()
    with pytest.raises(ArschedError, match="alpha"):
        simulate_flow(s, alpha)
    with pytest.raises(ArschedError, match="alpha"):
        simulate_rounds(s, alpha)
    with pytest.raises(ArschedError, match="alpha"):
        RoundEngine(s, alpha)
