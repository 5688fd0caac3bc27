"""Both simulators against closed forms (design §3.5): a ring AllReduce on a ring graph (one or
several chunks per block), a parameter server on a star, the slots of the round model, a ring
with one slow link, and the default per-transfer overheads."""

from __future__ import annotations

import numpy as np
import pytest
from simref import reference_flow

from arsched.collective import Schedule
from arsched.sim import DEFAULT_ALPHA, simulate_flow, simulate_rounds
from arsched.topology import Link, Topology, ring, star
from schedules import ps_allreduce, ring_allreduce

REL = 1e-9

# (alpha, bandwidth, latency): zero overheads, the defaults, and a slow high-latency network
PARAMS = [(0.0, 1e9, 0.0), (5e-6, 12.5e9, 1e-6), (1e-3, 3e8, 2e-5)]


# ---- ring AllReduce on a ring graph ---------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
@pytest.mark.parametrize("synchronous", [False, True])
def test_ring_on_ring_flow_closed_form(n, alpha, bw, lat, synchronous):
    m = 3e6
    t = ring(n, bw, lat)
    r = simulate_flow(ring_allreduce(t, t.servers, m), alpha, synchronous=synchronous)
    # 2(N-1) dependent steps, each a chunk M/N over one link, nothing shared, after α
    assert r.time_s == pytest.approx(2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat), rel=REL)
    assert r.notes["method"] == "sweep"
    assert r.rounds is None and r.model == "flow"


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
def test_ring_on_ring_rounds_closed_form(n, alpha, bw, lat):
    m = 3e6
    t = ring(n, bw, lat)
    r = simulate_rounds(ring_allreduce(t, t.servers, m), alpha)
    assert r.rounds == 2 * (n - 1)
    assert r.time_s == pytest.approx(2 * (n - 1) * (m / n / bw + lat + alpha), rel=REL)
    assert r.model == "rounds" and r.alpha == alpha


@pytest.mark.parametrize("n", [3, 6])
@pytest.mark.parametrize("per_rank", [2, 3])
@pytest.mark.parametrize("synchronous", [False, True])
def test_ring_with_several_chunks_per_block(n, per_rank, synchronous):
    """Each step sends `per_rank` chunks of M/(N·per_rank) over the same link: in the flow model
    they share it (each at B/per_rank) and finish together, so the time is the same closed form;
    in the round model each takes its own round."""
    m, alpha, bw, lat = 4e6, 3e-6, 12.5e9, 2e-6
    t = ring(n, bw, lat)
    s = ring_allreduce(t, t.servers, m, chunks_per_rank=per_rank)
    f = simulate_flow(s, alpha, synchronous=synchronous)
    assert f.notes["method"] == "events"
    assert f.time_s == pytest.approx(2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat), rel=REL)
    r = simulate_rounds(s, alpha)
    assert r.rounds == 2 * (n - 1) * per_rank
    chunk = m / (n * per_rank)
    assert r.time_s == pytest.approx(2 * (n - 1) * per_rank * (chunk / bw + lat + alpha), rel=REL)


# ---- parameter server on a star -------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
@pytest.mark.parametrize("synchronous", [False, True])
def test_parameter_server_on_star_flow(n, chunks, alpha, bw, lat, synchronous):
    """All (N-1)·C reduces share the PS's downlink w0->s0 (M bytes per rank in all); every copy
    waits for all of them (they write its source), then the copies share its uplink; each phase
    pays α and two hops of latency."""
    m = 2e6
    t = star(n, bw, lat)
    s = ps_allreduce(t, t.servers, m, num_chunks=chunks)
    r = simulate_flow(s, alpha, synchronous=synchronous)
    assert r.time_s == pytest.approx(2 * (n - 1) * m / bw + 2 * (alpha + 2 * lat), rel=REL)
    assert r.notes["method"] == ("events" if (n - 1) * chunks > 1 else "sweep")
    # every reduce starts at once and ends together; every copy starts when they are done
    reduce_end = alpha + (n - 1) * m / bw + 2 * lat
    np.testing.assert_allclose(r.start[s.step == 0], 0.0, atol=1e-18)
    np.testing.assert_allclose(r.end[s.step == 0], reduce_end, rtol=REL)
    np.testing.assert_allclose(r.start[s.step == 1], reduce_end, rtol=REL)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("chunks", [1, 3])
@pytest.mark.parametrize(("alpha", "bw", "lat"), PARAMS)
def test_parameter_server_on_star_rounds(n, chunks, alpha, bw, lat):
    """One flow per directed link per round: (N-1)·C rounds per step on the PS's port, each one
    chunk over two hops."""
    m = 2e6
    t = star(n, bw, lat)
    r = simulate_rounds(ps_allreduce(t, t.servers, m, num_chunks=chunks), alpha)
    assert r.rounds == 2 * (n - 1) * chunks
    assert r.time_s == pytest.approx(2 * (n - 1) * chunks * (m / chunks / bw + 2 * lat + alpha), rel=REL)


def test_round_start_and_end_follow_the_slots():
    t = star(4, 1e9, 1e-6)
    s = ps_allreduce(t, t.servers, 3e6)
    res = simulate_rounds(s, 1e-6)
    d = 3e6 / 1e9 + 2e-6 + 1e-6
    # one transfer per round, in stored order: starts at k·d and lasts d
    np.testing.assert_allclose(res.start, np.arange(6) * d, rtol=1e-12, atol=1e-18)
    np.testing.assert_allclose(res.end, np.arange(1, 7) * d, rtol=1e-12)


# ---- mixed bandwidths -------------------------------------------------------------------------


def test_mixed_bandwidths_use_the_bottleneck():
    """A ring with one slow link: transfers crossing it take chunk / its bandwidth."""
    n, bw, lat = 4, 1e9, 1e-6
    links = []
    for i in range(n):
        j = (i + 1) % n
        slow = bw / 4 if i == 0 else bw
        links += [Link(f"s{i}", f"s{j}", slow, lat), Link(f"s{j}", f"s{i}", bw, lat)]
    t = Topology("slow-ring", [(f"s{i}", "server") for i in range(n)], links)
    s = Schedule.from_transfers(
        t, t.servers, 4e6, n, ring_allreduce(ring(n), ring(n).servers, 4e6).transfers, algorithm="ring"
    )
    for synchronous in (False, True):
        res = simulate_flow(s, 0.0, synchronous=synchronous, fifo=False)
        _, done = reference_flow(s, 0.0, synchronous)
        np.testing.assert_allclose(res.end, done, rtol=1e-9)
    # with a barrier each step lasts as long as its transfer over the slow link, alone on it
    durations = res.end - res.start
    slow = [i for i, tr in enumerate(s.transfers) if tr.src == "s0"]
    np.testing.assert_allclose(durations[slow], 1e6 / (bw / 4) + lat, rtol=1e-9)
    assert res.time_s == pytest.approx(2 * (n - 1) * (1e6 / (bw / 4) + lat), rel=1e-9)


def test_default_alphas():
    """The flow model charges DEFAULT_ALPHA (5 µs) per transfer by default, the round model 0."""
    t = ring(4, 1e9, 1e-6)
    s = ring_allreduce(t, t.servers, 1e6)
    assert simulate_flow(s).alpha == DEFAULT_ALPHA == 5e-6
    assert simulate_flow(s).time_s == pytest.approx(simulate_flow(s, 5e-6).time_s, rel=0)
    assert simulate_rounds(s).alpha == 0.0
    assert simulate_rounds(s).time_s == simulate_rounds(s, 0.0).time_s
