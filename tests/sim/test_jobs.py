"""Several jobs on one network (`simulate_jobs`): closed forms where jobs share every link or
none, a job that starts after another ends, the same network loaded twice, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.collective import load, save
from arsched.errors import ArschedError
from arsched.sim import simulate_flow, simulate_jobs
from arsched.topology import fattree, star
from schedules import ring_allreduce


def test_one_job_alone_is_simulate_flow_whenever_it_starts():
    s = ring_allreduce(star(5), star(5).servers, 1e7, 10)
    for start in (0.0, 3e-3):
        r = simulate_jobs([s], [start])
        (job,) = r.jobs
        assert job.time_s == pytest.approx(simulate_flow(s).time_s, rel=1e-9)
        assert job.slowdown == pytest.approx(1.0, rel=1e-9)
        assert r.makespan_s == pytest.approx(start + job.time_s)


def test_two_identical_jobs_on_every_same_link_take_twice_as_long():
    """No α, no latency: the two rings' flows start and stop together and each gets half of
    every link, so each job takes exactly twice its time alone."""
    t = star(4, 1e9, 0.0)
    s = ring_allreduce(t, t.servers, 1e7, 8)
    r = simulate_jobs([s, s], alpha=0.0)
    for job in r.jobs:
        assert job.alone_s == pytest.approx(simulate_flow(s, 0.0).time_s)
        assert job.slowdown == pytest.approx(2.0, rel=1e-9)


def test_jobs_on_disjoint_links_or_times_do_not_interfere():
    t = fattree(4)  # two pods' first edge switches: rings that never leave them share nothing
    a = ring_allreduce(t, t.servers[:2], 1e7, 4)
    b = ring_allreduce(t, t.servers[4:6], 4e7, 8)
    r = simulate_jobs([a, b], [0.0, 1e-4], names=["a", "b"])
    assert [j.name for j in r.jobs] == ["a", "b"]
    assert [j.slowdown for j in r.jobs] == pytest.approx([1.0, 1.0], rel=1e-9)
    same = ring_allreduce(t, t.servers[:2], 4e7, 8)  # on a's links, but after a has finished
    later = simulate_jobs([a, same], [0.0, simulate_flow(a).time_s * 1.01])
    assert [j.slowdown for j in later.jobs] == pytest.approx([1.0, 1.0], rel=1e-9)
    overlapping = simulate_jobs([a, same], [0.0, 0.0])
    assert min(j.slowdown for j in overlapping.jobs) > 1.1


def test_the_same_network_loaded_twice_is_one_network(tmp_path):
    t = star(4)
    s = ring_allreduce(t, t.servers, 1e6, 4)
    save(s, tmp_path / "s.json")
    loaded = load(tmp_path / "s.json")
    assert loaded.topology is not s.topology
    r = simulate_jobs([s, loaded])
    np.testing.assert_allclose([j.time_s for j in r.jobs], [r.jobs[0].time_s] * 2, rtol=1e-12)


def test_bad_input_is_one_sentence():
    s = ring_allreduce(star(4), star(4).servers, 1e6, 4)
    other = ring_allreduce(star(5), star(5).servers, 1e6, 5)
    for kwargs, words in (
        ({"schedules": []}, "at least one"),
        ({"schedules": [s, other]}, "share one network"),
        ({"schedules": [s], "starts": [0.0, 1.0]}, "as many start times"),
        ({"schedules": [s], "starts": [-1.0]}, "start time"),
        ({"schedules": [s], "starts": [float("nan")]}, "start time"),
        ({"schedules": [s], "alpha": -1.0}, "alpha|overhead|α"),
    ):
        with pytest.raises(ArschedError, match=words):
            simulate_jobs(**kwargs)
