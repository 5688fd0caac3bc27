"""Jobs as arrays: arrival, model (gradient bytes, compute time), work, worker bound, request.

Work is counted in worker-iterations (one worker processing one local batch), so a job with w
workers and iteration time T(w) progresses at w / T(w) per second, and a trace's job that ran
`iterations` iterations on `gpus` GPUs needs gpus x iterations of work.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from arsched.errors import ArschedError

DEFAULT_ELASTIC = 1  # every job's worker bound is its request: rigid for every scheduler
MAX_ELASTIC = 64


def check_elastic(elastic: int) -> int:
    """The elasticity setting, a whole number from 1 to MAX_ELASTIC; anything else is refused."""
    whole = isinstance(elastic, int | np.integer) and not isinstance(elastic, bool)
    if not whole or not 1 <= elastic <= MAX_ELASTIC:
        raise ArschedError(f"elastic must be a whole number from 1 to {MAX_ELASTIC}, got {elastic!r}")
    return int(elastic)


def worker_bounds(gpus: list[int] | np.ndarray, elastic: int) -> list[int]:
    """Each job's worker bound W = elastic x its request. One setting for every job and so for
    every scheduler: the elastic ones (GADGET, Optimus) may grow a job to W, the rigid ones run
    it at its request whatever W is; elastic 1 makes every scheduler rigid."""
    e = check_elastic(elastic)
    return [e * int(g) for g in gpus]


@dataclass(frozen=True)
class Workload:
    """A trace: one entry per job, ordered by arrival (ties by id)."""

    ids: tuple[str, ...]
    models: tuple[str, ...]
    arrival: np.ndarray  # s
    tau: np.ndarray  # s of compute per iteration
    grad_bytes: np.ndarray  # bytes of gradient per all-reduce
    work: np.ndarray  # worker-iterations
    gpus: np.ndarray  # GPUs requested (the rigid schedulers' size)
    max_workers: np.ndarray  # elastic bound W (see worker_bounds)
    name: str = "trace"

    def __post_init__(self) -> None:
        n = len(self.ids)
        for field in ("arrival", "tau", "grad_bytes", "work", "gpus", "max_workers"):
            if len(getattr(self, field)) != n:
                raise ArschedError(f"workload {self.name}: {field} has the wrong length")
        if n == 0:
            raise ArschedError(f"workload {self.name} has no job")
        for field in ("arrival", "tau", "grad_bytes", "work"):
            bad = np.flatnonzero(~np.isfinite(getattr(self, field)) | (getattr(self, field) < 0))
            if len(bad):
                raise ArschedError(
                    f"workload {self.name}: job {self.ids[bad[0]]} has {field} "
                    f"{getattr(self, field)[bad[0]]}; it must be a finite number >= 0"
                )

    def __len__(self) -> int:
        return len(self.ids)

    @cached_property
    def duration(self) -> np.ndarray:
        """Compute-only run time at the requested size (the trace's own duration); computed once
        (schedulers read it at every decision)."""
        return self.work * self.tau / self.gpus

    @classmethod
    def build(
        cls,
        name: str,
        ids: list[str],
        models: list[str],
        arrival: list[float],
        tau: list[float],
        grad_bytes: list[float],
        work: list[float],
        gpus: list[int],
        max_workers: list[int] | None = None,
    ) -> Workload:
        """Sort by arrival (stable), shift time so the first job arrives at 0."""
        arr = np.asarray(arrival, dtype=float)
        order = np.lexsort((np.arange(len(arr)), arr))
        g = np.asarray(gpus, dtype=np.int64)
        w = np.asarray(max_workers if max_workers is not None else g, dtype=np.int64)
        return cls(
            ids=tuple(ids[i] for i in order),
            models=tuple(models[i] for i in order),
            arrival=arr[order] - (arr.min() if len(arr) else 0.0),
            tau=np.asarray(tau, dtype=float)[order],
            grad_bytes=np.asarray(grad_bytes, dtype=float)[order],
            work=np.asarray(work, dtype=float)[order],
            gpus=g[order],
            max_workers=np.maximum(w[order], g[order]),
            name=name,
        )

    def scale_arrivals(self, factor: float) -> Workload:
        """The same jobs with every arrival time multiplied by `factor` (< 1 compresses the trace:
        0.25 brings the jobs four times as fast, four times the offered load)."""
        if not 0 < factor < np.inf:
            raise ArschedError(f"the arrival scale must be a finite number > 0, got {factor}")
        name = self.name if factor == 1 else f"{self.name} (arrivals x{factor:g})"
        with np.errstate(over="ignore"):  # an arrival past the float range is refused as not finite
            arrival = self.arrival * factor
        return replace(self, arrival=arrival, name=name)

    def head(self, n: int) -> Workload:
        """The first n jobs by arrival."""
        sl = slice(0, n)
        return Workload(
            self.ids[sl], self.models[sl], self.arrival[sl], self.tau[sl], self.grad_bytes[sl],
            self.work[sl], self.gpus[sl], self.max_workers[sl], self.name,
        )  # fmt: skip
