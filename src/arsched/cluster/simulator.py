"""The deterministic cluster simulator, with two engines that differ only in when they decide.

At a decision the scheduler places the active jobs; the network mode gives each ring its
bandwidth; every placed job then progresses at w / T(w) until the next decision, and a job that
finishes in between records the exact time and frees its GPUs at the next decision. Between two
decisions nothing changes, so nothing is computed there. `SimConfig.engine` says when decisions are:

- `slots`: at every multiple of the slot dt while jobs are active (GADGET's model: its paper
  plans once per slot). A trace's arrival waits for the next slot.
- `events`: at arrivals, completions and re-allocation events, never sooner than dt after the
  previous decision (dt is then the minimum re-allocation interval; an event inside it waits for
  its end). Re-allocation events are the scheduler's own (`Scheduler.wake`: Tiresias's demotions,
  Themis's lease rounds, GADGET's anti-starvation) and, if `SimConfig.reallocate` is set, one at
  least every that many seconds. With arrivals and completions on multiples of dt and
  `reallocate = dt` the two engines make the same decisions at the same times; for a scheduler
  whose choices change only at its events (FIFO, SJF, Tiresias, Themis) without `reallocate`.

Restarts: a job that has run before and whose placement differs from its previous one (moved,
resized, or resumed after a pause) makes no progress for its restart cost
(`SimConfig.restart_for`) while holding its new GPUs; a cost longer than the time to the next
decision carries over, and a job moved again before it is done restarting starts over. The whole
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
from arsched.cluster.schedulers import Decision, Scheduler, SlotState
from arsched.errors import ArschedError

HORIZON = 10  # see horizon_slots
MAX_SLOTS = 100_000_000  # the most slots a run may need (a 100,000-job trace in 1 s slots needs 16 million)
EPS = 1e-9  # s: an event this close to a decision belongs to it

log = logging.getLogger(__name__)


def horizon(workload: Workload, cluster: Cluster) -> float:
    """Time after which a run stops (jobs left unfinished count as such): the last arrival plus
    ten times the GPU-time of all jobs spread over the cluster plus ten longest jobs (random
    placement under reservation needed 7x GADGET's slots on the 1,000-job benchmark trace)."""
    d = workload.duration
    spread = float((workload.gpus * d).sum()) / cluster.num_gpus
    return float(workload.arrival.max() + HORIZON * (spread + float(d.max())))


def horizon_slots(workload: Workload, cluster: Cluster, dt: float) -> int:
    """Slots of dt to the horizon, and ten more; more than MAX_SLOTS is refused."""
    slots = horizon(workload, cluster) / dt
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
    active = np.zeros(len(state.workload), dtype=bool)
    active[state.active] = True
    used = np.zeros(cluster.num_servers, dtype=np.int64)
    for j, p in decision:
        if not (0 <= j < len(active) and active[j]):
            raise ArschedError(f"scheduler {scheduler.name} placed job {j}, which is not active")
        for s, g in p:
            used[s] += g
    if (used > cluster.gpus_per_server).any():
        raise ArschedError(f"scheduler {scheduler.name} put more GPUs on a server than it has")


class _Rates:
    """Each placed job's work per second under a decision, recomputed only when the decision
    (placements and commit order) differs from the last one: the rates depend on nothing else."""

    def __init__(self, workload: Workload, cluster: Cluster, config: SimConfig) -> None:
        self.wl, self.cluster, self.config = workload, cluster, config
        self.last: Decision | None = None
        self.rate = np.zeros(0)

    def __call__(self, decision: Decision, js: np.ndarray, w: np.ndarray) -> np.ndarray:
        if decision != self.last:
            b = ring_bandwidth(self.cluster, [p for _, p in decision], self.config.network)
            self.rate = throughput(self.wl.tau[js], self.wl.grad_bytes[js], w, b, self.config.alpha)
            self.last = decision
        return self.rate


def simulate(
    workload: Workload,
    cluster: Cluster,
    scheduler: Scheduler,
    config: SimConfig = SimConfig(),
    progress: Callable[[float], None] | None = None,
) -> ClusterResult:
    """Run the trace to the end (or the horizon) in `config.engine`; `progress(fraction of jobs
    done)` after each decision."""
    if config.network not in MODES:
        raise ArschedError(f"network mode {config.network!r} is not one of {', '.join(MODES)}")
    _check_fit(workload, cluster)
    n = len(workload)
    dt = config.slot_for(workload)
    events = config.engine == "events"
    end = horizon(workload, cluster) + HORIZON * dt  # s: the events engine stops here
    # decisions: both engines may decide every dt (a scheduler that wakes each interval)
    steps = config.max_slots or horizon_slots(workload, cluster, dt)
    rates = _Rates(workload, cluster, config)
    remaining = workload.work.astype(float).copy()
    attained = np.zeros(n)
    gpu_seconds = np.zeros(n)
    finish = np.full(n, np.inf)
    cost = config.restart_for(workload)
    stall = np.zeros(n)  # s of restart each job still has to sit through
    restarts = 0
    previous: dict = {}
    since: dict[int, int] = {}  # step at which each job's current placement began
    busy, spans, sched_time, starts = [], [], [], []
    now = 0.0
    last = -math.inf  # time of the last decision
    arrived = finished = 0
    active = np.zeros(0, dtype=np.int64)  # arrived and unfinished, by index (= arrival order)
    for step in range(steps):
        first = arrived
        while arrived < n and workload.arrival[arrived] <= now + EPS:
            arrived += 1
        if arrived > first:
            active = np.concatenate([active, np.arange(first, arrived)])
        if not len(active):
            if arrived == n or (events and now >= end):
                break
            nxt = workload.arrival[arrived]
            now = max(nxt, last + dt) if events else math.ceil(nxt / dt - EPS) * dt
            continue
        state = SlotState(now, dt, active, remaining, attained, previous, workload, cluster,
                          config.objective, config.alpha, config.seed, cost)  # fmt: skip
        t0 = time.perf_counter()
        decision = scheduler.decide(state)
        sched_time.append(time.perf_counter() - t0)
        _check_decision(decision, state, cluster, scheduler)
        for j, p in decision:
            if previous.get(j) != p:
                since[j] = step
        decision = sorted(decision, key=lambda jp: since[jp[0]])  # stable: commit order among new
        js = np.array([j for j, _ in decision], dtype=np.int64)
        w = np.array([sum(g for _, g in p) for _, p in decision], dtype=np.int64)
        rate = rates(decision, js, w)
        moved = np.array([previous.get(j) != p for j, p in decision], dtype=bool) & (attained[js] > 0)
        stall[js[moved]] = cost[js[moved]]
        restarts += int(moved.sum())
        with np.errstate(divide="ignore"):
            need = np.where(rate > 0, remaining[js] / np.maximum(rate, 1e-300), np.inf)
        if events:
            h = _next_decision(now, dt, end, stall[js] + need, workload.arrival[arrived:arrived + 1],
                               scheduler.wake(state, decision), config.reallocate) - now  # fmt: skip
        else:
            h = dt
        lost = np.minimum(stall[js], h)
        stall[js] -= lost
        ran = np.minimum(need, h - lost)
        done = need <= h - lost + EPS
        remaining[js] = np.where(done, 0.0, remaining[js] - rate * ran)
        finish[js[done]] = now + lost[done] + need[done]
        if done.any():
            active = active[np.isinf(finish[active])]
            finished = arrived - len(active)
        held = np.where(done, lost + need, h)
        gpu_seconds[js] += w * held
        attained[js] += w * held
        busy.append(float((w * held).sum()))
        spans.append(h)
        starts.append(now)
        previous = {j: p for (j, p), d in zip(decision, done, strict=True) if not d}
        last = now
        now += h
        if progress is not None:
            progress(finished / n)
        if (arrived == n and finished == n) or (events and now >= end):
            break
    log.info(
        "%s (%s, %s engine) on %s: %d of %d jobs finished in %d decisions, %g s apart at least",
        scheduler.name, config.network, config.engine, cluster.name, int(np.isfinite(finish).sum()), n,
        len(busy), dt,
    )  # fmt: skip
    return summarise(
        workload, cluster, scheduler.name, config, dt, finish, gpu_seconds, restarts,
        np.array(starts), np.array(spans), np.array(busy), np.array(sched_time),
    )  # fmt: skip


def _next_decision(
    now: float, dt: float, end: float, finishing: np.ndarray, arrival: np.ndarray, wake: float,
    reallocate: float | None,
) -> float:  # fmt: skip
    """The events engine's next decision: the first arrival, completion (s from now, restarts
    included) or re-allocation event, but no sooner than dt after this one and no later than the
    horizon `end`."""
    first = min(
        float(finishing.min(initial=math.inf)) + now,
        float(arrival.min(initial=math.inf)),
        wake,
        now + reallocate if reallocate is not None else math.inf,
    )
    return min(max(first, now + dt), max(end, now + dt))
