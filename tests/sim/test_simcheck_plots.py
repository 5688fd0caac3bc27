"""viz.plots for simulations: plot_simulation writes a PNG (atomically, nothing else left); the
utilisation grid lists the busiest links first, stays within [0, 1] and integrates back to
every link's bytes up to the binning error."""

from __future__ import annotations

import numpy as np
import pytest
from simcheck_reference import PNG_MAGIC, transfer_links

from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import ring
from arsched.viz.plots import plot_simulation, utilisation_grid
from schedules import ps_allreduce, recursive_doubling_allreduce, ring_allreduce, topo

SCHEDULES = {
    "ring-ring": lambda: ring_allreduce(ring(4, 1e9, 1e-6), ring(4).servers, 4e6),
    "ps-star": lambda: ps_allreduce(topo("star:n=5"), topo("star:n=5").servers, 1e7, num_chunks=2),
    "ring-fattree": lambda: ring_allreduce(topo("fattree:k=4"), ("s0", "s9", "s4", "s15", "s2", "s12")),
    "rd-bcube": lambda: recursive_doubling_allreduce(topo("bcube:n=2,k=2"), topo("bcube:n=2,k=2").servers),
}
MODELS = {"flow": lambda s: simulate_flow(s), "rounds": lambda s: simulate_rounds(s, 1e-6)}
CASES = [(s, m) for s in SCHEDULES for m in MODELS]


@pytest.mark.parametrize(("case", "model"), [("ring-fattree", "flow"), ("ps-star", "rounds")])
def test_plot_simulation_writes_a_png(tmp_path, case, model):
    r = MODELS[model](SCHEDULES[case]())
    path = tmp_path / "sim.png"
    plot_simulation(r, path)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert [p.name for p in tmp_path.iterdir()] == ["sim.png"]


@pytest.mark.parametrize(("case", "model"), CASES)
def test_grid_rows_are_the_busiest_links(case, model):
    r = MODELS[model](SCHEDULES[case]())
    links, util = utilisation_grid(r, bins=50)
    num = len(r.schedule.topology.links)
    assert util.shape == (len(links), 50) and len(links) == min(num, 200)
    assert sorted(links.tolist()) == list(range(num))  # small topologies: every link, once
    assert (np.diff(r.link_bytes[links]) <= 0).all()  # busiest first
    idle = r.link_bytes[links] == 0
    assert (util[idle] == 0).all()
    assert (util >= 0).all() and np.isfinite(util).all()


@pytest.mark.parametrize(("case", "model"), CASES)
@pytest.mark.parametrize("bins", [37, 200, 3000])
def test_grid_integrates_to_the_link_bytes(case, model, bins):
    """Each transfer's chunk is spread over [start, end]; whole bins are counted, so a transfer
    adds at most two bin widths of its rate too much (a partial bin at each end)."""
    r = MODELS[model](SCHEDULES[case]())
    s = r.schedule
    links, util = utilisation_grid(r, bins=bins)
    width = r.time_s / bins
    cap = np.array([lk.bandwidth for lk in s.topology.links])
    implied = (util * cap[links][:, None] * width).sum(axis=1)
    slack = np.zeros(len(cap))
    for t, path in enumerate(transfer_links(s)):
        for lk in path:
            slack[lk] += 2 * width * s.chunk_bytes / (r.end[t] - r.start[t])
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
    r = MODELS[model](SCHEDULES[case]())
    s = r.schedule
    links, util = utilisation_grid(r, bins=bins)
    width = r.time_s / bins
    cap = np.array([lk.bandwidth for lk in s.topology.links])
    per_bin = util * cap[links][:, None] * width
    assert per_bin.sum(axis=1) == pytest.approx(r.link_bytes[links], rel=1e-9, abs=1e-9 * s.chunk_bytes)
    expect = np.zeros((len(cap), bins))
    lo = np.arange(bins) * width
    lat = np.array([lk.latency for lk in s.topology.links])
    for t, path in enumerate(transfer_links(s)):
        a, b = r.start[t] + r.alpha, r.end[t] - lat[path].sum()
        overlap = np.clip(np.minimum(lo + width, b) - np.maximum(lo, a), 0, None)
        for lk in path:
            expect[lk] += s.chunk_bytes * overlap / (b - a)
    assert per_bin == pytest.approx(expect[links], rel=1e-6, abs=1e-9 * s.chunk_bytes)


CONTENDED_FLOW = ("ring-fattree", "flow")  # max-min rates change while its flows overlap


@pytest.mark.parametrize(("case", "model"), [c for c in CASES if c != CONTENDED_FLOW])
def test_grid_stays_within_capacity(case, model):
    r = MODELS[model](SCHEDULES[case]())
    _, util = utilisation_grid(r)
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
def test_grid_never_exceeds_capacity(model):
    """Regression: back-to-back transfers on one link both counted fully in the bin where one
    ends and the next starts (utilisation 2.0 on a ring)."""
    t = ring(4, 1e9, 0.0)
    r = MODELS[model](ring_allreduce(t, t.servers, 4e6))
    _, util = utilisation_grid(r)
    assert util.max() <= 1 + 1e-6
