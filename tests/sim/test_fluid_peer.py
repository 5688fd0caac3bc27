"""The SimGrid peer (`sim.fluid_peer`): optional, skipped where SimGrid's Python bindings are
absent (`apt-get install python3-simgrid`). SimGrid's max-min solver, given the flow model's
semantics, must give the flow model's times: exactly the closed form where nothing is shared,
and the same time to REL where flows share links (these small cases agree to rounding, about
1e-15; `benchmarks/bench_simgrid.py` measures larger ones)."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.collective import ScheduleBuilder, validate
from arsched.errors import ArschedError
from arsched.sim import fluid_peer, simulate_flow
from arsched.topology import fattree, ring, star
from schedules import ps_allreduce, ring_allreduce

REL = 1e-9
needs_simgrid = pytest.mark.skipif(not fluid_peer.available(), reason="SimGrid's Python bindings are absent")


@needs_simgrid
def test_without_contention_simgrid_gives_the_closed_form():
    n, m, bw, lat, alpha = 5, 3e6, 12.5e9, 1e-6, 5e-6
    t = ring(n, bw, lat)
    s = ring_allreduce(t, t.servers, m)
    assert validate(s).ok
    flow = simulate_flow(s, alpha)
    assert flow.notes["method"] == "sweep"
    closed = 2 * (n - 1) / n * m / bw + 2 * (n - 1) * (alpha + lat)
    peer = fluid_peer.simulate_simgrid(s, alpha)
    assert peer.time_s == pytest.approx(closed, rel=REL)
    assert peer.time_s == pytest.approx(flow.time_s, rel=REL)
    assert peer.wall_s > 0 and peer.build_s > 0


def _random_ring():
    t = fattree(4)
    return build("ring", t, list(np.random.default_rng(0).permutation(t.servers)), 1e6, order="given")


CONTENDED = {
    "ps on a star": lambda: ps_allreduce(star(8), star(8).servers, 1e6, 2, ps="s0"),
    "random-order ring on fattree(4)": _random_ring,
    "dbtree on fattree(4)": lambda: build("dbtree", fattree(4), None, 16e6),
}


@needs_simgrid
@pytest.mark.parametrize("case", list(CONTENDED))
def test_under_contention_simgrid_agrees_with_the_flow_model(case):
    s = CONTENDED[case]()
    assert validate(s).ok
    flow = simulate_flow(s)
    assert flow.notes["method"] == "events"
    assert fluid_peer.simulate_simgrid(s).time_s == pytest.approx(flow.time_s, rel=REL)


def _two_paths_between_one_pair():
    """A two-rank AllReduce on fattree(4) whose first step sends two chunks s0 -> s15 at once,
    over two cores: SimGrid has one route per pair of hosts, so the second path needs its own."""
    t = fattree(4)
    b = ScheduleBuilder(t, ["s0", "s15"], 4e6, 4, "custom")
    by_c0 = ("s0", "e0_0", "a0_0", "c0", "a3_0", "e3_1", "s15")
    by_c2 = ("s0", "e0_0", "a0_1", "c2", "a3_1", "e3_1", "s15")
    b.add(0, 0, "s0", "s15", "reduce", by_c0)
    b.add(0, 1, "s0", "s15", "reduce", by_c2)
    b.add(0, 2, "s15", "s0", "reduce")
    b.add(0, 3, "s15", "s0", "reduce")
    for chunk in (0, 1):
        b.add(1, chunk, "s15", "s0", "copy")
    for chunk in (2, 3):
        b.add(1, chunk, "s0", "s15", "copy")
    return b.build()


@needs_simgrid
def test_a_second_path_between_one_pair_gets_its_own_route():
    s = _two_paths_between_one_pair()
    assert validate(s).ok
    routes = fluid_peer._job(s, 5e-6)["routes"]
    assert len({(src, dst) for src, dst, _ in routes}) == len(routes)  # one route per host pair
    assert any(src.startswith("p") for src, _, _ in routes)  # a stand-in source
    assert fluid_peer.simulate_simgrid(s).time_s == pytest.approx(simulate_flow(s).time_s, rel=REL)


def test_without_simgrid_the_error_says_how_to_install_it(monkeypatch):
    s = ring_allreduce(ring(3), ring(3).servers)
    monkeypatch.setattr(fluid_peer, "available", lambda: False)
    with pytest.raises(ArschedError, match="apt-get install python3-simgrid"):
        fluid_peer.simulate_simgrid(s)
