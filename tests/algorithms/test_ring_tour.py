"""`common.ring_order` (the single ring's order, and the chains of greedy-trees and hrl) and its
2-opt: one hop per link where the network allows it, on families and sizes drawn from seeds."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build, common
from arsched.algorithms.routes import route
from arsched.collective import validate
from arsched.sim import DEFAULT_ALPHA, simulate_flow
from arsched.topology import parse_spec


def busiest_link(spec: str, order: tuple[str, ...]) -> int:
    """How many of the ring's hops the most loaded directed link carries."""
    t = parse_spec(spec)
    rs = tuple(t.servers)
    o = np.array([rs.index(r) for r in order])
    return int(np.bincount(route(t, rs, o, np.roll(o, -1), spread=False).links).max())


def cycle_length(dist: np.ndarray, tour: np.ndarray) -> float:
    return float(dist[tour, np.roll(tour, -1)].sum())


@pytest.mark.parametrize("seed", range(6))
def test_two_opt_shortens_and_permutes(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 40))
    pts = rng.random((n, 2))
    dist = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    tour = rng.permutation(n)
    out = common.two_opt(dist, tour, 10_000)
    assert sorted(out) == list(range(n))
    assert cycle_length(dist, out) <= cycle_length(dist, tour) + 1e-12
    i, j = np.triu_indices(n, 2)  # a 2-opt optimum: no reversal shortens it
    a, b, c, d = out[i], out[(i + 1) % n], out[j], out[(j + 1) % n]
    assert (dist[a, b] + dist[c, d] - dist[a, c] - dist[b, d]).max() <= 1e-9


def test_two_opt_blocks_change_nothing(monkeypatch):
    """A pass scanned a few rows at a time makes the same moves as one scanned whole."""
    rng = np.random.default_rng(9)
    pts = rng.random((37, 2))
    dist = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    tour = rng.permutation(37)
    whole = common.two_opt(dist, tour, 10_000)
    monkeypatch.setattr(common, "TWO_OPT_BLOCK", 80)  # two rows a block
    assert np.array_equal(common.two_opt(dist, tour, 10_000), whole)


def test_two_opt_stops_after_its_passes():
    dist = np.abs(np.subtract.outer(np.arange(12.0), np.arange(12.0)))
    tour = np.array([0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11])
    one = common.two_opt(dist, tour, 1)
    assert cycle_length(dist, one) < cycle_length(dist, tour)
    assert cycle_length(dist, common.two_opt(dist, tour, 100)) < cycle_length(dist, one)


@pytest.mark.parametrize(
    "spec",
    [
        "dcell:n=3,k=1",
        "dcell:n=6,k=1",
        "dcell:n=2,k=2",
        "torus:dims=6x6",
        "mi250:boxes=2",
        *(f"jellyfish:switches=12,ports=5,net_ports=3,seed={s}" for s in (11, 12)),
        *(f"jellyfish:switches=40,ports=6,net_ports=3,seed={s}" for s in (11, 12)),
    ],
)
def test_ring_order_one_hop_per_link(spec):
    """On these networks a nearest-neighbour tour puts two hops on a link; 2-opt leaves one."""
    t = parse_spec(spec)
    assert busiest_link(spec, common.ring_order(t, tuple(t.servers))) == 1


def test_ring_on_dcell_near_its_single_ring_floor():
    """The ring AllReduce over that order: every hop on its own link, so about 2× the bound
    (a ring uses one of a DCell server's two links each way)."""
    t = parse_spec("dcell:n=6,k=1")
    s = build("ring", t, nbytes=256e6)
    assert validate(s).ok
    r = simulate_flow(s, DEFAULT_ALPHA)
    assert r.time_s / r.bound_s < 2.1
