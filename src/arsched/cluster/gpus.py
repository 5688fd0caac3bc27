"""GPU types of a heterogeneous trace and their speed relative to the simulated cluster's GPU.

The simulated cluster has one kind of GPU, the V100-class GPU the model zoo's compute times
assume. A trace that records which GPU type each job ran on (Alibaba PAI's `gpu_type`) ran some
jobs on slower GPUs; a job that ran d seconds on a type of speed f needs f x d seconds on the
simulated GPU. The factors are peak fp32 throughput over the V100's 15.7 TFLOPS (NVIDIA's data
sheets: P100 9.3, T4 8.1, K80 4.4 per GPU die), our stand-in for measured training speed-ups,
which vary by model; `MISC` is PAI's name for older GPUs (K40m, K80, M60: about 4.3-4.8).
"""

from __future__ import annotations

GPU_SPEED = {
    "V100": 1.0,
    "V100M32": 1.0,  # the 32 GB V100: the same compute
    "P100": 9.3 / 15.7,
    "T4": 8.1 / 15.7,
    "MISC": 4.5 / 15.7,
}


def gpu_speed(kind: str) -> float | None:
    """The speed of a GPU type relative to the simulated GPU, or None for a type not in GPU_SPEED."""
    return GPU_SPEED.get(kind.strip().upper())
