"""torus-native: rings used both ways, shares that load every dimension equally, pieces chosen
by simulation where the dimensions differ."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.dimension_ordered import PIECES, _copy_loads, _grid, shares
from arsched.collective import numeric_check, validate
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import torus


@pytest.mark.parametrize("dims", [(2,), (3,), (4,), (5,), (6,), (7,), (4, 4), (3, 3, 3), (6, 6)])
def test_a_ring_used_both_ways_takes_half_the_steps_and_loads_every_link_alike(dims):
    """Each dimension's reduce-scatter (and all-gather) takes ⌊r/2⌋ steps, not r − 1, and every
    directed link carries the same bytes: the two chains of a segment's half meet at its owner."""
    s = build("torus-native", torus(dims), None, 1e6)
    assert validate(s).ok and numeric_check(s).ok
    assert s.meta["params"]["pieces"] == 1  # alike dimensions: one piece
    assert len(np.unique(s.step)) == 2 * sum(r // 2 for r in dims)
    carried = simulate_flow(s).link_bytes
    assert carried.min() == pytest.approx(carried.max(), rel=1e-12)


@pytest.mark.parametrize(
    "topo",
    [
        lambda: torus((5, 3)),
        lambda: torus((3, 3, 2)),
        lambda: torus((4, 4), bandwidth=[12.5e9, 50e9]),
        lambda: torus((6, 4), bandwidth=[25e9, 10e9], reverse=[20e9, 10e9]),
    ],
)
def test_shares_load_the_busiest_dimension_least(topo):
    """The rounded split is within 1 % of the best split of a fine grid over the copies' shares
    (all splits of 200 units), and no worse than equal shares."""
    t = topo()
    radices = _grid(t, t.servers, "torus")
    dims = [d for d in range(len(radices)) if radices[d] > 1]
    orders = [[dims[(j + i) % len(dims)] for i in range(len(dims))] for j in range(len(dims))]
    loads = _copy_loads(t, t.servers, radices, orders)
    k = shares(loads)
    worst = (loads.T @ k).max() / k.sum()
    grid = 200
    splits = [
        np.array(c) for c in np.ndindex(*(grid + 1,) * (len(dims) - 1)) if sum(c) <= grid
    ]  # every split of `grid` units: the last copy gets the rest
    best = min((loads.T @ np.r_[c, grid - c.sum()]).max() / grid for c in splits)
    assert worst <= 1.01 * best
    assert worst <= (loads.T @ np.ones(len(dims))).max() / len(dims) * (1 + 1e-12)


@pytest.mark.parametrize("nbytes", [16e6, 256e6])
def test_the_default_pieces_and_channels_are_the_fastest_candidates(nbytes):
    """On uneven dimensions the default pieces are the fastest of `PIECES` on one channel in the
    flow model, and those pieces go on two channels where that is faster still."""
    t = torus((5, 3))
    chosen = build("torus-native", t, None, nbytes)
    assert validate(chosen).ok
    times = []
    for pieces in PIECES:
        s = build("torus-native", t, None, nbytes, pieces=pieces, channels=1)
        assert validate(s).ok and s.meta["params"]["pieces"] == pieces and s.channels == 1
        times.append(simulate_flow(s).time_s)
    best = PIECES[int(np.argmin(times))]
    assert chosen.meta["params"]["pieces"] == best
    two = simulate_flow(build("torus-native", t, None, nbytes, pieces=best, channels=2)).time_s
    assert chosen.channels == (2 if two < min(times) else 1)
    assert simulate_flow(chosen).time_s == pytest.approx(min(two, *times), rel=1e-12)


def test_given_chunks_and_pieces_are_kept_or_refused_in_one_sentence():
    t = torus((5, 3))
    s = build("torus-native", t, None, 1e6, chunks=2 * 15 * 6, pieces=3)
    assert validate(s).ok and s.num_chunks == 180 and s.meta["params"]["pieces"] == 3
    with pytest.raises(ArschedError, match="do not split into 4 pieces"):
        build("torus-native", t, None, 1e6, chunks=2 * 15 * 6, pieces=4)
    with pytest.raises(ArschedError, match="pieces must be an integer"):
        build("torus-native", t, None, 1e6, pieces=0)
    with pytest.raises(ArschedError, match="channels must be an integer from 1 to 32"):
        build("torus-native", t, None, 1e6, channels=40)
    with pytest.raises(ArschedError, match="multiple of 30"):
        build("torus-native", t, None, 1e6, chunks=31)
