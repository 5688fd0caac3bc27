"""The public API of `import arsched`: light to import, every name resolves, the pipeline runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

import arsched as ar


def test_import_arsched_loads_nothing_heavy():
    code = "import sys, arsched; print(' '.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    heavy = {"highspy", "torch", "scipy", "matplotlib", "networkx", "arsched.topology", "arsched.sim"}
    assert not loaded & heavy


def test_every_public_name_resolves_to_the_documented_object():
    from arsched import algorithms, bounds, cluster, collective, sim, topology

    for name in ar.__all__:
        assert getattr(ar, name) is not None, name
    assert set(dir(ar)) == set(ar.__all__)
    assert ar.build is algorithms.build and ar.algorithms is algorithms
    assert ar.bound is bounds.lower_bound and ar.allreduce_bound is bounds.allreduce_bound
    assert ar.validate is collective.validate and ar.load is collective.load and ar.save is collective.save
    assert ar.simulate_flow is sim.simulate_flow and ar.simulate_rounds is sim.simulate_rounds
    assert ar.simulate_cluster is cluster.simulate
    assert ar.Topology is topology.Topology and ar.parse_spec is topology.parse_spec
    assert ar.topology is topology and ar.cluster is cluster


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'simulate'"):
        ar.simulate  # noqa: B018


def test_the_pipeline_through_the_public_names(tmp_path):
    """Build, prove, time and save on a seeded Jellyfish (no constant here was tuned on it)."""
    topo = ar.parse_spec("jellyfish:switches=10,ports=4,net_ports=3,seed=7")
    nbytes = 64e6
    for name in ("ring", "dbtree", "tree-packing"):
        schedule = ar.build(name, topo, nbytes=nbytes)
        assert ar.validate(schedule).ok and ar.numeric_check(schedule).ok, name
        flow, rounds = ar.simulate_flow(schedule), ar.simulate_rounds(schedule)
        lower = ar.bound(topo, nbytes=nbytes, alpha=5e-6)
        assert flow.time_s >= lower * (1 - 1e-9) and flow.gap >= 1 - 1e-9, name
        assert rounds.rounds >= 1
        path = tmp_path / f"{name}.json"
        ar.save(schedule, path)
        assert ar.collective.dumps(ar.load(path)) == ar.collective.dumps(schedule)
    with pytest.raises(ar.NotApplicable):
        ar.build("torus-native", topo, nbytes=nbytes)
    with pytest.raises(ar.ArschedError):
        ar.build("no-such-algorithm", topo)
