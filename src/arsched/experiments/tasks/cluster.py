"""The `cluster` task kind: simulate one trace on one cluster with one scheduler, objective,
network mode, seed and engine (`arsched cluster run --json`), keeping every job's JCT and the
utilisation series for the report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from pathlib import Path

import numpy as np

from arsched.experiments.config import ClusterRuns
from arsched.experiments.tasks.base import Kind

# Points kept of a run's GPU-utilisation series (slots averaged in equal groups) for the report.
UTILIZATION_POINTS = 200


@dataclass(frozen=True)
class ClusterParams:
    trace: str
    cluster: str
    scheduler: str
    objective: str
    network: str
    seed: int | str  # "" for a scheduler that draws no random numbers
    engine: str


@dataclass(frozen=True)
class ClusterRow:
    """The simulator's summary (its `to_dict(timings=True)`), the slot length, every job's JCT
    (`jct_json`) and the utilisation series (`utilization_json`)."""

    jobs: int
    finished: int
    avg_jct_s: float
    p95_jct_s: float
    makespan_s: float
    total_utility: float
    gpu_utilization: float
    energy_kwh: float
    jain_index: float
    scheduler_s_per_slot: float
    slot_s: float
    jct_s: str
    utilization: str


def expand(block: ClusterRuns) -> Iterator[ClusterParams]:
    """The grid; seeds multiply only schedulers that draw random numbers (the others run once,
    with seed "")."""
    from arsched.cluster.schedulers import get_scheduler

    for trace, cluster, scheduler, objective, network in product(
        block.traces, block.clusters, block.schedulers, block.objectives, block.networks
    ):
        seeds = block.seeds if get_scheduler(scheduler).uses_seed else [""]
        yield from (
            ClusterParams(trace, cluster, scheduler, objective, network, seed, block.engine) for seed in seeds
        )


def jct_json(jct: np.ndarray) -> str:
    """Every job's JCT in trace order, to the millisecond; null for a job that did not finish."""
    return json.dumps([round(float(j), 3) if np.isfinite(j) else None for j in jct], separators=(",", ":"))


def utilization_json(starts: np.ndarray, util: np.ndarray, points: int = UTILIZATION_POINTS) -> str:
    """{"t_s": [...], "u": [...]}: the busy fraction of the GPUs, averaged over at most `points`
    equal groups of consecutive slots (slots are equally long), each at its first slot's start."""
    edges = np.linspace(0, len(util), min(len(util), points) + 1).astype(int)[:-1]
    mean = np.add.reduceat(util, edges) / np.diff([*edges, len(util)]) if len(util) else util
    data = {"t_s": [round(float(t), 1) for t in starts[edges]], "u": [round(float(u), 4) for u in mean]}
    return json.dumps(data, separators=(",", ":"))


def run(p: ClusterParams, _folder: Path, _task_id: str) -> ClusterRow:
    from arsched.cluster import SimConfig, load_trace, parse_cluster, simulate
    from arsched.cluster.schedulers import get_scheduler
    from arsched.cluster.utility import Objective

    workload, _ = load_trace(p.trace)
    config = SimConfig(network=p.network, objective=Objective(p.objective), seed=p.seed or 0, engine=p.engine)
    res = simulate(workload, parse_cluster(p.cluster), get_scheduler(p.scheduler), config)
    return ClusterRow(
        **res.to_dict(timings=True),
        slot_s=res.slot_s,
        jct_s=jct_json(res.jct),
        utilization=utilization_json(res.slot_starts, res.utilization),
    )


KIND = Kind("cluster", ClusterParams, ClusterRow, expand, run, timings=("scheduler_s_per_slot",))
