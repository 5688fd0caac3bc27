"""Simulation results: completion time, bandwidths, per-transfer and per-link detail, and the
gap to the lower bound (time / bound, ≥ 1 for every correct simulation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arsched.collective.schedule import Schedule
from arsched.collective_bounds import collective_bound
from arsched.errors import ArschedError
from arsched.sim.paths import CompiledPaths


@dataclass
class SimResult:
    """What a simulator found for one schedule.

    `start`/`end` are per transfer (seconds); `link_bytes` per directed link of the topology;
    `link_busy` = bytes / capacity, the time the link would need at full rate, so that
    `link_utilisation` = busy / time.
    """

    model: str
    schedule: Schedule = field(repr=False)
    time_s: float
    start: np.ndarray = field(repr=False)
    end: np.ndarray = field(repr=False)
    link_bytes: np.ndarray = field(repr=False)
    bound_s: float
    rounds: int | None = None
    alpha: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)
    # exact per-link rates where flows shared links: [(time, link indices, bytes/s)], each entry
    # holding until the next one (flow model with trace=True, event simulation only)
    link_rate_trace: list[tuple[float, np.ndarray, np.ndarray]] | None = field(default=None, repr=False)

    @property
    def algbw(self) -> float:
        """Algorithm bandwidth: bytes per rank / time."""
        return self.schedule.nbytes / self.time_s if self.time_s > 0 else float("inf")

    @property
    def busbw(self) -> float:
        """Bus bandwidth, nccl-tests' convention: algbw times 2(N-1)/N for AllReduce, (N-1)/N
        for ReduceScatter, AllGather and AllToAll, 1 for Broadcast and Reduce."""
        n = self.schedule.num_ranks
        factor = {"allreduce": 2 * (n - 1) / n, "broadcast": 1.0, "reduce": 1.0}
        return factor.get(self.schedule.collective, (n - 1) / n) * self.algbw

    @property
    def gap(self) -> float:
        """time / lower bound: 1.0 is optimal."""
        return self.time_s / self.bound_s if self.bound_s > 0 else float("inf")

    @property
    def link_busy(self) -> np.ndarray:
        return self.link_bytes / self.schedule.topology.compiled.capacity

    @property
    def link_utilisation(self) -> np.ndarray:
        return self.link_busy / self.time_s if self.time_s > 0 else np.zeros_like(self.link_bytes)

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON types (the CLI's --json); undefined ratios are None."""

        def finite(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        return {
            "model": self.model,
            "algorithm": self.schedule.algorithm,
            "topology": self.schedule.topology.name,
            "ranks": self.schedule.num_ranks,
            "bytes": self.schedule.nbytes,
            "time_s": self.time_s,
            "rounds": self.rounds,
            "algbw": finite(self.algbw),
            "busbw": finite(self.busbw),
            "bound_s": self.bound_s,
            "gap": finite(self.gap),
            "transfers": len(self.schedule),
            "alpha_s": self.alpha,
            **self.notes,
        }


def check_alpha(alpha: float) -> float:
    """The per-transfer overhead as a float; an ArschedError unless it is finite and >= 0."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        a = float("nan")
    if not (np.isfinite(a) and a >= 0):
        raise ArschedError(f"alpha must be a non-negative number of seconds, got {alpha!r}")
    return a


def schedule_bound(schedule: Schedule, alpha: float, port_model: bool = False) -> float:
    """max(bandwidth bound, latency bound) for the schedule's collective, ranks, size and
    overhead (`collective_bounds`)."""
    s = schedule
    if s.num_ranks < 2:
        return 0.0
    return collective_bound(s.topology, s.ranks, s.nbytes, s.collective, s.root, alpha, port_model)


def link_bytes(schedule: Schedule, cp: CompiledPaths) -> np.ndarray:
    """Bytes carried by every directed link (each transfer moves one chunk over its path)."""
    num_paths = len(cp.path_ptr) - 1
    per_path = np.bincount(cp.path_id, minlength=num_paths).astype(np.float64)
    num = schedule.topology.compiled.num_links
    return np.bincount(cp.path_links, weights=per_path[cp.path_owner], minlength=num) * schedule.chunk_bytes
