"""Several schedules (jobs) on one network at once, in the flow model.

All jobs' transfers go into one event simulation (`engine`): each job starts at its own time,
its transfers share links max-min fairly with every other job's, and its dependencies stay its
own. Each job's time (from its start to its last transfer done) is set beside its time alone
on the same network, in the same model: the slowdown is what interference costs it. This is
the building block for studies of interference and for a cluster whose jobs' rings really
share links.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError
from arsched.limits import check_simulation
from arsched.sim.deps import Dependencies, derive
from arsched.sim.engine import simulate_events
from arsched.sim.flow import flow_times
from arsched.sim.paths import CompiledPaths, compile_paths
from arsched.sim.result import check_alpha
from arsched.topology.core import Topology


@dataclass(frozen=True)
class JobResult:
    """One job of a joint simulation: when it started, how long it took with the others and
    alone (seconds)."""

    name: str
    start_s: float
    time_s: float
    alone_s: float

    @property
    def slowdown(self) -> float:
        """Time with the others over time alone (1 when nothing interfered)."""
        return self.time_s / self.alone_s if self.alone_s > 0 else 1.0


@dataclass(frozen=True)
class JobsResult:
    """Every job's result, when the last one finished, and how many event instants it took."""

    jobs: tuple[JobResult, ...]
    makespan_s: float
    event_instants: int
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": "flow",
            "alpha_s": self.alpha,
            "makespan_s": self.makespan_s,
            "event_instants": self.event_instants,
            "jobs": [
                {"name": j.name, "start_s": j.start_s, "time_s": j.time_s, "alone_s": j.alone_s}
                | {"slowdown": j.slowdown}
                for j in self.jobs
            ],
        }


def simulate_jobs(
    schedules: Sequence[Schedule],
    starts: Sequence[float] | None = None,
    alpha: float = DEFAULT_ALPHA,
    fifo: bool = True,
    synchronous: bool = False,
    names: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> JobsResult:
    """Simulate `schedules` together on their (one) network, job i starting at `starts[i]`
    seconds (default: all at 0), in the flow model with `alpha`, `fifo` and `synchronous` as in
    `simulate_flow`; `names` label the jobs (default job1, job2, ...)."""
    alpha = check_alpha(alpha)
    if not schedules:
        raise ArschedError("simulate_jobs needs at least one schedule")
    starts = [0.0] * len(schedules) if starts is None else [float(x) for x in starts]
    names = [f"job{i + 1}" for i in range(len(schedules))] if names is None else list(names)
    if len(starts) != len(schedules) or len(names) != len(schedules):
        raise ArschedError(f"{len(schedules)} jobs need as many start times and names")
    bad = [x for x in starts if not (np.isfinite(x) and x >= 0)]
    if bad:
        raise ArschedError(f"a job's start time must be a finite number of seconds ≥ 0, got {bad[0]!r}")
    topology = schedules[0].topology
    jobs = [_on(topology, s, i) for i, s in enumerate(schedules)]
    cps = [compile_paths(s) for s in jobs]
    alone = [_alone(s, cp, alpha, fifo, synchronous) for s, cp in zip(jobs, cps, strict=True)]
    sizes = [len(s) for s in jobs]
    check_simulation(sum(sizes))  # the joint simulation, before its dependencies
    deps = _joined_deps([derive(s, synchronous=synchronous, fifo=fifo) for s in jobs])
    chunk = np.repeat([s.chunk_bytes for s in jobs], sizes)
    release = np.repeat(starts, sizes)
    cap = topology.compiled.capacity
    _, done, counts = simulate_events(
        _joined_paths(cps), deps, cap, chunk, alpha, progress=progress, release=release
    )
    ends = np.cumsum(sizes)
    results = []
    for i, (lo, hi) in enumerate(zip(ends - sizes, ends, strict=True)):
        finish = float(done[lo:hi].max()) if hi > lo else starts[i]
        results.append(JobResult(names[i], starts[i], finish - starts[i], alone[i]))
    makespan = max(j.start_s + j.time_s for j in results)
    return JobsResult(tuple(results), makespan, counts["event_instants"], alpha)


def _alone(schedule: Schedule, cp: CompiledPaths, alpha: float, fifo: bool, synchronous: bool) -> float:
    """The job's time with the network to itself."""
    return float(flow_times(schedule, cp, alpha, fifo, synchronous)[1].max()) if len(schedule) else 0.0


def _on(topology: Topology, schedule: Schedule, i: int) -> Schedule:
    """`schedule` with its transfers' nodes numbered as in `topology` (the same network)."""
    if schedule.topology is topology:
        return schedule
    if schedule.topology != topology:
        raise ArschedError(
            f"job {i + 1} runs on {schedule.topology.name}, not on job 1's network {topology.name}: "
            "jobs simulated together must share one network"
        )
    index = topology.compiled.index
    remap = np.array([index[x] for x in schedule.topology.compiled.node_ids], dtype=np.int64)
    return dataclasses.replace(schedule, topology=topology, src=remap[schedule.src], dst=remap[schedule.dst])


def _joined_paths(cps: list[CompiledPaths]) -> CompiledPaths:
    """The path tables of several jobs, one after another, and their transfers' paths."""
    paths = np.cumsum([0] + [len(c.path_ptr) - 1 for c in cps])
    entries = np.cumsum([0] + [len(c.path_links) for c in cps])
    ptr = [c.path_ptr[:-1] + e for c, e in zip(cps, entries, strict=False)] + [[entries[-1]]]
    return CompiledPaths(
        np.concatenate([c.path_id + p for c, p in zip(cps, paths, strict=False)]),
        np.concatenate(ptr).astype(np.int64),
        np.concatenate([c.path_links for c in cps]),
        np.concatenate([c.path_latency for c in cps]),
        np.concatenate([c.path_bottleneck for c in cps]),
    )


def _joined_deps(deps: list[Dependencies]) -> Dependencies:
    """The dependency groups of several jobs, one after another (no group spans two jobs)."""
    width = max(d.member_of.shape[1] for d in deps)
    groups = np.cumsum([0] + [len(d.size) for d in deps])
    transfers = np.cumsum([0] + [len(d.wait_count) for d in deps])
    waits = np.cumsum([0] + [len(d.dependents) for d in deps])
    member_of = []
    for d, g in zip(deps, groups, strict=False):
        m = np.full((len(d.member_of), width), -1, dtype=np.int64)
        m[:, : d.member_of.shape[1]] = np.where(d.member_of >= 0, d.member_of + g, -1)
        member_of.append(m)
    dep_ptr = [d.dep_ptr[:-1] + w for d, w in zip(deps, waits, strict=False)] + [[waits[-1]]]
    return Dependencies(
        np.concatenate(member_of),
        np.concatenate([d.size for d in deps]),
        np.concatenate([d.wait_count for d in deps]),
        np.concatenate(dep_ptr).astype(np.int64),
        np.concatenate([d.dependents + t for d, t in zip(deps, transfers, strict=False)]),
    )
