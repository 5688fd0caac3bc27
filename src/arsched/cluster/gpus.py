"""GPU types of a heterogeneous trace and their speed relative to the simulated cluster's GPU.

The simulated cluster has one kind of GPU, the V100-class GPU the model zoo's compute times
assume. A trace that records which GPU type each job ran on (Alibaba PAI's `gpu_type`) ran some
jobs on slower GPUs; a job that ran d seconds on a type of speed f needs f x d seconds on the
simulated GPU. The factors are peak fp32 throughput over the V100's 15.7 TFLOPS (NVIDIA's data
sheets: P100 9.3, T4 8.1, K80 4.4 per GPU die), our stand-in for measured training speed-ups,
which vary by model; `MISC` is PAI's name for older GPUs (K40m, K80, M60: about 4.3-4.8).
Measured factors replace them by `parse_gpu_speeds` (`arsched cluster --gpu-speed T4=0.6`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from arsched.errors import ArschedError

GPU_SPEED = {
    "V100": 1.0,
    "V100M32": 1.0,  # the 32 GB V100: the same compute
    "P100": 9.3 / 15.7,
    "T4": 8.1 / 15.7,
    "MISC": 4.5 / 15.7,
}


def gpu_speed(kind: str, speeds: Mapping[str, float] = GPU_SPEED) -> float | None:
    """The speed of a GPU type relative to the simulated GPU, or None for a type not in `speeds`."""
    return speeds.get(kind.strip().upper())


def parse_gpu_speeds(spec: str) -> dict[str, float]:
    """GPU_SPEED with the factors of `TYPE=F,...` (F finite and > 0) in place of its own; a type
    it does not list is added."""
    speeds = dict(GPU_SPEED)
    for item in filter(None, (x.strip() for x in spec.split(","))):
        kind, sep, raw = (x.strip() for x in item.partition("="))
        try:
            f = float(raw) if sep and kind else math.nan
        except ValueError:
            f = math.nan
        if not 0 < f < math.inf:
            raise ArschedError(f"GPU speed {item!r} is not TYPE=F with F a number > 0, e.g. T4=0.6")
        speeds[kind.upper()] = f
    return speeds
