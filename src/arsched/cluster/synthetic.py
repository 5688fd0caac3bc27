"""A synthetic Philly-like trace: Poisson arrivals, Philly-shaped job sizes and run times.

Shapes follow the published Philly analysis (Jeon et al., ATC'19): most jobs use one GPU, a
minority 2-8, a few 16 or more; run times are heavy-tailed (log-normal, median 15 minutes,
cut to 1 minute .. 8 hours). Models are drawn from the zoo. Seeded: same spec, same trace.
"""

from __future__ import annotations

import numpy as np

from arsched.cluster.jobs import DEFAULT_ELASTIC, Workload, check_elastic, worker_bounds
from arsched.cluster.models import ZOO
from arsched.errors import ArschedError

GPU_SIZES = np.array([1, 2, 4, 8, 16, 32])
GPU_SHARES = np.array([0.60, 0.13, 0.12, 0.10, 0.04, 0.01])
MAX_JOBS = 1_000_000  # jobs of a synthetic trace (Philly's two months had about 100,000)
PARAMS = {"jobs": 1000, "seed": 0, "interval": 10.0, "median": 900.0, "sigma": 1.5}


def synthetic(
    jobs: int = 1000,
    seed: int = 0,
    interval: float = 10.0,
    median: float = 900.0,
    sigma: float = 1.5,
    elastic: int = DEFAULT_ELASTIC,
) -> Workload:
    """`jobs` jobs arriving every `interval` seconds on average (Poisson), each allowed up to
    `elastic` x its request (`worker_bounds`)."""
    for key, value, ok, need in (
        ("jobs", jobs, 1 <= jobs <= MAX_JOBS, f"1 to {MAX_JOBS:,}"),
        ("seed", seed, seed >= 0, ">= 0"),
        ("interval", interval, 0 < interval < np.inf, "finite and > 0"),
        ("median", median, 0 < median < np.inf, "finite and > 0"),
        ("sigma", sigma, 0 <= sigma < np.inf, "finite and >= 0"),
    ):
        if not ok:
            raise ArschedError(f"synthetic trace parameter {key} must be {need}, got {value}")
    check_elastic(elastic)
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(interval, jobs)) - interval
    gpus = rng.choice(GPU_SIZES, size=jobs, p=GPU_SHARES / GPU_SHARES.sum())
    duration = np.clip(median * np.exp(sigma * rng.standard_normal(jobs)), 60.0, 8 * 3600.0)
    names = list(ZOO)
    picks = rng.integers(0, len(names), jobs)
    tau = np.array([ZOO[names[p]].tau for p in picks])
    return Workload.build(
        f"synthetic-{jobs}-s{seed}",
        [f"j{i}" for i in range(jobs)],
        [names[p] for p in picks],
        list(np.maximum(arrival, 0.0)),
        list(tau),
        [ZOO[names[p]].grad_bytes for p in picks],
        list(gpus * duration / tau),
        list(gpus),
        worker_bounds(gpus, elastic),
    )


def parse_synthetic(spec: str, elastic: int = DEFAULT_ELASTIC) -> Workload:
    """`synthetic:jobs=1000,seed=1,interval=20,median=900,sigma=1.5` (all optional)."""
    _, _, rest = spec.partition(":")
    kw: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, _, raw = item.partition("=")
        if key not in PARAMS:
            raise ArschedError(f"synthetic trace has no parameter {key!r}; it takes {', '.join(PARAMS)}")
        try:
            kw[key] = type(PARAMS[key])(raw)
        except (ValueError, OverflowError):
            raise ArschedError(f"synthetic trace parameter {key} must be a number, got {raw!r}") from None
    return synthetic(**kw, elastic=elastic)  # type: ignore[arg-type]
