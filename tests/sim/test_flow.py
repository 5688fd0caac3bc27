"""The flow model's two exact methods and the independent reference: on schedules without
contention the sweep's answer equals the event simulation forced on them (`method='events'`);
contended schedules go to the event simulation; whole runs equal the reference's event loop."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simcases import allreduce_schedules
from simref import disjoint_steps, link_lists, reference_flow

from arsched.collective import Schedule
from arsched.errors import ArschedError, NotFaster, OutOfTime
from arsched.sim import simulate_flow
from arsched.topology import ring, star
from schedules import bfs_route, ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

REL = 1e-9


def _shuffled(spec: str, seed: int, k: int | None = None) -> tuple[str, ...]:
    servers = np.array(topo(spec).servers)
    return tuple(str(x) for x in np.random.default_rng(seed).permutation(servers)[:k])


# ---- the sweep equals the event simulation without contention --------------------------------

QUIET = {
    "ring-on-ring(5)": lambda: ring_allreduce(ring(5, 2e9, 1e-6), ring(5).servers, 5e6),
    "ring-on-ring(8)-reversed": lambda: ring_allreduce(topo("ring:n=8"), topo("ring:n=8").servers[::-1]),
    "ring-on-star-shuffled": lambda: ring_allreduce(star(6, 1e9, 2e-6), _shuffled("star:n=6", 1), 3e6),
    "ring-on-bcube": lambda: ring_allreduce(topo("bcube:n=4,k=1"), topo("bcube:n=4,k=1").servers),
    "ring-on-fattree-in-order": lambda: ring_allreduce(topo("fattree:k=4"), topo("fattree:k=4").servers, 4e6),
    "rd-on-cube": lambda: recursive_doubling_allreduce(
        topo("torus:dims=2x2x2"), topo("torus:dims=2x2x2").servers, 2e6
    ),
    "rd-on-cube-no-latency": lambda: recursive_doubling_allreduce(
        topo("torus:dims=2x2x2,latency=0s"), topo("torus:dims=2x2x2").servers, 1e5
    ),
    "rd-on-bcube(2,2)": lambda: recursive_doubling_allreduce(
        topo("bcube:n=2,k=2"), topo("bcube:n=2,k=2").servers
    ),
    "rd-on-star": lambda: recursive_doubling_allreduce(star(6, 1e9, 2e-6), _shuffled("star:n=6", 1, 4), 2e6),
    "ps-on-star(2)": lambda: ps_allreduce(topo("star:n=2"), ("s0", "s1")),
    "ring-mixed-bandwidth": lambda: ring_allreduce(
        topo("bcube:n=3,k=1,bandwidth=100Gbps/40Gbps,latency=1us/3us"), topo("bcube:n=3,k=1").servers
    ),
}

# the mixed-bandwidth ring desynchronises its steps when asynchronous (paths of 2 and 4 hops at
# different speeds), so later steps overlap earlier ones on shared links: quiet only with barriers
QUIET_RUNS = [(case, sync) for case in QUIET for sync in (False, True) if sync or "mixed" not in case]


@pytest.mark.parametrize("alpha", [0.0, 5e-6])
@pytest.mark.parametrize(("case", "synchronous"), QUIET_RUNS)
def test_sweep_equals_forced_event_simulation(case, alpha, synchronous):
    s = QUIET[case]()
    r = simulate_flow(s, alpha, synchronous=synchronous, fifo=False)
    assert r.notes == {"method": "sweep"}
    e = simulate_flow(s, alpha, synchronous=synchronous, fifo=False, method="events")
    assert e.notes["method"] == "events" and e.notes["event_instants"] >= 1
    assert e.start == pytest.approx(r.start, rel=REL, abs=REL * r.time_s)
    assert e.end == pytest.approx(r.end, rel=REL, abs=REL * r.time_s)
    assert e.time_s == pytest.approx(r.time_s, rel=REL)


def test_an_unknown_method_is_an_error():
    s = QUIET["ps-on-star(2)"]()
    with pytest.raises(ArschedError, match="sweep"):
        simulate_flow(s, method="sweep")


# ---- contended schedules go to the event simulation --------------------------------------------


def shares_a_link_in_step0(s) -> bool:
    """Transfers of step 0 wait for nothing: two of them on one link must overlap in time."""
    links = [lk for t, ls in zip(s.transfers, link_lists(s), strict=True) if t.step == 0 for lk in ls]
    return max(Counter(links).values()) > 1


def _contended_fattree_orders(count: int = 4) -> list[tuple[str, ...]]:
    t = topo("fattree:k=4")
    rng = np.random.default_rng(11)
    out = []
    while len(out) < count:
        order = tuple(str(x) for x in rng.permutation(t.servers))
        if shares_a_link_in_step0(ring_allreduce(t, order)):
            out.append(order)
    return out


def _contended_cases() -> dict[str, Callable[[], Schedule]]:
    out: dict[str, Callable[[], Schedule]] = {}
    for n in (3, 5, 8):
        out[f"ps-on-star({n})"] = partial(ps_allreduce, topo(f"star:n={n}"), topo(f"star:n={n}").servers)
    out["ps-on-star(7)-2chunks"] = partial(ps_allreduce, star(7, 1e9, 1e-6), star(7).servers, 2e6, 2)
    # with 100 MB the sending times dwarf latency differences; 1 MB keeps them comparable
    for i, order in enumerate(_contended_fattree_orders()):
        out[f"ring-fattree-shuffled-{i}"] = partial(
            ring_allreduce, topo("fattree:k=4"), order, 1e8 if i < 2 else 1e6
        )
    return out


CONTENDED = _contended_cases()


@pytest.mark.parametrize("synchronous", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 5e-6])
@pytest.mark.parametrize("case", list(CONTENDED))
def test_contended_schedules_use_the_event_simulation(case, alpha, synchronous):
    s = CONTENDED[case]()
    assert shares_a_link_in_step0(s)  # the precondition, checked independently
    r = simulate_flow(s, alpha, synchronous=synchronous, fifo=False)
    assert r.notes["method"] == "events"
    assert r.notes["event_instants"] >= 2
    # forcing the event simulation gives exactly the same result
    e = simulate_flow(s, alpha, synchronous=synchronous, fifo=False, method="events")
    assert np.array_equal(e.end, r.end) and np.array_equal(e.start, r.start)
    assert e.notes == r.notes


@pytest.mark.parametrize("fifo", [False, True])
@pytest.mark.parametrize("synchronous", [False, True])
@pytest.mark.parametrize("case", list(CONTENDED))
def test_giving_up_above_a_time_uses_the_busiest_link_and_the_contention_free_floor(case, synchronous, fifo):
    """A schedule whose busiest link's bytes take `give_up_above` at its capacity stops with that
    floor before anything else; a contended one whose contention-free time reaches the value
    stops with the higher of the two; both are at most its simulated time, and just above the
    last floor it is simulated as usual. A schedule the sweep times exactly is returned in full
    above its busiest link's floor."""
    s = CONTENDED[case]()
    r = simulate_flow(s, 5e-6, synchronous=synchronous, fifo=fifo)
    assert r.notes["method"] == "events"
    busiest = float((r.link_bytes / s.topology.compiled.capacity).max())
    with pytest.raises(NotFaster) as stop:
        simulate_flow(s, 5e-6, synchronous=synchronous, fifo=fifo, give_up_above=0.0)
    assert stop.value.floor_s == busiest
    floor = busiest
    try:  # the contention-free time may be the higher floor
        simulate_flow(s, 5e-6, synchronous=synchronous, fifo=fifo, give_up_above=floor * (1 + 1e-9))
    except NotFaster as e:
        floor = e.floor_s
    assert 0 < busiest <= floor <= r.time_s
    with pytest.raises(NotFaster):
        simulate_flow(s, 5e-6, synchronous=synchronous, fifo=fifo, give_up_above=floor)
    below = simulate_flow(s, 5e-6, synchronous=synchronous, fifo=fifo, give_up_above=floor * (1 + 1e-9))
    assert np.array_equal(below.end, r.end)
    in_order = ring_allreduce(topo("torus:dims=3x3"), topo("torus:dims=3x3").servers, 1e6)
    alone = simulate_flow(in_order, 5e-6, synchronous=synchronous, fifo=fifo)
    if alone.notes["method"] == "sweep":
        above = float((alone.link_bytes / in_order.topology.compiled.capacity).max()) * (1 + 1e-9)
        again = simulate_flow(in_order, 5e-6, synchronous=synchronous, fifo=fifo, give_up_above=above)
        assert np.array_equal(again.end, alone.end)


# ---- against the independent reference ---------------------------------------------------------


REFERENCE = {
    "ring-fattree-shuffled": lambda: ring_allreduce(topo("fattree:k=4"), _shuffled("fattree:k=4", 3, 8), 1e6),
    "ring-torus-in-order": lambda: ring_allreduce(
        topo("torus:dims=3x3"), topo("torus:dims=3x3").servers, 1e6
    ),
    "ps-star-2chunks": lambda: ps_allreduce(star(5, 1e9, 1e-6), star(5).servers, 1e6, num_chunks=2, ps="s2"),
    "rd-bcube-bfs-routes": lambda: recursive_doubling_allreduce(
        topo("bcube:n=3,k=1"),
        topo("bcube:n=3,k=1").servers[1:5],
        1e6,
        2,
        route=bfs_route(topo("bcube:n=3,k=1")),
    ),
    "ring-bcube-2chunks": lambda: ring_allreduce(
        topo("bcube:n=3,k=1"), topo("bcube:n=3,k=1").servers[:6], 1e6, chunks_per_rank=2
    ),
}


@pytest.mark.parametrize("synchronous", [False, True])
@pytest.mark.parametrize("case", list(REFERENCE))
def test_flow_model_matches_the_reference(case, synchronous):
    s = REFERENCE[case]()
    alpha = 2e-6
    r = simulate_flow(s, alpha, synchronous=synchronous, fifo=False)
    ready, done = reference_flow(s, alpha, synchronous)
    np.testing.assert_allclose(r.end, done, rtol=1e-7)
    np.testing.assert_allclose(r.start, ready, rtol=1e-7, atol=1e-15)
    assert r.time_s == pytest.approx(done.max(), rel=1e-7)


@settings(max_examples=20)
@given(allreduce_schedules(max_ranks=6), st.sampled_from([0.0, 1e-6, 5e-6]), st.booleans())
def test_property_flow_model_equals_the_reference(s, alpha, synchronous):
    r = simulate_flow(s, alpha, synchronous=synchronous, fifo=False)
    ready, done = reference_flow(s, alpha, synchronous)
    assert r.start == pytest.approx(ready, rel=1e-7, abs=1e-9 * r.time_s)
    assert r.end == pytest.approx(done, rel=1e-7, abs=1e-9 * r.time_s)
    if disjoint_steps(s) and synchronous:
        assert r.notes["method"] == "sweep"  # no link shared at once: the sweep is exact


def test_an_event_simulation_past_its_deadline_stops():
    """auto gives the simulation of each candidate its remaining budget: an event simulation
    still running at the deadline stops with OutOfTime; the sweep and a far deadline answer."""
    s = ps_allreduce(star(5), star(5).servers, 1e6, num_chunks=2)
    assert simulate_flow(s).notes["method"] == "events"
    with pytest.raises(OutOfTime, match="deadline"):
        simulate_flow(s, deadline=time.monotonic() - 1.0)
    far = simulate_flow(s, deadline=time.monotonic() + 3600.0)
    assert far.time_s == simulate_flow(s).time_s


def test_an_event_simulation_past_its_instant_limit_stops():
    """A limit on event instants bounds the work the same way on every machine: a simulation
    that needs n instants finishes with a limit of n and stops with OutOfTime below it."""
    s = ps_allreduce(star(5), star(5).servers, 1e6, num_chunks=2)
    free = simulate_flow(s)
    n = free.notes["event_instants"]
    assert n > 1
    assert simulate_flow(s, max_instants=n).time_s == free.time_s
    with pytest.raises(OutOfTime, match=f"limit of {n - 1:,} event instants") as cut:
        simulate_flow(s, max_instants=n - 1)
    assert 0 < cut.value.floor_s <= free.time_s  # what it knew: a lower bound on the time
    for bad in (0, -3, 2.5, "10"):
        with pytest.raises(ArschedError, match="max_instants must be a positive integer"):
            simulate_flow(s, max_instants=bad)
