"""Schedulers and the simulator: every job finishes, GPUs and worker bounds hold, runs repeat."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.cluster import SimConfig, parse_cluster, simulate
from arsched.cluster.schedulers import SCHEDULERS, Scheduler, get_scheduler
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import OBJECTIVES, Objective
from arsched.errors import ArschedError

CLUSTER = "leafspine:leaves=2,spines=1,servers_per_leaf=4,gpus=4"


class Recorder(Scheduler):
    """Wraps a scheduler and checks every decision against the state it was given."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner, self.name = inner, inner.name
        self.slots = 0

    def decide(self, state):
        d = self.inner.decide(state)
        used = np.zeros(state.cluster.num_servers, dtype=int)
        for j, p in d:
            w = sum(g for _, g in p)
            assert 1 <= w <= state.workload.max_workers[j]
            if self.name in ("fifo", "sjf", "tiresias"):
                assert w == state.workload.gpus[j]  # rigid
            for s, g in p:
                used[s] += g
        assert (used <= state.cluster.gpus_per_server).all()
        self.slots += 1
        return d


@pytest.fixture(scope="module")
def small():
    return synthetic(25, seed=1, interval=30, median=300, sigma=0.8, elastic=2), parse_cluster(CLUSTER)


@pytest.mark.parametrize("name", list(SCHEDULERS))
@pytest.mark.parametrize("network", ["reserved", "shared"])
def test_every_scheduler_finishes_every_job(small, name, network):
    wl, c = small
    wl = wl.__class__(wl.ids, wl.models, wl.arrival, wl.tau, wl.grad_bytes, wl.work,
                      np.minimum(wl.gpus, 8), np.minimum(wl.max_workers, 16), wl.name)  # fmt: skip
    rec = Recorder(get_scheduler(name))
    r = simulate(wl, c, rec, SimConfig(network=network, slot=30.0, restart=5.0))
    assert r.finished == r.jobs == 25 and rec.slots > 0
    assert (r.jct[np.isfinite(r.jct)] > 0).all()
    assert 0 < r.gpu_utilization <= 1 and 0 < r.jain_index <= 1
    # nobody finishes faster than its work allows on its largest allowed ring inside one server
    assert r.makespan_s >= wl.arrival.max()


def test_runs_are_deterministic(small):
    wl, c = small
    cfg = SimConfig(network="shared", slot=30.0, seed=7)
    a = simulate(wl, c, get_scheduler("random"), cfg)
    b = simulate(wl, c, get_scheduler("random"), cfg)
    assert np.array_equal(a.jct, b.jct) and a.total_utility == b.total_utility


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_objectives_drive_gadget(small, objective):
    wl, c = small
    r = simulate(wl, c, get_scheduler("gadget"), SimConfig(objective=Objective(objective), slot=30.0))
    assert r.finished == r.jobs and np.isfinite(r.total_utility)


def test_one_job_alone_matches_the_closed_form():
    # one 4-GPU job inside one server: JCT = work / (w / T(w)) with b = intra bandwidth
    from arsched.cluster.jobs import Workload
    from arsched.cluster.network import iteration_time

    c = parse_cluster(CLUSTER + ",intra=100GB/s")
    wl = Workload.build("one", ["a"], ["resnet50"], [0.0], [0.1], [1e8], [4000.0], [4], [4])
    r = simulate(wl, c, get_scheduler("fifo"), SimConfig(slot=7.0))
    t = iteration_time(0.1, 1e8, 4, 100e9, SimConfig().alpha)
    assert r.jct[0] == pytest.approx(4000 / (4 / t))


def test_job_larger_than_cluster_is_refused(small):
    wl, _ = small
    with pytest.raises(ArschedError, match=r"requests .* GPUs but cluster"):
        simulate(wl, parse_cluster("star:n=2,gpus=2"), get_scheduler("fifo"))


def test_unknown_scheduler():
    with pytest.raises(ArschedError, match="unknown scheduler 'nope'"):
        get_scheduler("nope")


def test_gadget_starts_a_job_its_utility_gave_up_on(caplog):
    # on 16 GPUs the 16-GPU job j3 (D = 218 s) waits until its sigmoid JCT utility is ~0, after
    # which no move gains: without the starvation rule GADGET would never start it (FIFO does)
    wl = synthetic(20, seed=1)
    c = parse_cluster("leafspine:leaves=2,spines=1,servers_per_leaf=2,gpus=4")
    assert wl.gpus[3] == c.num_gpus == 16
    for name in ("gadget", "random"):
        with caplog.at_level("DEBUG", logger="arsched.cluster"):
            r = simulate(wl, c, get_scheduler(name), SimConfig())
        assert r.finished == r.jobs == 20, name
    # the decisions are logged, not printed: the rescue of job 3 and each run's end
    assert any("starving job 3 placed first on 16 GPUs" in m for m in caplog.messages)
    assert sum("20 of 20 jobs finished" in m for m in caplog.messages) == 2


def test_starving_jobs_are_placed_first_oldest_first(monkeypatch):
    from arsched.cluster.schedulers import SlotState, gadget

    wl = synthetic(6, seed=3)
    c = parse_cluster("star:n=2,gpus=2")
    assert wl.gpus.tolist() == [1, 1, 4, 1, 1, 1]
    # every job so old (JCT > 1000 D) that its sigmoid utility is flat: no move gains anything
    state = SlotState(float(wl.arrival.max() + 1000 * wl.duration.max()), 60.0, np.arange(len(wl)),
                      wl.work.copy(), np.zeros(len(wl)), {}, wl, c, Objective("jct"), 5e-6, 0)  # fmt: skip
    with monkeypatch.context() as m:
        m.setattr(gadget, "STARVE_FACTOR", np.inf)
        assert get_scheduler("gadget").decide(state) == []  # the pure greedy runs nothing
    d = get_scheduler("gadget").decide(state)
    # oldest first at their request while they fit: job 2 (4 GPUs) no longer fits after 0 and 1
    assert [(j, sum(g for _, g in p)) for j, p in d] == [(0, 1), (1, 1), (3, 1), (4, 1)]


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_first_moves_are_next_moves(objective):
    # the vectorised first moves equal next_move's scan, float for float, placed jobs included
    from arsched.cluster.ilp import random_instance
    from arsched.cluster.schedulers.gadget import MarginalAllocator

    for seed in range(6):
        st = random_instance(seed, objective)
        g = MarginalAllocator(st, aware=True, completion=seed % 2 == 1)
        if seed > 2:
            g.rescue = lambda: 0
            g.w[int(st.active[-1])] = g.cand[len(st.active) - 1][0]  # as if placed already
        want = sorted(mv for j in g.row if (mv := g.next_move(j)) is not None)
        assert sorted(g.first_moves()) == want


@pytest.mark.parametrize("completion", [False, True])
def test_one_value_in_floats_equals_the_vectorised_value(completion):
    # _value_one is value() float for float: any size, bandwidth (inf for one worker) and restart
    from arsched.cluster.ilp import random_instance
    from arsched.cluster.schedulers.gadget import MarginalAllocator

    rng = np.random.default_rng(0)
    checked = 0
    for seed in range(8):
        st = random_instance(seed, "jct")
        st.now += float(rng.uniform(0, 5000))
        g = MarginalAllocator(st, aware=True, completion=completion)
        assert g._scalar
        for j in st.active.tolist():
            for w in (1, 2, 3, 8, 64):
                for b in (np.inf, 0.0, 1e9, 12.5e9, float(rng.uniform(1e6, 1e11))):
                    for lost in (0.0, 10.0, float(rng.uniform(0, 300))):
                        want = float(g.value(np.array([j]), np.array([w]), np.array([b]), lost)[0])
                        assert g._value_one(j, w, b, lost) == want
                        checked += 1
    assert checked > 1000
