"""SimResult (sim.result): bandwidths, gap, the bound it carries, link bytes, busy time and
utilisation checked against their definitions (design §3.5) on results of both models; its
summary dict; utilisation closed forms of a ring; empty schedules; and the errors for a path off
the topology and for a bad per-transfer overhead."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from simref import link_numbers

from arsched.bounds import allreduce_bound, latency_bound
from arsched.collective import Schedule, Transfer
from arsched.errors import ArschedError
from arsched.sim import RoundEngine, SimResult, simulate_flow, simulate_rounds
from arsched.topology import ring, star
from schedules import ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

KEYS = {"time_s", "rounds", "algbw", "busbw", "bound_s", "gap", "transfers"}

SCHEDULES = {
    "ring-ring": lambda: ring_allreduce(ring(6, 1e9, 1e-6), ring(6).servers, 6e6),
    "ps-star": lambda: ps_allreduce(star(5, 2e9, 2e-6), star(5).servers, 4e6, num_chunks=2),
    "ring-fattree-2chunks": lambda: ring_allreduce(
        topo("fattree:k=4"), ("s9", "s2", "s14", "s5", "s0", "s11"), 3e6, chunks_per_rank=2
    ),
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


@pytest.mark.parametrize(("case", "model"), CASES)
def test_derived_quantities(case, model):
    s = SCHEDULES[case]()
    r = MODELS[model](s)
    assert isinstance(r, SimResult) and r.schedule is s
    n = s.num_ranks
    assert r.start.shape == r.end.shape == (len(s),)
    assert math.isfinite(r.time_s) and r.time_s > 0
    assert r.algbw == pytest.approx(s.nbytes / r.time_s, rel=1e-12)
    assert r.busbw == pytest.approx(2 * (n - 1) / n * s.nbytes / r.time_s, rel=1e-12)
    assert r.gap == pytest.approx(r.time_s / r.bound_s, rel=1e-12)
    assert r.gap >= 1 - 1e-9
    # the bound: the cut bound for the ranks, or the latency bound (the port form for rounds)
    bw = allreduce_bound(s.topology, s.ranks, s.nbytes)
    lat = latency_bound(s.topology, s.ranks, alpha=r.alpha, port_model=model == "rounds")
    assert r.bound_s == pytest.approx(max(bw, lat), rel=1e-12)
    # link bytes: one chunk per transfer crossing the link, counted independently
    lb = np.zeros(len(s.topology.links))
    for links in link_numbers(s):
        lb[links] += s.chunk_bytes
    np.testing.assert_allclose(r.link_bytes, lb, rtol=1e-12)
    cap = np.array([lk.bandwidth for lk in s.topology.links])
    np.testing.assert_allclose(r.link_busy, lb / cap, rtol=1e-12)
    np.testing.assert_allclose(r.link_utilisation, lb / cap / r.time_s, rtol=1e-12)
    assert (r.link_utilisation >= 0).all() and (r.link_utilisation <= 1 + 1e-9).all()
    assert r.link_utilisation.max() > 0


@pytest.mark.parametrize(("case", "model"), CASES)
def test_to_dict(case, model):
    s = SCHEDULES[case]()
    r = MODELS[model](s)
    d = r.to_dict()
    assert set(d) >= KEYS
    assert d["time_s"] == r.time_s and d["algbw"] == r.algbw and d["busbw"] == r.busbw
    assert d["bound_s"] == r.bound_s and d["gap"] == r.gap
    assert d["transfers"] == len(s)
    assert d["rounds"] == (r.rounds if model == "rounds" else None)
    assert d["model"] == model.split("-")[0]
    assert d["ranks"] == s.num_ranks and d["bytes"] == s.nbytes
    assert d["alpha_s"] == r.alpha
    # plain JSON types: a strict round trip gives the same dict back
    assert json.loads(json.dumps(d, allow_nan=False)) == d


@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_to_dict_names_the_run(model):
    s = SCHEDULES["ps-star"]()
    d = (simulate_flow(s) if model == "flow" else simulate_rounds(s)).to_dict()
    assert d["transfers"] == 2 * 4 * 2  # (N-1) ranks x 2 chunks, reduce and copy
    assert (d["model"], d["algorithm"], d["topology"], d["ranks"], d["bytes"]) == (
        model,
        "ps",
        "star(5)",
        5,
        4e6,
    )
    assert d["rounds"] == (None if model == "flow" else 2 * 4 * 2)
    if model == "flow":
        assert d["method"] == "events"


def test_ring_on_ring_utilisation_closed_form():
    """Each used link carries 2(N-1) chunks of M/N; the ring uses one direction only."""
    n, m, bw, lat = 6, 6e6, 1e9, 1e-6
    t = ring(n, bw, lat)
    r = simulate_flow(ring_allreduce(t, t.servers, m), 2e-6)
    busy = 2 * (n - 1) * (m / n) / bw
    util = sorted(r.link_utilisation.tolist())
    assert util[:n] == pytest.approx([0.0] * n, abs=0)
    assert util[n:] == pytest.approx([busy / r.time_s] * n, rel=1e-12)


def test_a_ring_on_a_ring_saturates_its_links_in_the_limit():
    # large M, no latency or overhead: every ring link is busy all the time in one direction
    n = 5
    t = ring(n, 1e9, 0.0)
    res = simulate_flow(ring_allreduce(t, t.servers, 1e9), 0.0)
    forward = [i for i, lk in enumerate(t.links) if int(lk.dst[1:]) == (int(lk.src[1:]) + 1) % n]
    np.testing.assert_allclose(res.link_utilisation[forward], 1.0, rtol=1e-9)
    assert res.link_utilisation.sum() == pytest.approx(n, rel=1e-9)
    assert res.busbw == pytest.approx(1e9, rel=1e-9)  # the ring reaches the link bandwidth


def test_an_empty_schedule_takes_no_time():
    t = star(3)
    s = ps_allreduce(t, t.servers)
    empty = type(s)(t, s.ranks, 1e6, 1, *([np.zeros(0)] * 6), paths=())
    for res in (simulate_flow(empty), simulate_rounds(empty)):
        assert res.time_s == 0.0 and len(res.start) == len(res.end) == 0
        assert res.algbw == float("inf")
        assert (res.link_utilisation == 0).all()
        assert res.to_dict()["transfers"] == 0
    assert simulate_rounds(empty).rounds == 0


def test_a_path_off_the_topology_is_an_error():
    t = star(3)
    # s0 -> s1 directly: no such link in a star (servers only reach the switch)
    s = Schedule.from_transfers(t, t.servers, 1e6, 1, [Transfer(0, 0, "s0", "s1", "reduce", ("s0", "s1"))])
    for run in (simulate_flow, simulate_rounds, RoundEngine):
        with pytest.raises(ArschedError, match="s0 -> s1 is not a path over links of star"):
            run(s)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("run", [simulate_flow, simulate_rounds, RoundEngine])
@pytest.mark.parametrize("alpha", [-1e-3, float("nan"), float("inf"), "5us", None])
def test_alpha_must_be_a_finite_non_negative_number(run, alpha):
    with pytest.raises(ArschedError, match="alpha"):
        run(SCHEDULES["ps-star"](), alpha)
