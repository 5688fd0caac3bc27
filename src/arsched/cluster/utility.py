"""Job utilities: what a scheduler maximises per slot and what a run scores in total.

Every objective gives (i) the value of running a job for one slot at a given rate — the
schedulers' marginal gains are differences of it — and (ii) the utility of a finished job.
D is a job's compute-only duration at its requested size, x = rate / (requested GPUs / tau)
its normalised speed.

- `jct`: completion-time utility, a sigmoid of JCT/D: 1 / (1 + exp(JCT/D - 2)); per slot, of
  the JCT the job would reach at this rate.
- `excess`: excessive-training avoidance: progress counts only up to the remaining work; the
  total is sum D/JCT.
- `energy`: `excess` minus an energy price: 0.3 per requested-size worth of GPUs for the time
  they run (so more GPUs pay only while they speed the job up enough); the total charges
  0.3 x GPU-seconds / (requested GPUs x D).
- `fair`: alpha-fair (alpha = 1: log) utility of normalised speed.
- `loss`: the concave alternative to `excess`: each job's training loss follows a convergence
  curve l(x) = 1 / (LOSS_B x + 1) of its progress x (share of its required work done), the
  a/(b k + 1) + c shape of SGD loss curves (as SLAQ and Optimus fit them) with a = 1, c = 0; a
  slot is worth the loss it removes, l(x) - l(x + dx), so work early in a job's training is worth
  more than late work (diminishing returns, no reward for training past convergence); the total
  is the loss reduction each finished job reached, l(0) - l(1), times its normalised speed D/JCT.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arsched.errors import ArschedError

OBJECTIVES = ("jct", "excess", "energy", "fair", "loss")
ENERGY_PRICE = 0.3
FAIR_EPS = 0.01
LOSS_B = 9.0  # l(x) = 1 / (9x + 1): the required work removes 90 % of the loss


def loss_curve(x: np.ndarray | float) -> np.ndarray:
    """Normalised training loss after a share x of the required work: 1 / (LOSS_B x + 1)."""
    return 1.0 / (LOSS_B * np.asarray(x, dtype=float) + 1.0)


def _alpha_fair(x: np.ndarray, alpha: float) -> np.ndarray:
    if alpha == 1.0:
        return np.log((x + FAIR_EPS) / FAIR_EPS)
    return ((x + FAIR_EPS) ** (1 - alpha) - FAIR_EPS ** (1 - alpha)) / (1 - alpha)


@dataclass(frozen=True)
class Objective:
    name: str = "jct"
    alpha: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise ArschedError(f"objective {self.name!r} is not one of {', '.join(OBJECTIVES)}")

    def slot_value(
        self,
        rate: np.ndarray,
        w: np.ndarray,
        remaining: np.ndarray,
        age: np.ndarray,
        ref_rate: np.ndarray,
        duration: np.ndarray,
        gpus: np.ndarray,
        dt: float,
    ) -> np.ndarray:
        """Value of one slot at `rate` (work/s) with w workers; arrays per job, broadcastable."""
        if self.name == "jct":
            with np.errstate(divide="ignore"):
                jct = age + np.where(rate > 0, remaining / np.maximum(rate, 1e-300), np.inf)
            return 1.0 / (1.0 + np.exp(np.minimum(jct / duration - 2.0, 700.0)))
        if self.name == "loss":  # the work is D x ref_rate
            work = duration * ref_rate
            done = 1.0 - remaining / work
            return loss_curve(done) - loss_curve(done + np.minimum(rate * dt, remaining) / work)
        progress = np.minimum(rate * dt, remaining) / (ref_rate * dt)
        if self.name == "excess":
            return progress
        if self.name == "energy":  # GPUs are paid for the part of the slot the job runs
            with np.errstate(divide="ignore", invalid="ignore"):
                used = np.where(rate > 0, np.minimum(1.0, remaining / (np.maximum(rate, 1e-300) * dt)), 0.0)
            return progress - ENERGY_PRICE * w / gpus * used
        return _alpha_fair(rate / ref_rate, self.alpha)

    def total(
        self, jct: np.ndarray, duration: np.ndarray, gpu_seconds: np.ndarray, gpus: np.ndarray
    ) -> float:
        """Utility of the finished jobs (unfinished ones count 0)."""
        done = np.isfinite(jct)
        speed = np.where(done, duration / np.where(done, jct, 1.0), 0.0)
        if self.name == "jct":
            u = np.where(
                done, 1.0 / (1.0 + np.exp(np.minimum(np.where(done, jct, 0) / duration - 2.0, 700))), 0
            )
        elif self.name == "excess":
            u = speed
        elif self.name == "loss":
            u = (loss_curve(0.0) - loss_curve(1.0)) * speed
        elif self.name == "energy":
            u = speed - ENERGY_PRICE * gpu_seconds / (gpus * duration)
        else:
            u = np.where(done, _alpha_fair(speed, self.alpha), 0.0)
        return float(u.sum())
