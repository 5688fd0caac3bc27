"""The model zoo: real parameter counts (fp32 gradients) and a per-iteration compute time.

Parameter counts are the published ones (torchvision, the BERT/GPT-2/Transformer papers).
The compute time per iteration of one GPU's local batch is an assumption of the order measured
on V100-class GPUs at common batch sizes; traces that record durations (Tiresias) override it.
"""

from __future__ import annotations

from dataclasses import dataclass

from arsched.errors import ArschedError


@dataclass(frozen=True)
class Model:
    name: str
    params: float  # number of parameters
    tau: float  # seconds of compute per iteration of one worker

    @property
    def grad_bytes(self) -> float:
        return 4.0 * self.params


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
