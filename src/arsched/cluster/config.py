"""The settings of one cluster simulation: engine, network mode, objective, slot, restart cost, α, seed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from arsched.cluster.jobs import Workload
from arsched.cluster.models import restart_cost
from arsched.cluster.utility import Objective
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError

ENGINES = ("events", "slots")  # when the simulator decides: see arsched.cluster.simulator
DEFAULT_ENGINE = "events"


@dataclass(frozen=True)
class SimConfig:
    network: str = "reserved"
    objective: Objective = field(default_factory=Objective)
    engine: str = DEFAULT_ENGINE
    # s; the slot (slots engine) or the minimum re-allocation interval (events engine);
    # None: a tenth of the median job duration, 1 s .. 10 min
    slot: float | None = None
    reallocate: float | None = None  # events engine: re-plan at least this often, s (None: on events only)
    restart: float | None = None  # s lost per restart by every job; None: per model (restart_for)
    alpha: float = DEFAULT_ALPHA
    seed: int = 0
    max_slots: int | None = None  # decisions; None: a horizon far past any reasonable makespan (see horizon)

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ArschedError(f"engine {self.engine!r} is not one of {', '.join(ENGINES)}")
        if self.reallocate is not None and not 0 < self.reallocate < math.inf:
            raise ArschedError(f"the re-allocation period must be a finite time > 0, got {self.reallocate} s")
        if self.reallocate is not None and self.engine != "events":
            raise ArschedError(
                "a re-allocation period is for the events engine (the slots engine re-plans every slot)"
            )
        if self.slot is not None and not 0 < self.slot < math.inf:
            raise ArschedError(f"the slot must be a finite time > 0, got {self.slot} s")
        if self.restart is not None and not 0 <= self.restart < math.inf:
            raise ArschedError(f"the restart cost must be a finite time >= 0, got {self.restart} s")
        if not 0 <= self.alpha < math.inf:
            raise ArschedError(f"alpha must be a finite time >= 0, got {self.alpha} s")

    def slot_for(self, workload: Workload) -> float:
        if self.slot is not None:
            return self.slot
        return float(min(max(round(float(np.median(workload.duration)) / 10.0), 1.0), 600.0))

    @property
    def restart_label(self) -> str:
        """The restart setting in words, for titles and tables: 'per model' or '30 s'."""
        return "per model" if self.restart is None else f"{self.restart:g} s"

    def restart_for(self, workload: Workload) -> np.ndarray:
        """Seconds of progress each job loses when its GPUs change (moved, resized, or resumed
        after a pause): `restart` for every job, or by default its model's checkpoint save and
        reload plus a relaunch (`models.restart_cost`)."""
        if self.restart is not None:
            return np.full(len(workload), float(self.restart))
        return restart_cost(workload.grad_bytes)
