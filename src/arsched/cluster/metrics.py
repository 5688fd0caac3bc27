"""The result of one cluster simulation: JCT statistics, makespan, utilisation, energy, utility and fairness.

Energy counts 300 W per busy GPU and 60 W per idle GPU over the makespan (assumed powers of a
V100-class GPU). Finish-time fairness is JCT / JCT alone, where alone means the job's requested
GPUs consolidated on an empty cluster; Jain's index is over the normalised speeds D / JCT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arsched.cluster.cluster import Cluster
from arsched.cluster.config import SimConfig
from arsched.cluster.jobs import Workload
from arsched.cluster.network import throughput

BUSY_WATTS = 300.0
IDLE_WATTS = 60.0
JSON_KEYS = (
    "jobs", "finished", "avg_jct_s", "p95_jct_s", "makespan_s", "total_utility",
    "gpu_utilization", "energy_kwh", "jain_index",
)  # fmt: skip
# Keys that measure the machine (wall-clock time), not the run: only where asked for.
TIMING_KEYS = ("scheduler_s_per_slot",)


@dataclass
class ClusterResult:
    """One scheduler's run over a trace: per-job JCTs (inf where unfinished), the summary
    metrics, and the GPU utilisation series the plots draw: one point per decision (per slot in
    the slots engine), from its start to the next decision."""

    scheduler: str
    network: str
    objective: str
    slot_s: float  # the slot, or the events engine's minimum re-allocation interval
    jobs: int
    finished: int
    jct: np.ndarray = field(repr=False)
    avg_jct_s: float
    median_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    makespan_s: float
    total_utility: float
    gpu_utilization: float
    energy_kwh: float
    jain_index: float
    restarts: int  # placements changed under a job that had run before (each costs its restart)
    ftf_mean: float
    ftf_max: float
    scheduler_s_per_slot: float  # mean wall-clock time of one decision
    scheduler_s_max: float
    slot_starts: np.ndarray = field(repr=False)  # s: when each decision was taken
    utilization: np.ndarray = field(repr=False)  # busy fraction from each decision to the next

    def to_dict(self, timings: bool = False) -> dict[str, Any]:
        """The `--json` object of `arsched cluster run`: exactly JSON_KEYS, the same bytes for the
        same inputs; with `timings`, TIMING_KEYS after them (`--timings`)."""
        return {k: getattr(self, k) for k in JSON_KEYS + (TIMING_KEYS if timings else ())}

    def row(self) -> dict[str, Any]:
        """Every scalar, for tables and pandas."""
        return {k: v for k, v in self.__dict__.items() if not isinstance(v, np.ndarray)}


def alone_jct(workload: Workload, cluster: Cluster, alpha: float) -> np.ndarray:
    """JCT of each job alone on the cluster at its requested size, consolidated."""
    g = workload.gpus
    b = np.where(
        g <= cluster.gpus_per_server, cluster.intra_bandwidth, min(cluster.nic.min(), cluster.intra_bandwidth)
    )
    return workload.work / throughput(workload.tau, workload.grad_bytes, g, b, alpha)


def summarise(
    workload: Workload,
    cluster: Cluster,
    scheduler: str,
    config: SimConfig,
    dt: float,
    finish: np.ndarray,
    gpu_seconds: np.ndarray,
    restarts: int,
    starts: np.ndarray,
    spans: np.ndarray,
    busy: np.ndarray,
    sched_time: np.ndarray,
) -> ClusterResult:
    """The metrics of a run from what the simulator recorded: each job's finish time (inf where
    unfinished), GPU-seconds and the restarts charged; per decision its start, the time to the
    next one, the GPU-seconds used in between and the scheduler's wall-clock time."""
    done = np.isfinite(finish)
    jct = finish - workload.arrival
    j = jct[done]
    makespan = float(finish[done].max()) if done.any() else float("inf")
    total_gpu_s = cluster.num_gpus * (makespan if done.any() else 0.0)
    busy_s = float(busy.sum())
    speed = workload.duration[done] / j if done.any() else np.zeros(0)
    ftf = j / alone_jct(workload, cluster, config.alpha)[done] if done.any() else np.zeros(1)

    def pct(q: float) -> float:
        return float(np.percentile(j, q)) if len(j) else float("nan")

    return ClusterResult(
        scheduler=scheduler,
        network=config.network,
        objective=config.objective.name,
        slot_s=dt,
        jobs=len(workload),
        finished=int(done.sum()),
        jct=jct,
        avg_jct_s=float(j.mean()) if len(j) else float("nan"),
        median_jct_s=pct(50),
        p95_jct_s=pct(95),
        p99_jct_s=pct(99),
        makespan_s=makespan,
        total_utility=config.objective.total(jct, workload.duration, gpu_seconds, workload.gpus),
        gpu_utilization=busy_s / total_gpu_s if total_gpu_s > 0 else 0.0,
        energy_kwh=(busy_s * BUSY_WATTS + max(total_gpu_s - busy_s, 0.0) * IDLE_WATTS) / 3.6e6,
        jain_index=float(speed.sum() ** 2 / (len(speed) * (speed**2).sum())) if len(speed) else 0.0,
        restarts=restarts,
        ftf_mean=float(ftf.mean()),
        ftf_max=float(ftf.max()),
        scheduler_s_per_slot=float(sched_time.mean()) if len(sched_time) else 0.0,
        scheduler_s_max=float(sched_time.max()) if len(sched_time) else 0.0,
        slot_starts=starts,
        utilization=busy / (cluster.num_gpus * spans) if len(busy) else busy,
    )
