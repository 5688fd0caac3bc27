"""The events engine: closed forms, the minimum re-allocation interval, and agreement with the
slots engine when every event falls on a slot boundary."""

from __future__ import annotations

import numpy as np
import pytest

from arsched.cluster import SimConfig, Workload, parse_cluster, simulate
from arsched.cluster.jobs import worker_bounds
from arsched.cluster.network import iteration_time
from arsched.cluster.schedulers import SCHEDULERS, get_scheduler
from arsched.errors import ArschedError

WHOLE = "star:n=2,gpus=1"  # jobs of 2 GPUs take the whole cluster
SMALL = "leafspine:leaves=2,spines=2,servers_per_leaf=2,gpus=4"
DT = 100.0  # s: divides Themis's 600 s leases; with GPU counts dividing 32, Tiresias's thresholds
# (3,200 and 25,600 GPU-seconds) are crossed on slot boundaries too


def jobs(arrival, duration, gpus=None, grad_bytes=0.0, tau=0.5, elastic=1) -> Workload:
    """Jobs of the given arrivals and compute-only durations (s); with no gradient to exchange
    and alpha 0 a job's rate is w / tau whatever its ring, so its run time is its duration."""
    n = len(arrival)
    g = list(gpus or [1] * n)
    return Workload.build(
        "t", [f"j{i}" for i in range(n)], ["resnet50"] * n, list(arrival), [tau] * n, [grad_bytes] * n,
        [d * w / tau for d, w in zip(duration, g, strict=True)], g, worker_bounds(g, elastic),
    )  # fmt: skip


def run(wl, cluster, name="fifo", **kw):
    cfg = {"engine": "events", "alpha": 0.0, "restart": 0.0, "network": "shared", **kw}
    return simulate(wl, parse_cluster(cluster), get_scheduler(name), SimConfig(**cfg))


def test_one_job_alone_finishes_at_arrival_plus_its_run_time():
    """Off every slot boundary: the job starts when it arrives, at w / T(w) on one server's ring."""
    c = parse_cluster("star:n=2,gpus=8,intra=50GB/s")
    wl = jobs([0.0, 1234.5], [100.0, 1000.0], gpus=[1, 4], grad_bytes=100e6)  # the first job is long gone
    res = simulate(wl, c, get_scheduler("gadget"), SimConfig(engine="events", slot=60.0))
    t = iteration_time(0.5, 100e6, 4, 50e9, SimConfig().alpha)
    assert res.jct[1] == pytest.approx(wl.work[1] / (4 / t), rel=1e-12)
    assert (len(res.slot_starts), res.restarts) == (2, 0)  # one decision each, nothing in between
    slots = simulate(wl, c, get_scheduler("gadget"), SimConfig(engine="slots", slot=60.0))
    assert slots.jct[1] == pytest.approx(res.jct[1] + 1260 - 1234.5)  # waits for the next slot


def test_two_jobs_fifo_on_the_whole_cluster():
    wl = jobs([0.0, 10.0], [100.0, 50.0], gpus=[2, 2])
    res = run(wl, WHOLE, slot=5.0)
    assert res.jct == pytest.approx([100.0, 140.0], abs=1e-9)
    assert res.slot_starts == pytest.approx([0.0, 10.0, 100.0])  # arrival, arrival, completion


def test_an_event_inside_the_minimum_interval_waits_for_its_end():
    wl = jobs([0.0, 10.0], [20.0, 50.0], gpus=[2, 2])
    res = run(wl, WHOLE, slot=30.0)  # B arrives at 10 and the GPU frees at 20: both wait to 30
    assert res.jct == pytest.approx([20.0, 70.0], abs=1e-9)
    assert res.slot_starts == pytest.approx([0.0, 30.0])
    assert res.utilization == pytest.approx([20 / 30, 1.0])  # A's 20 s of the first 30 s


def test_tiresias_demotes_at_the_threshold_and_the_resumed_job_pays_its_restart():
    """A (5,000 s on 2 GPUs) runs until its attained service reaches 3,200 GPU-seconds (1,600 s),
    B (1,000 s, queue 0) then runs, A resumes after B and loses its restart cost: closed forms to
    1e-9, with a 7 s interval that puts no event on a slot boundary."""
    wl = jobs([0.0, 100.0], [5000.0, 1000.0], gpus=[2, 2])
    res = run(wl, WHOLE, "tiresias", slot=7.0, restart=30.0)
    assert res.jct == pytest.approx([1600 + 1000 + 30 + 3400, 1600 + 1000 - 100], abs=1e-9)
    assert res.restarts == 1
    slots = run(wl, WHOLE, "tiresias", slot=7.0, restart=30.0, engine="slots")
    assert slots.jct[1] == pytest.approx(1603 + 1000 - 100)  # demoted at the first slot past 1,600 s


def test_reallocate_re_plans_periodically():
    wl = jobs([0.0], [1000.0], gpus=[2])
    assert len(run(wl, WHOLE, slot=10.0).slot_starts) == 1
    res = run(wl, WHOLE, slot=10.0, reallocate=100.0)
    assert res.slot_starts == pytest.approx(np.arange(0, 1000, 100.0))
    assert res.jct[0] == pytest.approx(1000.0)


def aligned_trace(elastic: int) -> Workload:
    """40 jobs arriving on slot boundaries, their durations whole numbers of slots, 1-8 GPUs."""
    rng = np.random.default_rng(7)
    n = 40
    arrival = np.cumsum(rng.integers(0, 4, n)) * DT
    duration = rng.integers(1, 30, n) * DT
    gpus = rng.choice([1, 2, 4, 8], n, p=[0.5, 0.2, 0.2, 0.1])
    return jobs(list(arrival), list(duration), list(gpus), elastic=elastic)


@pytest.mark.parametrize("elastic", [1, 2])
@pytest.mark.parametrize("restart", [0.0, 2 * DT])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_the_engines_agree_when_every_event_falls_on_a_slot_boundary(name, restart, elastic):
    if name == "random" and restart:
        pytest.skip("the random ablation moves every ring every slot: at a cost it never progresses")
    """With re-allocation every slot the events engine decides when the slots engine does: the same
    JCTs to 1e-9, for every scheduler. Schedulers whose choices change only at their events (FIFO,
    SJF, Tiresias, Themis, Gandiva) agree without it too, on fewer decisions."""
    wl = aligned_trace(elastic)
    slots = run(wl, SMALL, name, slot=DT, restart=restart, engine="slots")
    assert slots.finished == len(wl)
    events = run(wl, SMALL, name, slot=DT, restart=restart, reallocate=DT)
    assert events.jct == pytest.approx(slots.jct, rel=1e-9, abs=1e-9)
    assert events.restarts == slots.restarts
    if name in ("fifo", "sjf", "tiresias", "themis", "gandiva"):
        lean = run(wl, SMALL, name, slot=DT, restart=restart)
        assert lean.jct == pytest.approx(slots.jct, rel=1e-9, abs=1e-9)
        assert len(lean.slot_starts) < len(slots.slot_starts)


def test_busy_gpu_seconds_add_up_over_uneven_intervals():
    wl = aligned_trace(1).scale_arrivals(0.37)  # off every boundary
    res = run(wl, SMALL, "tiresias", slot=DT)
    busy = res.gpu_utilization * 16 * res.makespan_s
    assert busy == pytest.approx(float((wl.work * wl.tau).sum()), rel=1e-9)  # every job's w x run time
    assert (res.utilization <= 1 + 1e-12).all()


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"engine": "event"}, "engine 'event' is not one of events, slots"),
     ({"reallocate": 0.0}, "re-allocation period must be a finite time > 0")],
)  # fmt: skip
def test_bad_settings_are_refused(kw, match):
    with pytest.raises(ArschedError, match=match):
        SimConfig(**kw)
