"""In-order connections (`fifo=True`): a transfer also waits for its connection's previous step."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.collective import Schedule, Transfer
from arsched.sim import simulate_flow
from arsched.sim.deps import Readiness, derive
from arsched.topology import parse_spec, ring, star


def test_fifo_orders_a_connection_by_step():
    topo = star(3)
    # two independent chunks on the same connection s0->s1 in steps 0 and 1, one on s2->s1
    s = Schedule.from_transfers(
        topo,
        topo.servers,
        3e6,
        3,
        [Transfer(0, 0, "s0", "s1"), Transfer(1, 1, "s0", "s1"), Transfer(1, 2, "s2", "s1")],
    )
    assert sorted(Readiness(derive(s)).initial().tolist()) == [0, 1, 2]  # buffers are independent
    ready = Readiness(derive(s, fifo=True))
    assert sorted(ready.initial().tolist()) == [0, 2]  # step 1 on s0->s1 waits for step 0
    assert ready.complete(np.array([0])).tolist() == [1]


@pytest.mark.parametrize("n", [3, 6])
def test_fifo_keeps_the_ring_closed_form(n):
    bw, lat, alpha, m = 1e9, 1e-6, 5e-6, 6e6
    s = build("ring", ring(n, bandwidth=bw, latency=lat), None, m, order="given")
    expect = 2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat)
    assert simulate_flow(s, alpha, fifo=True).time_s == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("name", ["dbtree", "tree-packing", "greedy-trees", "rhd", "ps"])
@pytest.mark.parametrize("spec", ["star:n=5", "bcube:n=2,k=1", "fattree:k=4"])
def test_fifo_never_beats_the_bound(name, spec):
    topo = parse_spec(spec)
    params = {"units": 4, "stages": 4} if name == "tree-packing" else {}  # short pipelines: fast
    r = simulate_flow(build(name, topo, None, 32e6, **params), fifo=True)
    assert r.time_s >= r.bound_s * (1 - 1e-9)
    assert (r.end >= r.start).all()


def test_fifo_lets_pipelined_trees_stream():
    """Chunks of a pipelined tree sent all at once share links until they all finish; in
    order, the first ones move on while later ones are sent: the double binary tree gains."""
    topo = parse_spec("fattree:k=4")
    s = build("dbtree", topo, None, 256e6, chunks=32)
    assert simulate_flow(s).time_s < simulate_flow(s, fifo=False).time_s
