"""One elasticity setting and one restart cost for every scheduler, and GADGET's decisions that
weigh a move's gain against its restart cost."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.cluster import SimConfig, load_trace, parse_cluster, simulate
from arsched.cluster.jobs import Workload
from arsched.cluster.models import ZOO, restart_cost
from arsched.cluster.network import throughput
from arsched.cluster.schedulers import Scheduler, SlotState, get_scheduler
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import Objective
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError

TAU, GRAD = 0.1, 1e8


def _state(wl: Workload, cluster: str, previous=None, remaining=None, attained=None, restart=None):
    """A slot at the last arrival with every job of `wl` active."""
    n = len(wl)
    return SlotState(float(wl.arrival.max()), 60.0, np.arange(n),
                     wl.work.copy() if remaining is None else np.asarray(remaining, dtype=float),
                     np.zeros(n) if attained is None else np.asarray(attained, dtype=float),
                     previous or {}, wl, parse_cluster(cluster), Objective("jct"), DEFAULT_ALPHA, 0,
                     None if restart is None else np.asarray(restart, dtype=float))  # fmt: skip


def test_elasticity_is_rigid_by_default_and_one_setting_for_every_job(tmp_path):
    assert (synthetic(50, seed=2).max_workers == synthetic(50, seed=2).gpus).all()
    wl = synthetic(50, seed=2, elastic=3)
    assert (wl.max_workers == 3 * wl.gpus).all()
    f = tmp_path / "t.csv"
    f.write_text("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,2,0,100,vgg16,50,1\n")
    assert load_trace(str(f))[0].max_workers.tolist() == [2]
    assert load_trace(str(f), elastic=2)[0].max_workers.tolist() == [4]
    spec, _ = load_trace("synthetic:jobs=5", elastic=2)
    assert (spec.max_workers == 2 * spec.gpus).all()
    for bad in (0, 65, 1.5, True):
        with pytest.raises(ArschedError, match="elastic must be a whole number from 1 to 64"):
            synthetic(5, elastic=bad)
        with pytest.raises(ArschedError, match="elastic must be a whole number"):
            load_trace(str(f), elastic=bad)


@pytest.mark.parametrize("name", ["gadget", "optimus"])
def test_optimus_grows_a_job_as_far_as_gadget(name):
    # one 4-GPU job alone on two 16-GPU servers: with elastic 2 both allocators take 8 GPUs, with
    # elastic 1 neither goes past the request
    for elastic, expected in ((1, 4), (2, 8)):
        wl = Workload.build("one", ["a"], ["x"], [0.0], [TAU], [GRAD], [4e5], [4], [4 * elastic])
        ((_, p),) = get_scheduler(name).decide(_state(wl, "star:n=2,gpus=16"))
        assert sum(g for _, g in p) == expected


def test_the_default_restart_cost_is_a_checkpoint_saved_and_reloaded_plus_a_relaunch():
    wl = synthetic(40, seed=4)
    cost = SimConfig().restart_for(wl)
    # resnet50: 25.6e6 parameters x 12 bytes written and read at 1 GB/s, plus 10 s
    assert float(restart_cost(ZOO["resnet50"].grad_bytes)) == pytest.approx(10 + 2 * 12 * 25.6e6 / 1e9)
    assert cost.tolist() == [pytest.approx(float(restart_cost(ZOO[m].grad_bytes))) for m in wl.models]
    assert 10 < cost.min() < cost.max() < 19
    assert SimConfig(restart=30.0).restart_for(wl).tolist() == [30.0] * 40
    assert not SimConfig(restart=0.0).restart_for(wl).any()
    assert (SimConfig().restart_label, SimConfig(restart=30.0).restart_label) == ("per model", "30 s")


class Script(Scheduler):
    """Runs job 0 on the placement its script gives for each slot (None: paused)."""

    name = "script"

    def __init__(self, rings) -> None:
        self.rings, self.slot = rings, 0

    def decide(self, state):
        p = self.rings[min(self.slot, len(self.rings) - 1)]
        self.slot += 1
        return [] if p is None else [(0, p)]


@pytest.mark.parametrize(
    ("rings", "lost"),
    [
        ([((0, 1),)], 0.0),  # never moved: no restart
        ([((0, 1),), ((1, 1),)], 25.0),  # moved once: 25 s, longer than the 10 s slot, carried over
        ([((0, 1),), None, ((0, 1),)], 10.0 + 25.0),  # paused a slot, resumed on the same GPU
    ],
)
def test_a_restart_stops_the_job_for_its_cost_across_slots(rings, lost):
    wl = Workload.build("one", ["a"], ["x"], [0.0], [TAU], [GRAD], [1000.0], [1], [1])
    r = simulate(wl, parse_cluster("star:n=2,gpus=1"), Script(rings), SimConfig(slot=10.0, restart=25.0))
    assert r.jct[0] == pytest.approx(1000 * TAU + lost)
    assert r.restarts == (lost > 0)


def _grow_case(saved_over_cost: float, restart: float = 30.0):
    """A 4-GPU job (bound 8) running on 4 GPUs of an 8-GPU server (of two), with its work left set
    so that growing to 8 GPUs saves `saved_over_cost` x 30 s over its remaining run."""
    wl = Workload.build("one", ["a"], ["x"], [0.0], [TAU], [GRAD], [1e6], [4], [8])
    c = parse_cluster("star:n=2,gpus=8")
    r4, r8 = (float(throughput(TAU, GRAD, w, c.intra_bandwidth, DEFAULT_ALPHA)) for w in (4, 8))
    left = saved_over_cost * 30.0 / (1 / r4 - 1 / r8)
    return _state(wl, "star:n=2,gpus=8", {0: ((0, 4),)}, [left], [1.0], [restart])


@pytest.mark.parametrize("name", ["gadget", "optimus"])
def test_a_running_job_is_resized_only_for_a_gain_larger_than_its_restart(name):
    sched = get_scheduler(name)
    assert sched.decide(_grow_case(0.5)) == [(0, ((0, 4),))]  # saves 15 s, costs 30 s: stays
    assert sched.decide(_grow_case(2.0)) == [(0, ((0, 8),))]  # saves 60 s: grows
    assert sched.decide(_grow_case(0.5, restart=0.0)) == [(0, ((0, 8),))]  # free restarts: grows


def test_gadget_keeps_a_new_job_off_a_running_jobs_gpus_while_restarts_cost():
    # job 0 runs on server 0; job 1, new and worth more per GPU, is placed first and, from an
    # empty cluster, would take the lowest-index server that fits: server 0, moving job 0
    # (both may grow from 2 to 4 GPUs, so that the greedy moves in small steps)
    wl = Workload.build("two", ["a", "b"], ["x", "x"], [0.0, 0.0], [TAU] * 2, [GRAD] * 2,
                        [4e6, 4e3], [2, 2], [4, 4])  # fmt: skip
    for restart, job0 in ((0.0, ((1, 4),)), (20.0, ((0, 4),))):
        st = _state(wl, "star:n=2,gpus=4", {0: ((0, 4),)}, attained=[1.0, 0.0], restart=[restart] * 2)
        d = dict(get_scheduler("gadget").decide(st))
        assert d[0] == job0 and d[1] != job0


class Mover(Scheduler):
    """Wraps a scheduler; counts the running jobs whose ring changed, as the simulator charges."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner, self.name, self.changed = inner, inner.name, 0

    def decide(self, state):
        d = self.inner.decide(state)
        self.changed += sum(state.attained[j] > 0 and state.previous.get(j) != p for j, p in d)
        return d


def test_restarts_are_counted_and_the_rigid_ones_never_resize():
    wl = synthetic(30, seed=1, interval=20, median=300, sigma=0.8, elastic=2)
    c = parse_cluster("leafspine:leaves=2,spines=1,servers_per_leaf=4,gpus=4")
    wl = Workload.build(wl.name, list(wl.ids), list(wl.models), list(wl.arrival), list(wl.tau),
                        list(wl.grad_bytes), list(wl.work), list(np.minimum(wl.gpus, 8)),
                        list(np.minimum(wl.max_workers, 16)))  # fmt: skip
    for name in ("gadget", "fifo", "tiresias"):
        m = Mover(get_scheduler(name))
        r = simulate(wl, c, m, SimConfig(slot=30.0))
        assert r.finished == r.jobs and r.restarts == m.changed
        if name == "fifo":
            assert r.restarts == 0  # non-preemptive, rigid: a running job keeps its GPUs


class Sizes(Scheduler):
    """Wraps a scheduler; records every (job, GPUs) it places."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner, self.name, self.placed = inner, inner.name, set()

    def decide(self, state: SlotState):
        decision = self.inner.decide(state)
        self.placed |= {(j, sum(g for _, g in p)) for j, p in decision}
        return decision


@pytest.mark.parametrize("name", ["gadget", "optimus"])
def test_at_elastic_1_the_allocators_run_every_job_at_its_request(name):
    """Rigid for everyone: at the default elasticity GADGET and Optimus-style choose which jobs
    run where and when, never a size; at elastic 2 they do use other sizes."""
    c = parse_cluster("leafspine:leaves=2,spines=1,servers_per_leaf=4,gpus=4")
    for elastic, rigid in ((1, True), (2, False)):
        wl = synthetic(40, seed=3, interval=15, median=300, sigma=0.8, elastic=elastic)
        keep = np.flatnonzero(wl.gpus <= 8)
        wl = Workload.build(wl.name, [wl.ids[i] for i in keep], [wl.models[i] for i in keep],
                            list(wl.arrival[keep]), list(wl.tau[keep]), list(wl.grad_bytes[keep]),
                            list(wl.work[keep]), list(wl.gpus[keep]), list(wl.max_workers[keep]))  # fmt: skip
        s = Sizes(get_scheduler(name))
        r = simulate(wl, c, s, SimConfig(slot=30.0))
        assert r.finished == r.jobs
        assert all(w == wl.gpus[j] for j, w in s.placed) == rigid
