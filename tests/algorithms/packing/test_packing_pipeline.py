"""Pipelined tree packing (arsched.algorithms.packing.pipeline): the time with barriers against
a hand count, the choice of pipeline, and the flow model with in-order connections."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.packing.lp import Packing
from arsched.algorithms.packing.pipeline import UNITS, sends_time
from arsched.algorithms.routes import route
from arsched.algorithms.trees import tree_edges, tree_sends
from arsched.collective import validate
from arsched.sim import simulate_flow
from arsched.topology import parse_spec


def test_sends_time_of_a_path_matches_the_hand_count():
    """A path 0-1-2 hung from 1: the leaves add into 1 at step 0, 1 copies back at step 2.
    One chunk: two busy steps of M/B; two stages: four busy steps of M/(2B)."""
    topo = parse_spec("ring:n=3")
    bw, m, over = float(topo.compiled.capacity[0]), 3e6, 7e-6
    parent = np.array([1, -1, 1])
    p = Packing(bw, bw, bw, [np.array([0, 2])], [parent], np.array([1]), np.array([bw]), 1)
    routes = route(topo, tuple(topo.servers), *tree_edges(p.parents))
    cap = topo.compiled.capacity
    sends = [tree_sends(parent) for parent in p.parents]
    assert sends_time(sends, p.weights, routes, cap, 1, 1, m, over) == pytest.approx(2 * m / bw + 2 * over)
    two = sends_time(sends, p.weights, routes, cap, 1, 2, m, over)
    assert two == pytest.approx(4 * m / (2 * bw) + 4 * over)


@pytest.mark.parametrize("spec", ["fattree:k=4", "bcube:n=3,k=1"])
def test_tree_packing_pipelines_only_where_it_pays(spec):
    """Without balanced steps, the default picks between the pipeline and one unpipelined step per
    level: on a fat-tree (stars, every step loads the links alike) the unpipelined schedule, on
    BCube (deep trees) the pipeline; either way it is at least as fast as the other in the flow
    model."""
    topo = parse_spec(spec)
    chosen = build("tree-packing", topo, None, 64e6, levels=False)
    flat = chosen.meta["params"]["stages"] == 1
    assert flat == spec.startswith("fattree")
    other = build("tree-packing", topo, None, 64e6, units=UNITS, stages=None if flat else 1)
    for s in (chosen, other):
        assert validate(s).ok
    assert simulate_flow(chosen, fifo=True).time_s <= simulate_flow(other, fifo=True).time_s


def test_tree_packing_streams_close_to_the_bound_with_in_order_connections():
    topo = parse_spec("dcell:n=3,k=1")
    s = build("tree-packing", topo, None, 256e6, stages=24)
    assert validate(s).ok
    fifo, ring_ = simulate_flow(s, fifo=True), simulate_flow(build("ring", topo, None, 256e6), fifo=True)
    # a ring uses one of a DCell server's two links each way, the trees both
    assert fifo.gap < 1.1 and fifo.time_s < ring_.time_s / 1.8
