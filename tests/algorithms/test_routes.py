"""Routes of rank pairs (arsched.algorithms.routes): default routes are the topology's paths,
spread routes are shortest paths too, and the pair lookups agree with each other."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms.routes import all_pairs, route
from arsched.topology import parse_spec


@pytest.mark.parametrize("spec", ["fattree:k=4", "dcell:n=2,k=1", "torus:dims=3x3"])
def test_routes_follow_the_topology(spec):
    topo = parse_spec(spec)
    ranks = tuple(topo.servers)
    n = len(ranks)
    default, spread = all_pairs(topo, ranks, spread=False), all_pairs(topo, ranks)
    c = topo.compiled
    for q in range(len(default.src)):
        a, b = ranks[default.src[q]], ranks[default.dst[q]]
        assert default.path(q, topo, ranks) == topo.path(a, b)
        assert (default.links_of(q) == c.path_links(topo.path(a, b))).all()
        p = spread.path(q, topo, ranks)
        assert p[0] == a and p[-1] == b and len(p) == len(topo.path(a, b))
    pos = default.positions(n)
    assert (pos[default.src, default.dst] == np.arange(len(default.src))).all()
    assert (np.diag(pos) == -1).all()
    assert (default.index(default.src, default.dst, n) == np.arange(len(default.src))).all()


def test_route_keeps_distinct_pairs_in_order():
    topo = parse_spec("ring:n=5")
    ranks = tuple(topo.servers)
    r = route(topo, ranks, np.array([3, 0, 3, 1]), np.array([4, 2, 4, 0]))
    assert list(zip(r.src.tolist(), r.dst.tolist(), strict=True)) == [(0, 2), (1, 0), (3, 4)]
    assert len(route(topo, ranks, np.zeros(0), np.zeros(0)).src) == 0
