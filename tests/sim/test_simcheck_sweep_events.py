"""The flow model's two exact methods agree: on schedules without contention the sweep's answer
equals the event simulation forced on them; contended schedules go to the event simulation."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from simcheck_reference import transfer_links

from arsched.sim import simulate_flow
from arsched.sim.deps import derive
from arsched.sim.flow import _events
from arsched.sim.paths import compile_paths
from arsched.topology import ring
from schedules import ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

REL = 1e-9

QUIET = {
    "ring-on-ring(5)": lambda: ring_allreduce(ring(5, 1e9, 2e-6), ring(5).servers, 3e6),
    "ring-on-ring(8)-reversed": lambda: ring_allreduce(topo("ring:n=8"), topo("ring:n=8").servers[::-1]),
    "ring-on-bcube": lambda: ring_allreduce(topo("bcube:n=4,k=1"), topo("bcube:n=4,k=1").servers),
    "rd-on-bcube(2,2)": lambda: recursive_doubling_allreduce(
        topo("bcube:n=2,k=2"), topo("bcube:n=2,k=2").servers
    ),
    "rd-on-hypercube": lambda: recursive_doubling_allreduce(
        topo("torus:dims=2x2x2,latency=0s"), topo("torus:dims=2x2x2").servers, 1e5
    ),
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
    r = simulate_flow(s, alpha, synchronous=synchronous)
    assert r.notes == {"method": "sweep"}
    send, done, instants = _events(s, derive(s, synchronous), compile_paths(s), alpha)
    assert instants >= 1
    assert send - alpha == pytest.approx(r.start, rel=REL, abs=REL * r.time_s)
    assert done == pytest.approx(r.end, rel=REL, abs=REL * r.time_s)
    assert done.max() == pytest.approx(r.time_s, rel=REL)


def _shares_a_link_in_step0(s) -> bool:
    """Transfers of step 0 wait for nothing: two of them on one link must overlap in time."""
    links = [lk for t, ls in zip(s, transfer_links(s), strict=True) if t.step == 0 for lk in ls]
    return max(Counter(links).values()) > 1


@pytest.mark.parametrize("n", [3, 5, 8])
@pytest.mark.parametrize("alpha", [0.0, 5e-6])
def test_parameter_server_is_contended(n, alpha):
    t = topo(f"star:n={n}")
    s = ps_allreduce(t, t.servers)
    assert _shares_a_link_in_step0(s)
    r = simulate_flow(s, alpha)
    assert r.notes["method"] == "events"
    assert r.notes["event_instants"] >= 2


def _contended_fattree_orders():
    t = topo("fattree:k=4")
    rng = np.random.default_rng(11)
    out = []
    while len(out) < 4:
        order = tuple(str(x) for x in rng.permutation(t.servers))
        if _shares_a_link_in_step0(ring_allreduce(t, order)):
            out.append(order)
    return out


@pytest.mark.parametrize("order", _contended_fattree_orders())
@pytest.mark.parametrize("synchronous", [False, True])
def test_random_ring_on_fattree_is_contended(order, synchronous):
    s = ring_allreduce(topo("fattree:k=4"), order)
    r = simulate_flow(s, 5e-6, synchronous=synchronous)
    assert r.notes["method"] == "events"
    # the event result is what the events function gives on its own
    send, done, instants = _events(s, derive(s, synchronous), compile_paths(s), 5e-6)
    assert np.array_equal(done, r.end) and np.array_equal(send - 5e-6, r.start)
    assert instants == r.notes["event_instants"]
