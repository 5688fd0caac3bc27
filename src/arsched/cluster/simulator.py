"""The slot-based, deterministic cluster simulator.

Each slot of length dt: the scheduler places the active jobs; the network mode gives each ring
its bandwidth; every running job progresses at w / T(w) for the slot; a job finishing inside a
slot records the exact time and frees its GPUs at the slot's end.

Restarts: a job that has run before and whose placement differs from the one it had in the last
slot (moved, resized, or resumed after a pause) makes no progress for its restart cost
(`SimConfig.restart_for`) while holding its new GPUs; a cost longer than the slot carries over
into the next slots, and a job moved again before it is done restarting starts over. The whole
cost is charged on the new GPUs (the checkpoint save on the old ones is folded into it).

In the `reserved` mode a ring keeps its reservation while it keeps its GPUs: rings reserve oldest
placement first, new ones in the scheduler's order.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import numpy as np

from arsched.cluster.cluster import Cluster
from arsched.cluster.config import SimConfig
from arsched.cluster.jobs import Workload
from arsched.cluster.metrics import ClusterResult, summarise
from arsched.cluster.network import MODES, ring_bandwidth, throughput
from arsched.cluster.schedulers import Scheduler, SlotState
from arsched.errors import ArschedError

HORIZON = 10  # see horizon_slots
MAX_SLOTS = 100_000_000  # the most slots a run may need (a 100,000-job trace in 1 s slots needs 16 million)

log = logging.getLogger(__name__)


def horizon_slots(workload: Workload, cluster: Cluster, dt: float) -> int:
    """Slots after which a run stops (jobs left unfinished count as such): the last arrival plus
    ten times the GPU-time of all jobs spread over the cluster plus ten longest jobs (random
    placement under reservation needed 7x GADGET's slots on the 1,000-job benchmark trace)."""
    d = workload.duration
    spread = float((workload.gpus * d).sum()) / cluster.num_gpus
    t = workload.arrival.max() + HORIZON * (spread + float(d.max()))
    slots = t / dt
    if not slots <= MAX_SLOTS:
        raise ArschedError(
            f"trace {workload.name} may need {slots:.3g} slots of {dt:g} s (its last arrival plus ten times "
            f"its work), more than the {MAX_SLOTS:,} a run may take; use a longer slot"
        )
    return math.ceil(slots) + 10


def _check_fit(workload: Workload, cluster: Cluster) -> None:
    big = np.flatnonzero(workload.gpus > cluster.num_gpus)
    if len(big):
        j = big[0]
        raise ArschedError(
            f"job {workload.ids[j]} requests {workload.gpus[j]} GPUs but cluster {cluster.name} has "
            f"{cluster.num_gpus}"
        )


def _check_decision(decision, state: SlotState, cluster: Cluster, scheduler: Scheduler) -> None:
    used = np.zeros(cluster.num_servers, dtype=np.int64)
    active = set(int(j) for j in state.active)
    for j, p in decision:
        if j not in active:
            raise ArschedError(f"scheduler {scheduler.name} placed job {j}, which is not active")
        for s, g in p:
            used[s] += g
    if (used > cluster.gpus_per_server).any():
        raise ArschedError(f"scheduler {scheduler.name} put more GPUs on a server than it has")


def simulate(
    workload: Workload,
    cluster: Cluster,
    scheduler: Scheduler,
    config: SimConfig = SimConfig(),
    progress: Callable[[float], None] | None = None,
) -> ClusterResult:
    """Run the trace to the end (or the slot limit); `progress(fraction of jobs done)` per slot."""
    if config.network not in MODES:
        raise ArschedError(f"network mode {config.network!r} is not one of {', '.join(MODES)}")
    _check_fit(workload, cluster)
    n = len(workload)
    dt = config.slot_for(workload)
    remaining = workload.work.astype(float).copy()
    attained = np.zeros(n)
    gpu_seconds = np.zeros(n)
    finish = np.full(n, np.inf)
    cost = config.restart_for(workload)
    stall = np.zeros(n)  # s of restart each job still has to sit through
    restarts = 0
    previous: dict = {}
    since: dict[int, int] = {}  # slot in which each job's current placement began
    busy, sched_time, slot_starts = [], [], []
    now = 0.0
    arrived = 0
    for slot in range(config.max_slots or horizon_slots(workload, cluster, dt)):
        while arrived < n and workload.arrival[arrived] <= now + 1e-9:
            arrived += 1
        active = np.flatnonzero(np.isinf(finish[:arrived]))
        if not len(active):
            if arrived == n:
                break
            now = math.ceil(workload.arrival[arrived] / dt - 1e-9) * dt
            continue
        state = SlotState(now, dt, active, remaining, attained, previous, workload, cluster,
                          config.objective, config.alpha, config.seed, cost)  # fmt: skip
        t0 = time.perf_counter()
        decision = scheduler.decide(state)
        sched_time.append(time.perf_counter() - t0)
        _check_decision(decision, state, cluster, scheduler)
        for j, p in decision:
            if previous.get(j) != p:
                since[j] = slot
        decision = sorted(decision, key=lambda jp: since[jp[0]])  # stable: commit order among new
        js = np.array([j for j, _ in decision], dtype=np.int64)
        w = np.array([sum(g for _, g in p) for _, p in decision], dtype=np.int64)
        b = ring_bandwidth(cluster, [p for _, p in decision], config.network)
        rate = throughput(workload.tau[js], workload.grad_bytes[js], w, b, config.alpha)
        moved = np.array([previous.get(j) != p for j, p in decision], dtype=bool) & (attained[js] > 0)
        stall[js[moved]] = cost[js[moved]]
        restarts += int(moved.sum())
        lost = np.minimum(stall[js], dt)
        stall[js] -= lost
        with np.errstate(divide="ignore"):
            need = np.where(rate > 0, remaining[js] / np.maximum(rate, 1e-300), np.inf)
        ran = np.minimum(need, dt - lost)
        done = need <= dt - lost + 1e-9
        remaining[js] = np.where(done, 0.0, remaining[js] - rate * ran)
        finish[js[done]] = now + lost[done] + need[done]
        held = np.where(done, lost + need, dt)
        gpu_seconds[js] += w * held
        attained[js] += w * held
        busy.append(float((w * held).sum()))
        slot_starts.append(now)
        previous = {j: p for (j, p), d in zip(decision, done, strict=True) if not d}
        now += dt
        if progress is not None:
            progress(float(np.isfinite(finish).mean()))
        if arrived == n and np.isfinite(finish).all():
            break
    log.info(
        "%s (%s) on %s: %d of %d jobs finished in %d slots of %g s",
        scheduler.name, config.network, cluster.name, int(np.isfinite(finish).sum()), n, len(busy), dt,
    )  # fmt: skip
    return summarise(
        workload, cluster, scheduler.name, config, dt, finish, gpu_seconds, restarts,
        np.array(slot_starts), np.array(busy), np.array(sched_time),
    )  # fmt: skip
