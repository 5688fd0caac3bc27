"""Task expansion and the algorithm task: ids are stable, seeds multiply only random runs, and a
task's row is what building, validating and simulating the schedule by hand gives."""

from __future__ import annotations

import json

import yaml
from expconfigs import SMALL

from arsched.algorithms import build
from arsched.collective import ScheduleBuilder, validate
from arsched.experiments import expand, parse_config
from arsched.experiments.tasks import execute
from arsched.sim import simulate_flow, simulate_rounds
from arsched.topology import parse_spec


def _tasks(text: str = SMALL):
    return expand(parse_config(yaml.safe_load(text)))


def test_grid_size_and_seeds():
    tasks = _tasks()
    # ring:n=4 is deterministic: 3 algorithms x 2 sizes x 2 models once; the jellyfish spec has
    # no seed, so each of the 2 seeds is its own network: 3 x 2 x 2 x 2
    assert len(tasks) == 12 + 24
    specs = {dict(t.params)["topology"] for t in tasks}
    assert specs == {
        "ring:n=4",
        "jellyfish:switches=4,ports=3,net_ports=2,seed=1",
        "jellyfish:switches=4,ports=3,net_ports=2,seed=2",
    }
    ring_seeds = {dict(t.params)["seed"] for t in tasks if dict(t.params)["spec"] == "ring:n=4"}
    assert ring_seeds == {""}


def test_random_algorithms_get_the_seed():
    text = SMALL.replace("[ps, ring, {name: rhd, label: halving-doubling}]", "[tree-packing]")
    text = text.replace(
        '"jellyfish:switches=4,ports=3,net_ports=2"', '"jellyfish:switches=4,ports=3,net_ports=2,seed=5"'
    )
    tasks = _tasks(text)
    assert len(tasks) == 2 * 2 * 2 * 2  # 2 topologies (fixed) x 2 seeds of tree packing x sizes x models
    assert {json.loads(dict(t.params)["params"])["seed"] for t in tasks} == {1, 2}


def test_ids_are_stable_and_distinct():
    first, again = _tasks(), _tasks()
    assert [t.id for t in first] == [t.id for t in again]
    assert len({t.id for t in first}) == len(first)
    moved = _tasks(SMALL.replace("sizes: [1MB, 64MB]", "sizes: [64MB, 1MB, 64MB]"))
    assert {t.id for t in moved} == {t.id for t in first}  # order and repeats do not matter


def test_row_matches_a_hand_run():
    for task in _tasks():
        p = dict(task.params)
        if p["spec"] != "ring:n=4" or p["size"] != "64MB":
            continue
        _, row, error = execute(task)
        assert error is None
        topo = parse_spec(p["topology"])
        schedule = build(p["algorithm"], topo, None, 64e6)
        assert validate(schedule).ok
        sim = simulate_flow(schedule) if p["model"] == "flow" else simulate_rounds(schedule)
        assert row["time_s"] == sim.time_s and row["bound_s"] == sim.bound_s
        assert row["gap"] == sim.time_s / sim.bound_s
        assert row["transfers"] == len(schedule) and row["ranks"] == 4
        if p["model"] == "rounds":
            assert row["rounds"] == sim.rounds
            assert abs(row["bound_rounds"] - sim.rounds * sim.bound_s / sim.time_s) < 1e-12


def test_an_invalid_schedule_fails_the_task(temporary_algorithm):
    def broken(topology, ranks, nbytes):
        b = ScheduleBuilder(topology, topology.servers, nbytes, num_chunks=1, algorithm="broken")
        b.add(step=0, chunk=0, src=topology.servers[0], dst=topology.servers[1], op="reduce")
        return b.build()

    temporary_algorithm("broken", broken)
    tasks = _tasks(SMALL.replace("[ps, ring, {name: rhd, label: halving-doubling}]", "[broken]"))
    _, row, error = execute(tasks[0])
    assert row is None
    assert error.startswith("RuntimeError: broken built an invalid schedule")


def test_not_applicable_is_a_row_with_a_note():
    tasks = _tasks(SMALL.replace("[ps, ring, {name: rhd, label: halving-doubling}]", "[bcube-native]"))
    _, row, error = execute(tasks[0])
    assert error is None and row["note"] and row["time_s"] != row["time_s"]  # nan
