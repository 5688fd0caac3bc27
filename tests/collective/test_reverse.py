"""The time reversal of a schedule: a valid schedule of the dual collective, the same bytes on
every link's reverse, its own inverse; refused where it cannot exist."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.algorithms import build
from arsched.algorithms.packing.collectives import forest_schedule
from arsched.collective import numeric_check, validate
from arsched.collective.reverse import DUAL, reverse
from arsched.errors import ArschedError
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

NETWORKS = [
    "torus:dims=3x4",
    "hgx:boxes=2,gpus_per_box=4",
    "bcube:n=3,k=1",
    "jellyfish:switches=8,ports=5,net_ports=3,seed=11",
    "leafspine:leaves=3,spines=2,servers_per_leaf=2,bandwidth=100Gbps/400Gbps",
]
BUILT = [("tree-packing", c) for c in DUAL] + [("ring", "allgather"), ("ring", "reduce_scatter")]


def _reverse_links(topology) -> np.ndarray:
    c = topology.compiled
    return np.array([c.link_index(int(d), int(s)) for s, d in zip(c.link_src, c.link_dst, strict=True)])


@pytest.mark.parametrize("spec", NETWORKS)
@pytest.mark.parametrize(("algorithm", "collective"), BUILT)
def test_reversal_is_the_dual_collective_with_mirrored_link_bytes(spec, algorithm, collective):
    topo = parse_spec(spec)
    root = topo.servers[-1] if collective in ("broadcast", "reduce") else None
    s = build(algorithm, topo, None, 4e6, collective, root)
    r = reverse(s)
    assert (r.collective, r.root, r.meta["reversed"]) == (DUAL[collective], s.root, collective)
    assert validate(r).ok, validate(r).message
    assert numeric_check(r).ok
    back = _reverse_links(topo)
    assert (back >= 0).all()
    forward, backward = simulate_flow(s, 0.0), simulate_flow(r, 0.0)
    assert np.array_equal(backward.link_bytes[back], forward.link_bytes)
    twice = reverse(r)
    for column in ("step", "chunk", "src", "dst", "op"):
        assert np.array_equal(getattr(twice, column), getattr(s, column))
    assert twice.paths == s.paths and twice.collective == collective


def test_what_cannot_be_reversed_is_refused_in_one_sentence():
    s = build("ring", parse_spec("torus:dims=3x3"), None, 1e6)
    with pytest.raises(ArschedError, match="AllReduce schedules cannot be reversed"):
        reverse(s)
    oneway = parse_spec("torus:dims=3x3,oneway=1")
    with pytest.raises(ArschedError, match="no link back"):
        reverse(build("ring", oneway, None, 1e6, "allgather"))


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize("spec", ["hgx:boxes=2", "torus:dims=4x4"])
def test_rooted_tree_packing_keeps_the_faster_of_its_trees_and_the_reversed_dual(spec, collective):
    """Two A100 boxes: the reversed Broadcast is the faster Reduce; the 4x4 torus: the reversed
    Reduce the faster Broadcast. Either way the kept one is the faster of the two, and valid."""
    topo = parse_spec(spec)
    root, alpha, size = topo.servers[0], 5e-6, 64e6
    args = (topo, None, size, None, None, alpha, 200, root)
    own = forest_schedule(collective, *args, dual=False)
    other = reverse(forest_schedule(DUAL[collective], *args, dual=False))
    kept = build("tree-packing", topo, None, size, collective, root)
    assert validate(kept).ok
    times = [simulate_flow(x, alpha).time_s for x in (own, other)]
    assert simulate_flow(kept, alpha).time_s == min(times)
    assert ("reversed" in kept.meta) == (times[1] < times[0])
