"""Every algorithm that applies builds, on 2-box and 4-box GPU fabrics, a schedule the validator
accepts and that the flow simulator finds no faster than the bound; small boxes keep it fast (the
MI250 pair, 32 ranks, is validated without simulating)."""

from __future__ import annotations

import pytest

from arsched.algorithms import NotApplicable, algorithms, build
from arsched.bounds import allreduce_bound
from arsched.collective import validate
from arsched.sim import simulate_flow
from arsched.topology import parse_spec

NAMES = [a.name for a in algorithms() if a.name != "hrl"]  # hrl (a few seconds each): below
FABRICS = [
    "hgx:boxes=2,gpus_per_box=4",  # rail: one leaf per rail, 2 spines
    "hgx:boxes=2,gpus_per_box=4,gen=h100,leaves=2,spines=0",  # ForestColl's two switches, rail-only
    "hgx:boxes=4,gpus_per_box=2,su=2,oversub=2",  # two units above oversubscribed spines
    "hgx:boxes=4,gpus_per_box=2,fabric=clos,planes=2",  # dual ToR, dual plane
]
MI250 = "mi250:boxes=2,rails=8"  # xGMI mesh, NICs shared by the two GCDs of a module


def check(name: str, spec: str, nbytes: float, simulate: bool = True) -> bool:
    """Build `name` on `spec`; validate (and simulate) it. False where it does not apply."""
    topo = parse_spec(spec)
    try:
        schedule = build(name, topo, None, nbytes)
    except NotApplicable:
        return False
    report = validate(schedule)
    assert report.ok, f"{name} on {spec}: {report.message}"
    assert schedule.ranks == topo.servers
    if not simulate:
        return True
    time_s = simulate_flow(schedule, alpha=0.0).time_s
    assert time_s >= allreduce_bound(topo, nbytes=nbytes) * (1 - 1e-9)
    return True


@pytest.mark.parametrize("spec", [*FABRICS, MI250])
def test_every_algorithm_gives_a_valid_schedule(spec):
    applied = [name for name in NAMES if check(name, spec, 1e6, simulate=spec != MI250)]
    assert {"ring", "dbtree", "rhd", "tree-packing", "greedy-trees"} <= set(applied)
    assert not {"bcube-native", "torus-native"} & set(applied)


@pytest.mark.skipif("hrl" not in {a.name for a in algorithms()}, reason="the rl extra is not installed")
def test_hrl_gives_a_valid_schedule():
    assert check("hrl", "hgx:boxes=2,gpus_per_box=2", 1e6)
