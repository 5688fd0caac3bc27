"""Simulation plots (viz.plots): plot_simulation writes a PNG atomically; utilisation_grid picks
the busiest links, stays non-negative, and the bytes it implies match each link's bytes up to
its binning; utilisation never exceeds 1."""

from __future__ import annotations

import numpy as np
import pytest
from simref import link_lists, ps_allreduce, ring_allreduce, topo

from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import ring
from arsched.viz.plots import MAX_LINKS, TIME_BINS, plot_simulation, utilisation_grid

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def cases():
    fat = topo("fattree:k=4")
    rng = np.random.default_rng(4)
    ranks = tuple(str(x) for x in rng.permutation(np.array(fat.servers)))
    r6 = topo("ring:n=6")
    st6 = topo("star:n=6")
    return {
        "ring-ring": ring_allreduce(r6, r6.servers, 1e6),
        "ps-star": ps_allreduce(st6, st6.servers, 2e6, num_chunks=2),
        "ring-fattree-shuffled": ring_allreduce(fat, ranks, 8e6),
    }


CASES = cases()


def simulate(name: str, model: str):
    s = CASES[name]
    return simulate_flow(s) if model == "flow" else simulate_rounds(s, 1e-6)


@pytest.mark.parametrize(
    ("name", "model"), [("ring-ring", "rounds"), ("ps-star", "flow"), ("ring-fattree-shuffled", "flow")]
)
def test_plot_simulation_writes_a_png(tmp_path, name, model):
    res = simulate(name, model)
    path = tmp_path / "sim.png"
    plot_simulation(res, path)
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert [p.name for p in tmp_path.iterdir()] == ["sim.png"]  # no temporary file left


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_utilisation_grid_shape_order_and_bytes(name, model):
    res = simulate(name, model)
    s = res.schedule
    links, util = utilisation_grid(res)
    num = len(s.topology.links)
    assert util.shape == (min(num, MAX_LINKS), TIME_BINS)
    assert len(set(links.tolist())) == len(links)
    assert (np.diff(res.link_bytes[links]) <= 0).all()  # busiest first
    assert (util >= 0).all() and np.isfinite(util).all()
    # each transfer spreads chunk_bytes evenly over [start, end]; the grid counts it in every
    # bin it touches, so per link the implied bytes lie between the link's bytes and that plus
    # two bins' worth of each transfer's spread rate (first and last bin)
    cap = np.array([lk.bandwidth for lk in s.topology.links])
    index = {(lk.src, lk.dst): i for i, lk in enumerate(s.topology.links)}
    rate_sum = np.zeros(num)  # per link, the sum of the spread rates of its transfers
    for t, ls in enumerate(link_lists(s)):
        for lk in ls:
            rate_sum[index[lk]] += s.chunk_bytes / (res.end[t] - res.start[t])
    lb = res.link_bytes[links]
    for bins in (TIME_BINS, 5000):
        width = res.time_s / bins
        grid_links, grid = utilisation_grid(res, bins=bins)
        assert np.array_equal(grid_links, links)
        implied = (grid * cap[links][:, None] * width).sum(axis=1)
        assert (implied >= lb * (1 - 1e-9)).all()
        assert (implied <= (lb + 2 * width * rate_sum[links]) * (1 + 1e-9)).all()
        assert (implied[lb == 0] == 0).all()
    # the busiest link's picture is within a few per cent of its bytes at fine bins
    assert implied[0] == pytest.approx(lb[0], rel=0.05)


@pytest.mark.parametrize("model", ["flow", "rounds"])
def test_utilisation_grid_never_exceeds_one(model):
    # a ring on a ring graph with no latency or overhead: every forward link carries one chunk
    # at a time at full bandwidth, back to back, so its true utilisation is exactly 1 throughout
    n = 5
    t = ring(n, 1e9, 0.0)
    s = ring_allreduce(t, t.servers, 1e7)
    res = simulate_flow(s, 0.0) if model == "flow" else simulate_rounds(s, 0.0)
    _, util = utilisation_grid(res)
    assert (util >= 0).all()
    assert util.max() <= 1 + 1e-6, f"utilisation {util.max():.3f} in {(util > 1 + 1e-6).sum()} cells"


def test_busy_ring_links_show_full_utilisation_inside_transfers():
    """Away from the bin boundaries the picture is right: a saturated link reads 1."""
    n = 5
    t = ring(n, 1e9, 0.0)
    s = ring_allreduce(t, t.servers, 1e7)
    res = simulate_flow(s, 0.0)
    links, util = utilisation_grid(res)
    forward = np.array([int(t.links[i].dst[1:]) == (int(t.links[i].src[1:]) + 1) % n for i in links])
    assert forward[:n].all()  # the busiest links are the forward ones
    # each forward link runs 2(N-1) transfers of T/(2(N-1)) each; bins strictly inside one read 1
    per = res.time_s / (2 * (n - 1))
    width = res.time_s / TIME_BINS
    centers = (np.arange(TIME_BINS) + 0.5) * width
    inside = np.abs(centers / per - np.round(centers / per)) * per > width
    np.testing.assert_allclose(util[:n][:, inside], 1.0, rtol=1e-9)
    np.testing.assert_allclose(util[n:], 0.0)


def test_grid_keeps_only_the_busiest_links(monkeypatch):
    import arsched.viz.plots as plots

    res = simulate("ring-fattree-shuffled", "flow")
    monkeypatch.setattr(plots, "MAX_LINKS", 3)
    links, util = plots.utilisation_grid(res, bins=10)
    assert util.shape == (3, 10)
    top3 = np.sort(res.link_bytes)[::-1][:3]
    np.testing.assert_array_equal(res.link_bytes[links], top3)


def test_timeline_is_sampled_above_max_bars(monkeypatch, tmp_path):
    import arsched.viz.plots as plots

    monkeypatch.setattr(plots, "MAX_BARS", 10)
    res = simulate("ring-fattree-shuffled", "rounds")
    plots.plot_simulation(res, tmp_path / "sampled.png")
    assert (tmp_path / "sampled.png").read_bytes()[:8] == PNG_MAGIC
