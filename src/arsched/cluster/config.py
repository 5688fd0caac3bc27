"""The settings of one cluster simulation: network mode, objective, slot, restart cost, α, seed."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from arsched.cluster.jobs import Workload
from arsched.cluster.utility import Objective
from arsched.defaults import DEFAULT_ALPHA


@dataclass(frozen=True)
class SimConfig:
    network: str = "reserved"
    objective: Objective = field(default_factory=Objective)
    slot: float | None = None  # s; None: a tenth of the median job duration, 1 s .. 10 min
    restart: float = 0.0  # s of progress lost when a running job's GPUs change
    alpha: float = DEFAULT_ALPHA
    seed: int = 0
    max_slots: int | None = None  # None: a horizon far past any reasonable makespan (see horizon)

    def slot_for(self, workload: Workload) -> float:
        if self.slot is not None:
            return self.slot
        return float(min(max(round(float(np.median(workload.duration)) / 10.0), 1.0), 600.0))
