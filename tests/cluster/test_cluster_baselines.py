"""The stronger baselines (Pollux-style, Themis-style, Gandiva-style): valid placements to the end
of a trace, rigid at elastic 1, and each one's priority rule on a hand case."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.cluster import SimConfig, parse_cluster, simulate
from arsched.cluster.jobs import Workload
from arsched.cluster.schedulers import SCHEDULERS, SlotState, get_scheduler
from arsched.cluster.schedulers.pollux import efficiency
from arsched.cluster.schedulers.themis import fairness_ratio
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import Objective
from arsched.defaults import DEFAULT_ALPHA
from cluster.test_cluster_fairness import Sizes

NEW = ("pollux", "themis", "gandiva")


def _state(wl, cluster, now, previous=None, remaining=None, attained=None, restart=None):
    n = len(wl)
    return SlotState(now, 60.0, np.arange(n),
                     wl.work.copy() if remaining is None else np.asarray(remaining, dtype=float),
                     np.zeros(n) if attained is None else np.asarray(attained, dtype=float),
                     previous or {}, wl, parse_cluster(cluster), Objective("jct"), DEFAULT_ALPHA, 0,
                     None if restart is None else np.asarray(restart, dtype=float))  # fmt: skip


def test_the_new_baselines_are_registered_with_a_description():
    for name in NEW:
        assert name in SCHEDULERS and get_scheduler(name).about


@pytest.mark.parametrize("name", NEW)
def test_every_job_finishes_and_elastic_1_runs_every_job_at_its_request(name):
    c = parse_cluster("leafspine:leaves=2,spines=1,servers_per_leaf=4,gpus=4")
    for elastic in (1, 2):
        wl = synthetic(40, seed=3, interval=15, median=300, sigma=0.8, elastic=elastic)
        keep = np.flatnonzero(wl.gpus <= 8)
        wl = Workload.build(wl.name, [wl.ids[i] for i in keep], [wl.models[i] for i in keep],
                            list(wl.arrival[keep]), list(wl.tau[keep]), list(wl.grad_bytes[keep]),
                            list(wl.work[keep]), list(wl.gpus[keep]), list(wl.max_workers[keep]))  # fmt: skip
        for mode in ("reserved", "shared"):
            s = Sizes(get_scheduler(name))
            r = simulate(wl, c, s, SimConfig(slot=30.0, network=mode))  # the simulator checks each decision
            assert r.finished == r.jobs
            if elastic == 1 or name != "pollux":
                assert all(w == wl.gpus[j] for j, w in s.placed)
            else:
                assert any(w != wl.gpus[j] for j, w in s.placed)


def test_pollux_gives_spare_gpus_to_the_job_whose_goodput_speedup_gains_most():
    # five 1-GPU servers, two 1-GPU jobs allowed 4: A scales (compute-bound), B's all-reduce over
    # the network makes two workers slower than one; Pollux starts both, then grows only A
    wl = Workload.build("two", ["a", "b"], ["x", "y"], [0.0, 0.0], [1.0, 0.05], [1e6, 1e9], [1e5, 1e5],
                        [1, 1], [4, 4])  # fmt: skip
    d = dict(get_scheduler("pollux").decide(_state(wl, "star:n=5,gpus=1", 0.0)))
    assert {j: sum(g for _, g in p) for j, p in d.items()} == {0: 4, 1: 1}
    assert efficiency(np.array([1, 2, 4]), np.array([1, 1, 1])).tolist() == [1.0, 5 / 6, 5 / 8]


def test_pollux_efficiency_stops_growth_that_throughput_alone_would_take():
    # one job of request 1, allowed 8, on an 8-GPU server with a slow intra-server ring: 8 workers
    # make 1.78x the throughput of one, but at efficiency (4 + 1) / (4 + 8) only 0.74x the goodput
    wl = Workload.build("one", ["a"], ["x"], [0.0], [0.1], [2e9], [1e6], [1], [8])
    st = _state(wl, "star:n=2,gpus=8,intra=10GB/s", 0.0)
    ((_, p),) = get_scheduler("pollux").decide(st)
    ((_, q),) = get_scheduler("optimus").decide(st)
    assert sum(g for _, g in p) == 1 and sum(g for _, g in q) == 8


def test_themis_runs_the_job_with_the_worst_finish_time_fairness_first():
    # at t = 1200 s, A arrived first but is long (rho = (1200 + 10000) / 10000 = 1.12); B arrived
    # later and is short (rho = (700 + 100) / 100 = 8): Themis runs B where FIFO runs A
    wl = Workload.build("two", ["a", "b"], ["x", "x"], [0.0, 500.0], [0.1, 0.1], [1e8, 1e8],
                        [4e5, 4e3], [4, 4], [4, 4])  # fmt: skip
    st = _state(wl, "star:n=2,gpus=2", 1200.0)
    assert fairness_ratio(st).round(3).tolist() == [1.12, 8.0]
    assert [j for j, _ in get_scheduler("themis").decide(st)] == [1]
    assert [j for j, _ in get_scheduler("fifo").decide(st)] == [0]
    # inside a lease round the running job keeps its GPUs; at the next round B takes them
    ring = ((0, 2), (1, 2))
    for now, runs in ((1500.0, 0), (1800.0, 1)):
        st = _state(wl, "star:n=2,gpus=2", now, previous={0: ring}, attained=[1.0, 0.0])
        assert [j for j, _ in get_scheduler("themis").decide(st)] == [runs]


def test_gandiva_migrates_a_ring_onto_one_server_only_when_the_gain_pays_the_restart():
    # a 4-GPU job on two servers (2 + 2) of three; the third server is free
    wl = Workload.build("one", ["a"], ["x"], [0.0], [0.1], [4e8], [1e6], [4], [4])
    ring = ((0, 2), (1, 2))
    for cost, expected in ((0.0, 1), (30.0, 1), (1e9, 2)):
        st = _state(wl, "star:n=3,gpus=4", 60.0, previous={0: ring}, attained=[1.0], restart=[cost])
        ((_, p),) = get_scheduler("gandiva").decide(st)
        assert len(p) == expected
