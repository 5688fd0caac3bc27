"""The flow model (sim.flow): closed forms for a ring on a ring graph and a parameter server on
a star, the contention-free sweep against the event simulation, and whole runs against an
independent event-driven max-min simulator written in the tests."""

from __future__ import annotations

import numpy as np
import pytest
from simref import (
    bfs_route,
    link_lists,
    ps_allreduce,
    recursive_doubling_allreduce,
    reference_flow,
    ring_allreduce,
    steps_of,
    topo,
)

from arsched.collective import Schedule
from arsched.sim import DEFAULT_ALPHA, simulate_flow
from arsched.sim.deps import derive
from arsched.sim.flow import _events
from arsched.sim.paths import compile_paths
from arsched.topology import Link, Topology, ring, star

# ---- closed forms ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "alpha", "bw", "lat", "per_rank"),
    [
        (2, 0.0, 1e9, 1e-6, 1),
        (3, 5e-6, 1.25e10, 1e-6, 1),
        (5, 2e-6, 1e9, 0.0, 1),
        (8, 1e-5, 5e9, 3e-6, 1),
        (6, 1e-6, 1e9, 2e-6, 3),
    ],
)
@pytest.mark.parametrize("synchronous", [False, True])
def test_ring_on_ring_closed_form(n, alpha, bw, lat, per_rank, synchronous):
    m = 8e6
    t = ring(n, bw, lat)
    s = ring_allreduce(t, t.servers, m, chunks_per_rank=per_rank)
    res = simulate_flow(s, alpha, synchronous=synchronous)
    # 2(N-1) dependent steps; in each, every ring link carries M/N bytes (shared fairly by
    # the `per_rank` chunks of a block), then one hop of latency, after α
    expect = 2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat)
    assert res.time_s == pytest.approx(expect, rel=1e-9)
    assert res.rounds is None and res.model == "flow"
    assert res.notes["method"] == ("sweep" if per_rank == 1 else "events")


@pytest.mark.parametrize(("n", "chunks"), [(3, 1), (5, 1), (8, 1), (4, 3)])
@pytest.mark.parametrize("alpha", [0.0, 5e-6])
@pytest.mark.parametrize("synchronous", [False, True])
def test_parameter_server_on_star_closed_form(n, chunks, alpha, synchronous):
    m, bw, lat = 4e6, 1e9, 1.5e-6
    t = star(n, bw, lat)
    s = ps_allreduce(t, t.servers, m, num_chunks=chunks)
    res = simulate_flow(s, alpha, synchronous=synchronous)
    # all N-1 reduces share the switch's link into the PS, (N-1)·M bytes at B; every copy waits
    # for all of them (they write its source) and the copies then share the PS's uplink; each
    # phase pays α and two hops of latency
    expect = 2 * (n - 1) * m / bw + 2 * (alpha + 2 * lat)
    assert res.time_s == pytest.approx(expect, rel=1e-9)
    assert res.notes["method"] == "events"
    half = len(s) // 2
    np.testing.assert_allclose(res.start[:half], 0.0, atol=1e-18)
    np.testing.assert_allclose(res.start[half:], (n - 1) * m / bw + alpha + 2 * lat, rtol=1e-9)


def test_default_alpha():
    t = ring(4, 1e9, 1e-6)
    s = ring_allreduce(t, t.servers, 1e6)
    assert simulate_flow(s).alpha == DEFAULT_ALPHA == 5e-6
    assert simulate_flow(s).time_s == pytest.approx(simulate_flow(s, 5e-6).time_s, rel=0)


# ---- sweep against events --------------------------------------------------------------------


def disjoint_per_step(schedule) -> bool:
    links = link_lists(schedule)
    for rows in steps_of(schedule).values():
        used = [lk for i in rows for lk in links[i]]
        if len(used) != len(set(used)):
            return False
    return True


def contention_free_cases():
    tor = topo("torus:dims=2x2x2")
    st6 = star(6, 1e9, 2e-6)
    r5 = ring(5, 2e9, 1e-6)
    fat = topo("fattree:k=4")
    rng = np.random.default_rng(1)
    shuffled = tuple(str(x) for x in rng.permutation(np.array(st6.servers)))
    return {
        "ring-on-ring": ring_allreduce(r5, r5.servers, 5e6),
        "ring-on-star-shuffled": ring_allreduce(st6, shuffled, 3e6),
        "rd-on-cube": recursive_doubling_allreduce(tor, tor.servers, 2e6),
        "rd-on-star": recursive_doubling_allreduce(st6, shuffled[:4], 2e6),
        "ring-on-fattree-in-order": ring_allreduce(fat, fat.servers, 4e6),
    }


FREE = contention_free_cases()


@pytest.mark.parametrize("name", list(FREE))
@pytest.mark.parametrize("synchronous", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 5e-6])
def test_sweep_equals_event_simulation_without_contention(name, synchronous, alpha):
    s = FREE[name]
    res = simulate_flow(s, alpha, synchronous=synchronous)
    assert res.notes == {"method": "sweep"}
    send, done, instants = _events(s, derive(s, synchronous), compile_paths(s), alpha)
    assert instants > 0
    np.testing.assert_allclose(done, res.end, rtol=1e-9)
    np.testing.assert_allclose(send - alpha, res.start, rtol=1e-9, atol=1e-15)
    assert float(done.max()) == pytest.approx(res.time_s, rel=1e-9)


def contended_cases():
    fat = topo("fattree:k=4")
    st7 = star(7, 1e9, 1e-6)
    out = {"ps-on-star": ps_allreduce(st7, st7.servers, 2e6, num_chunks=2)}
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        ranks = tuple(str(x) for x in rng.permutation(np.array(fat.servers)))
        out[f"ring-fattree-shuffled-{seed}"] = ring_allreduce(fat, ranks, 1e8)
    return out


CONTENDED = contended_cases()


@pytest.mark.parametrize("name", list(CONTENDED))
def test_contended_schedules_use_events(name):
    s = CONTENDED[name]
    if name.startswith("ring"):
        # independently: some step puts two transfers on one directed link, and with 100 MB
        # the sending times (µs per chunk at 100 Gb/s x 6 MB) dwarf latency differences
        assert not disjoint_per_step(s)
    res = simulate_flow(s)
    assert res.notes["method"] == "events"
    assert res.notes["event_instants"] > 0


# ---- against an independent simulator --------------------------------------------------------


def reference_cases():
    fat = topo("fattree:k=4")
    tor = topo("torus:dims=3x3")
    bc = topo("bcube:n=3,k=1")
    st5 = star(5, 1e9, 1e-6)
    rng = np.random.default_rng(3)
    ranks = tuple(str(x) for x in rng.permutation(np.array(fat.servers))[:8])
    return {
        "ring-fattree-shuffled": ring_allreduce(fat, ranks, 1e6),
        "ring-torus-in-order": ring_allreduce(tor, tor.servers, 1e6),
        "ps-star-2chunks": ps_allreduce(st5, st5.servers, 1e6, num_chunks=2, ps="s2"),
        "rd-bcube-bfs-routes": recursive_doubling_allreduce(
            bc, bc.servers[1:5], 1e6, num_chunks=2, route=bfs_route(bc)
        ),
        "ring-bcube-2chunks": ring_allreduce(bc, bc.servers[:6], 1e6, chunks_per_rank=2),
    }


REFERENCE = reference_cases()


@pytest.mark.parametrize("name", list(REFERENCE))
@pytest.mark.parametrize("synchronous", [False, True])
def test_flow_model_matches_an_independent_simulator(name, synchronous):
    s = REFERENCE[name]
    alpha = 2e-6
    res = simulate_flow(s, alpha, synchronous=synchronous)
    ready, done = reference_flow(s, alpha, synchronous)
    np.testing.assert_allclose(res.end, done, rtol=1e-7)
    np.testing.assert_allclose(res.start, ready, rtol=1e-7, atol=1e-15)
    assert res.time_s == pytest.approx(done.max(), rel=1e-7)


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
        res = simulate_flow(s, 0.0, synchronous=synchronous)
        _, done = reference_flow(s, 0.0, synchronous)
        np.testing.assert_allclose(res.end, done, rtol=1e-9)
    # with a barrier each step lasts as long as its transfer over the slow link, alone on it
    durations = res.end - res.start
    slow = [i for i, tr in enumerate(s.transfers) if tr.src == "s0"]
    np.testing.assert_allclose(durations[slow], 1e6 / (bw / 4) + lat, rtol=1e-9)
    assert res.time_s == pytest.approx(2 * (n - 1) * (1e6 / (bw / 4) + lat), rel=1e-9)
