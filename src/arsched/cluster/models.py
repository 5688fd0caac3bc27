"""The model zoo: real parameter counts (fp32 gradients), a per-iteration compute time, and
the time a job loses when its GPUs change.

Parameter counts are the published ones (torchvision, the BERT/GPT-2/Transformer papers).
The compute time per iteration of one GPU's local batch is an assumption of the order measured
on V100-class GPUs at common batch sizes; traces that record durations (Tiresias) override it.

Restart cost (`restart_cost`, our assumptions, not measurements): a job whose GPUs change
(moved, resized, or resumed after a pause) saves a checkpoint, is relaunched on its new GPUs and
reloads it. The checkpoint holds CHECKPOINT_BYTES_PER_PARAM bytes per parameter (fp32 weights
and Adam's two fp32 moments), written and read at STORAGE_BANDWIDTH (a shared file system's
rate for one job), and the relaunch (processes, CUDA context, communicator, input pipeline)
takes RELAUNCH_S: from 10.1 s (mobilenet_v2) to 18.5 s (gpt2-medium).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arsched.errors import ArschedError

GRAD_BYTES_PER_PARAM = 4.0  # fp32 gradients
CHECKPOINT_BYTES_PER_PARAM = 12.0  # fp32 weights + Adam's first and second moments
STORAGE_BANDWIDTH = 1e9  # bytes/s each way between a job and its checkpoint store
RELAUNCH_S = 10.0  # s to relaunch a job's processes and rebuild its communicator


@dataclass(frozen=True)
class Model:
    name: str
    params: float  # number of parameters
    tau: float  # seconds of compute per iteration of one worker

    @property
    def grad_bytes(self) -> float:
        return GRAD_BYTES_PER_PARAM * self.params


ZOO: dict[str, Model] = {
    m.name: m
    for m in (
        Model("alexnet", 61.1e6, 0.05),
        Model("vgg11", 132.9e6, 0.12),
        Model("vgg16", 138.4e6, 0.18),
        Model("vgg19", 143.7e6, 0.21),
        Model("resnet50", 25.6e6, 0.10),
        Model("resnet101", 44.5e6, 0.17),
        Model("resnet152", 60.2e6, 0.24),
        Model("inception3", 23.8e6, 0.14),
        Model("inception4", 42.7e6, 0.25),
        Model("googlenet", 6.6e6, 0.06),
        Model("densenet121", 8.0e6, 0.12),
        Model("mobilenet_v2", 3.5e6, 0.05),
        Model("transformer", 65.0e6, 0.15),
        Model("bert-base", 110.0e6, 0.20),
        Model("bert-large", 340.0e6, 0.45),
        Model("gpt2", 124.0e6, 0.25),
        Model("gpt2-medium", 355.0e6, 0.55),
    )
}


def model(name: str) -> Model:
    """A model of the zoo by name; one sentence listing the zoo when unknown."""
    try:
        return ZOO[name.strip().lower()]
    except KeyError:
        raise ArschedError(f"unknown model {name!r}; the zoo has {', '.join(ZOO)}") from None


def restart_cost(grad_bytes: np.ndarray | float) -> np.ndarray:
    """Seconds of progress a job with `grad_bytes` of gradient loses per restart: its checkpoint
    saved and reloaded at STORAGE_BANDWIDTH plus RELAUNCH_S (see the module docstring)."""
    params = np.asarray(grad_bytes, dtype=float) / GRAD_BYTES_PER_PARAM
    return RELAUNCH_S + 2.0 * CHECKPOINT_BYTES_PER_PARAM * params / STORAGE_BANDWIDTH
