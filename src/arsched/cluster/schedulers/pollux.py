"""Pollux-style goodput-adaptive allocation: the worker counts that maximise a fairness-weighted
sum of the jobs' goodputs, by greedy marginal gains, on consolidated rings.

Source: Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI'21. Pollux values an allocation by each job's goodput, throughput x statistical
efficiency, relative to the goodput of a fair-share allocation (its speedup), and maximises the
p-norm of the speedups over jobs (p = -1 by default: a harmonic mean, which favours the jobs
that gain the most relative to what they have) with a genetic search.

What we keep and what we simplify (our assumptions, not the paper's):
- Statistical efficiency: a gradient-noise-scale model (McCandlish et al. 2018, the one Pollux
  fits online): with the batch growing linearly with the workers, a job of request g on w workers
  makes E(w) = (phi + g) / (phi + w) of the progress per sample it makes at g, phi =
  NOISE_SCALE x g (in workers; a constant of ours, where Pollux measures the noise scale during
  training). The simulator itself counts worker-iterations and charges no efficiency loss, so the
  term only shapes this scheduler's decisions: it is what keeps Pollux from growing a job as far
  as throughput alone would.
- Speedup of job j on w workers: goodput(w) / goodput(g), against the job's own request (the
  rigid allocation) instead of an equal share of the cluster.
- Fitness: the sum of speedup^p / p with p = P_NORM = -1 (the p-norm's ordering, summed so that
  greedy marginal gains apply); a paused job counts at speedup PAUSED_SPEEDUP, so starting a
  job gains much more than growing one, and a small job is started before a large one (the gain
  is per GPU).
- Search: GADGET's greedy of marginal gain per GPU (`gadget.MarginalAllocator`) instead of a
  genetic algorithm, with its candidate sizes (powers of two up to elastic x request, and the
  request; at elastic 1 the request only, so Pollux is then as rigid as every scheduler), its
  restart-aware valuation (a move's cost spread over the job's remaining run), its
  anti-starvation and its placement: the job's previous GPUs, else one server (best fit), else the
  fewest servers, blind to links (Pollux packs a job on as few nodes as it can and models
  communication only through its measured throughput). Pollux's batch-size and learning-rate
  co-adaptation inside a job is out of scope.
"""

from __future__ import annotations

import numpy as np

from arsched.cluster.network import throughput
from arsched.cluster.schedulers.base import Decision, SlotState
from arsched.cluster.schedulers.gadget import MarginalAllocator, Replanner

NOISE_SCALE = 4.0  # phi = 4 x the request, in workers: E(2g) = 5/6, E(4g) = 5/8 (our assumption)
P_NORM = -1.0  # Pollux's default fairness exponent
PAUSED_SPEEDUP = 0.01  # a paused job's speedup in the fitness (speedup 0 would be -inf at p < 0)


def efficiency(w: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Statistical efficiency on w workers of a job that requested g: (phi + g) / (phi + w)."""
    phi = NOISE_SCALE * np.asarray(g, dtype=float)
    return (phi + g) / (phi + np.asarray(w, dtype=float))


class GoodputAllocator(MarginalAllocator):
    """GADGET's greedy valuing every job by the Pollux fitness of its speedup."""

    def __init__(self, state: SlotState) -> None:
        super().__init__(state, aware=False, completion=False)

    def base_goodput(self, js: np.ndarray) -> np.ndarray:
        """Goodput of jobs `js` at their request, on one server when it holds them, else spread."""
        wl, c = self.s.workload, self.s.cluster
        g = wl.gpus[js]
        b = np.where(g <= c.gpus_per_server, c.intra_bandwidth, self.spread_bw)
        return throughput(wl.tau[js], wl.grad_bytes[js], g, b, self.s.alpha)

    def value(
        self, js: np.ndarray, w: np.ndarray, b: np.ndarray, lost: np.ndarray | float = 0.0
    ) -> np.ndarray:
        """speedup^p / p of jobs `js` on w workers at bottleneck b after `lost` s of restart."""
        s, wl = self.s, self.s.workload
        rate = throughput(wl.tau[js], wl.grad_bytes[js], w, b, s.alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(lost > 0, s.remaining[js] / (s.remaining[js] / rate + lost), rate)
        speedup = rate * efficiency(w, wl.gpus[js]) / self.base_goodput(js)
        return np.maximum(np.nan_to_num(speedup), PAUSED_SPEEDUP) ** P_NORM / P_NORM


class Pollux(Replanner):
    name = "pollux"
    about = "Pollux-style: greedy p-norm (p=-1) of goodput speedups, noise-scale efficiency, consolidated"

    def decide(self, state: SlotState) -> Decision:
        return GoodputAllocator(state).run() if len(state.active) else []
