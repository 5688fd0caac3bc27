"""Shortest-path trees placed level by level (`packing.levels`), tree packing's AllGather and
ReduceScatter without a pipeline: valid in both validators on one-way, asymmetric and two-way
networks; within the steps' overhead of the bound on a one-way torus, where the pipelined trees
pay their fill; placed the same on every build; refused above the placement limit, where tree
packing keeps its pipeline."""

from __future__ import annotations

import numpy as np
import pytest

import arsched.algorithms.packing.levels as levels
from arsched.algorithms import NotApplicable, build
from arsched.algorithms.packing.levels import level_schedule
from arsched.collective import numeric_check, validate
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

SPECS = [
    "torus:dims=3x3,oneway=1",
    "ring:n=6,oneway=1",
    "ring:n=6,bandwidth=400Gbps,reverse=100Gbps",
    "torus:dims=3x3,bandwidth=100Gbps/200Gbps,reverse=25Gbps/50Gbps",
    "torus:dims=3x4",
    "dcell:n=2,k=1",
]
COLLECTIVES = ["allgather", "reduce_scatter"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("collective", COLLECTIVES)
def test_valid_in_both_validators(spec, collective):
    t = parse_spec(spec)
    s = level_schedule(collective, t, t.servers, 16e6)
    assert s.collective == collective and validate(s).ok and numeric_check(s).ok
    assert simulate_flow(s).gap >= 1 - 1e-9
    # every rank receives every other shard's chunks once, in a step set by its distance
    assert len(s) == s.num_chunks * (len(t.servers) - 1)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_one_way_torus_within_the_steps_overhead(collective):
    # a one-way 3x4 torus has shortest-path trees whose levels load every link alike
    t = parse_spec("torus:dims=3x4,oneway=1")
    chosen = build("tree-packing", t, None, 256e6, collective)
    assert chosen.meta["trees"] == "shortest paths"
    assert simulate_flow(chosen).gap < 1.01
    pipelined = build("tree-packing", t, None, 256e6, collective, levels=False)
    assert simulate_flow(pipelined).gap > 1.02


def test_the_same_placement_on_every_build():
    t = parse_spec("torus:dims=3x3,oneway=1")
    a, b = (level_schedule("allgather", t, t.servers, 16e6) for _ in range(2))
    assert (
        np.array_equal(a.src, b.src) and np.array_equal(a.step, b.step) and np.array_equal(a.chunk, b.chunk)
    )


def test_refused_above_the_placement_limit(monkeypatch):
    t = parse_spec("torus:dims=3x3,oneway=1")
    monkeypatch.setattr(levels, "MAX_PLACEMENTS", 10)
    with pytest.raises(NotApplicable, match="rank placements"):
        level_schedule("allgather", t, t.servers, 16e6)
    s = build("tree-packing", t, None, 256e6, "allgather")  # the pipeline instead
    assert "units" in s.meta["params"] and validate(s).ok
    with pytest.raises(NotApplicable, match="no schedule without a pipeline"):
        build("tree-packing", t, None, 256e6, "allgather", levels=True)
