"""SimResult (sim.result): bandwidths, gap and link utilisation derived from the timing, the
bound it carries, and its dict form."""

from __future__ import annotations

import json

import numpy as np
import pytest
from simref import link_lists, ps_allreduce, ring_allreduce, topo

from arsched.bounds import allreduce_bound, latency_bound
from arsched.collective import Schedule, Transfer
from arsched.errors import ArschedError
from arsched.sim import RoundEngine, SimResult, simulate_flow, simulate_rounds
from arsched.topology import ring, star

KEYS = {"time_s", "rounds", "algbw", "busbw", "bound_s", "gap", "transfers"}


def cases():
    fat = topo("fattree:k=4")
    rng = np.random.default_rng(2)
    ranks = tuple(str(x) for x in rng.permutation(np.array(fat.servers))[:6])
    r6 = ring(6, 1e9, 1e-6)
    st5 = star(5, 2e9, 2e-6)
    return {
        "ring-ring": ring_allreduce(r6, r6.servers, 6e6),
        "ps-star": ps_allreduce(st5, st5.servers, 4e6, num_chunks=2),
        "ring-fattree": ring_allreduce(fat, ranks, 3e6, chunks_per_rank=2),
    }


CASES = cases()


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_derived_quantities(name, model):
    s = CASES[name]
    alpha = 3e-6
    res = simulate_flow(s, alpha) if model == "flow" else simulate_rounds(s, alpha)
    assert isinstance(res, SimResult)
    n = s.num_ranks
    assert res.algbw == pytest.approx(s.nbytes / res.time_s, rel=1e-12)
    assert res.busbw == pytest.approx(2 * (n - 1) / n * s.nbytes / res.time_s, rel=1e-12)
    assert res.gap == pytest.approx(res.time_s / res.bound_s, rel=1e-12)
    # the bound: the cut bound for the ranks, or the latency bound (the port form for rounds)
    expect_bound = max(
        allreduce_bound(s.topology, s.ranks, s.nbytes),
        latency_bound(s.topology, s.ranks, alpha=alpha, port_model=model == "rounds"),
    )
    assert res.bound_s == pytest.approx(expect_bound, rel=1e-12)
    # link bytes: one chunk per transfer crossing the link, counted independently
    lb = np.zeros(len(s.topology.links))
    index = {(lk.src, lk.dst): i for i, lk in enumerate(s.topology.links)}
    for ls in link_lists(s):
        for lk in ls:
            lb[index[lk]] += s.chunk_bytes
    np.testing.assert_allclose(res.link_bytes, lb, rtol=1e-12)
    cap = np.array([lk.bandwidth for lk in s.topology.links])
    np.testing.assert_allclose(res.link_busy, lb / cap, rtol=1e-12)
    util = res.link_utilisation
    np.testing.assert_allclose(util, lb / cap / res.time_s, rtol=1e-12)
    assert (util >= 0).all() and (util <= 1 + 1e-9).all()
    assert util.max() > 0


@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_to_dict(model):
    s = CASES["ps-star"]
    res = simulate_flow(s) if model == "flow" else simulate_rounds(s)
    d = res.to_dict()
    assert set(d) >= KEYS
    assert d["time_s"] == res.time_s and d["algbw"] == res.algbw and d["busbw"] == res.busbw
    assert d["bound_s"] == res.bound_s and d["gap"] == res.gap
    assert d["transfers"] == len(s) == 2 * 4 * 2  # (N-1) ranks x 2 chunks, reduce and copy
    assert d["rounds"] == (None if model == "flow" else res.rounds)
    assert (d["model"], d["algorithm"], d["topology"], d["ranks"], d["bytes"]) == (
        model,
        "ps",
        "star(5)",
        5,
        4e6,
    )
    assert d["alpha_s"] == res.alpha
    if model == "flow":
        assert d["method"] == "events"
    assert json.loads(json.dumps(d)) == d  # plain JSON types


def test_a_ring_on_a_ring_saturates_its_links_in_the_limit():
    # large M, no latency or overhead: every ring link is busy all the time in one direction
    n = 5
    t = ring(n, 1e9, 0.0)
    s = ring_allreduce(t, t.servers, 1e9)
    res = simulate_flow(s, 0.0)
    forward = [i for i, lk in enumerate(t.links) if int(lk.dst[1:]) == (int(lk.src[1:]) + 1) % n]
    np.testing.assert_allclose(res.link_utilisation[forward], 1.0, rtol=1e-9)
    assert res.link_utilisation.sum() == pytest.approx(n, rel=1e-9)
    assert res.busbw == pytest.approx(1e9, rel=1e-9)  # the ring reaches the link bandwidth


def test_zero_time_results():
    t = star(3)
    s = ps_allreduce(t, t.servers)
    empty = type(s)(t, s.ranks, 1e6, 1, *([np.zeros(0)] * 6), paths=())
    for res in (simulate_flow(empty), simulate_rounds(empty)):
        assert res.time_s == 0.0
        assert res.algbw == float("inf")
        assert (res.link_utilisation == 0).all()
        assert res.to_dict()["transfers"] == 0


def test_a_path_off_the_topology_is_an_error():
    t = star(3)
    # s0 -> s1 directly: no such link in a star (servers only reach the switch)
    s = Schedule.from_transfers(t, t.servers, 1e6, 1, [Transfer(0, 0, "s0", "s1", "reduce", ("s0", "s1"))])
    for run in (simulate_flow, simulate_rounds, RoundEngine):
        with pytest.raises(ArschedError, match="s0 -> s1 is not a path over links of star"):
            run(s)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("sim", ["flow", "rounds", "engine"])
@pytest.mark.parametrize("alpha", [-1e-3, float("nan")])
def test_a_bad_alpha_is_rejected(sim, alpha):
    s = CASES["ring-ring"]
    with pytest.raises(ValueError, match=r"alpha|α|overhead"):
        if sim == "flow":
            simulate_flow(s, alpha)
        elif sim == "rounds":
            simulate_rounds(s, alpha)
        else:
            eng = RoundEngine(s, alpha)
            eng.execute(eng.available()[:1])
