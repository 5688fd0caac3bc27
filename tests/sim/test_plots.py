"""Simulation plots (viz.plots): plot_simulation writes a PNG atomically (also when the timeline
is sampled); utilisation_grid lists the busiest links first (at most MAX_LINKS), stays within
[0, 1], integrates back to every link's bytes up to the binning error, and holds exactly the
overlap of each transfer's sending interval with each bin."""

from __future__ import annotations

import numpy as np
import pytest
from simref import link_numbers

import arsched.viz.plots as plots
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import ring
from arsched.viz.plots import MAX_LINKS, TIME_BINS, plot_simulation, utilisation_grid
from clihelp import PNG_MAGIC
from schedules import ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

SCHEDULES = {
    "ring-ring": lambda: ring_allreduce(ring(4, 1e9, 1e-6), ring(4).servers, 4e6),
    "ps-star": lambda: ps_allreduce(topo("star:n=5"), topo("star:n=5").servers, 1e7, num_chunks=2),
    "ring-fattree": lambda: ring_allreduce(topo("fattree:k=4"), ("s0", "s9", "s4", "s15", "s2", "s12")),
    "rd-bcube": lambda: recursive_doubling_allreduce(topo("bcube:n=2,k=2"), topo("bcube:n=2,k=2").servers),
}
MODELS = {"flow": lambda s: simulate_flow(s), "rounds": lambda s: simulate_rounds(s, 1e-6)}
CASES = [(s, m) for s in SCHEDULES for m in MODELS]
CONTENDED_FLOW = ("ring-fattree", "flow")  # max-min rates change while its flows overlap


def result(case: str, model: str):
    return MODELS[model](SCHEDULES[case]())


@pytest.mark.parametrize(("case", "model"), [("ring-fattree", "flow"), ("ps-star", "rounds")])
def test_plot_simulation_writes_a_png(tmp_path, case, model):
    path = tmp_path / "sim.png"
    plot_simulation(result(case, model), path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert [p.name for p in tmp_path.iterdir()] == ["sim.png"]  # no temporary file left


def test_timeline_is_sampled_above_max_bars(monkeypatch, tmp_path):
    monkeypatch.setattr(plots, "MAX_BARS", 10)
    plots.plot_simulation(result("ring-fattree", "rounds"), tmp_path / "sampled.png")
    assert (tmp_path / "sampled.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(("case", "model"), CASES)
def test_grid_rows_are_the_busiest_links(case, model):
    r = result(case, model)
    num = len(r.schedule.topology.links)
    links, util = utilisation_grid(r)
    assert util.shape == (min(num, MAX_LINKS), TIME_BINS)
    links, util = utilisation_grid(r, bins=50)
    assert util.shape == (len(links), 50) and len(links) == min(num, MAX_LINKS)
    assert sorted(links.tolist()) == list(range(num))  # small topologies: every link, once
    assert (np.diff(r.link_bytes[links]) <= 0).all()  # busiest first
    idle = r.link_bytes[links] == 0
    assert (util[idle] == 0).all()
    assert (util >= 0).all() and np.isfinite(util).all()


def test_grid_keeps_only_the_busiest_links(monkeypatch):
    r = result("ring-fattree", "flow")
    monkeypatch.setattr(plots, "MAX_LINKS", 3)
    links, util = plots.utilisation_grid(r, bins=10)
    assert util.shape == (3, 10)
    np.testing.assert_array_equal(r.link_bytes[links], np.sort(r.link_bytes)[::-1][:3])


@pytest.mark.parametrize(("case", "model"), CASES)
@pytest.mark.parametrize("bins", [37, 200, 3000])
def test_grid_integrates_to_the_link_bytes(case, model, bins):
    """Each transfer's chunk is spread over [start, end]; whole bins are counted, so a transfer
    adds at most two bin widths of its rate too much (a partial bin at each end)."""
    r = result(case, model)
    s = r.schedule
    links, util = utilisation_grid(r, bins=bins)
    width = r.time_s / bins
    cap = np.array([lk.bandwidth for lk in s.topology.links])
    implied = (util * cap[links][:, None] * width).sum(axis=1)
    slack = np.zeros(len(cap))
    for t, path in enumerate(link_numbers(s)):
        slack[path] += 2 * width * s.chunk_bytes / (r.end[t] - r.start[t])
    true = r.link_bytes[links]
    assert (implied >= true * (1 - 1e-9)).all()
    assert (implied <= true + slack[links] * (1 + 1e-9)).all()
    if bins == 3000:
        assert implied == pytest.approx(true, rel=0.02)


@pytest.mark.parametrize(("case", "model"), CASES)
@pytest.mark.parametrize("bins", [7, 200])
def test_grid_bytes_are_exact_for_its_picture(case, model, bins):
    """The picture spreads every chunk evenly over its sending interval [start + α, end − path
    latency]: its bytes per bin add up to each link's bytes exactly, and a bin holds the overlap
    of every interval with the bin."""
    r = result(case, model)
    s = r.schedule
    links, util = utilisation_grid(r, bins=bins)
    width = r.time_s / bins
    cap = np.array([lk.bandwidth for lk in s.topology.links])
    per_bin = util * cap[links][:, None] * width
    assert per_bin.sum(axis=1) == pytest.approx(r.link_bytes[links], rel=1e-9, abs=1e-9 * s.chunk_bytes)
    expect = np.zeros((len(cap), bins))
    lo = np.arange(bins) * width
    lat = np.array([lk.latency for lk in s.topology.links])
    for t, path in enumerate(link_numbers(s)):
        a, b = r.start[t] + r.alpha, r.end[t] - lat[path].sum()
        overlap = np.clip(np.minimum(lo + width, b) - np.maximum(lo, a), 0, None)
        expect[path] += s.chunk_bytes * overlap / (b - a)
    assert per_bin == pytest.approx(expect[links], rel=1e-6, abs=1e-9 * s.chunk_bytes)


@pytest.mark.parametrize(("case", "model"), [c for c in CASES if c != CONTENDED_FLOW])
def test_grid_stays_within_capacity(case, model):
    _, util = utilisation_grid(result(case, model))
    assert util.max() <= 1 + 1e-6


@pytest.mark.parametrize("alpha", [0.0, 5e-6])
def test_grid_stays_within_capacity_under_contention(alpha):
    """With the event simulation's rate trace the picture is exact: never above a link's
    capacity, and its bytes add up to each link's bytes."""
    r = simulate_flow(SCHEDULES[CONTENDED_FLOW[0]](), alpha, trace=True)
    assert r.notes["method"] == "events"
    links, util = utilisation_grid(r)
    assert util.max() <= 1 + 1e-6
    width = r.time_s / util.shape[1]
    cap = np.array([lk.bandwidth for lk in r.schedule.topology.links])
    implied = (util * cap[links][:, None] * width).sum(axis=1)
    assert implied == pytest.approx(r.link_bytes[links], rel=1e-6, abs=1e-6 * r.schedule.chunk_bytes)


@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_saturated_ring_links_read_one_inside_transfers(model):
    """A ring on a ring graph with no latency or overhead: every forward link carries one chunk
    at a time at full bandwidth, back to back. Regression: both transfers were counted fully in
    the bin where one ends and the next starts (utilisation 2.0). Away from those boundaries a
    saturated link reads exactly 1, and the backward links 0."""
    n = 5
    t = ring(n, 1e9, 0.0)
    s = ring_allreduce(t, t.servers, 1e7)
    res = simulate_flow(s, 0.0) if model == "flow" else simulate_rounds(s, 0.0)
    links, util = utilisation_grid(res)
    assert (util >= 0).all()
    assert util.max() <= 1 + 1e-6, f"utilisation {util.max():.3f} in {(util > 1 + 1e-6).sum()} cells"
    forward = np.array([int(t.links[i].dst[1:]) == (int(t.links[i].src[1:]) + 1) % n for i in links])
    assert forward[:n].all()  # the busiest links are the forward ones
    # each forward link runs 2(N-1) transfers of T/(2(N-1)) each; bins strictly inside one read 1
    per = res.time_s / (2 * (n - 1))
    width = res.time_s / TIME_BINS
    centers = (np.arange(TIME_BINS) + 0.5) * width
    inside = np.abs(centers / per - np.round(centers / per)) * per > width
    np.testing.assert_allclose(util[:n][:, inside], 1.0, rtol=1e-9)
    np.testing.assert_allclose(util[n:], 0.0)
