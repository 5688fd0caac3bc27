"""Search baselines for the learned scheduler, over the same action space and paid in the same
currency: flow-model simulations (`Timer.calls`).

- `random_restarts`: episodes with uniformly random decisions (chunk count, tree per chunk,
  round order), the fastest kept;
- `sampled_restarts`: episodes sampled from a fixed policy (the warm start: greedy-trees'
  imitation, without any policy-gradient update), the fastest kept — what the same networks
  and the same number of simulations give without learning from them.

Both are given as many simulations as training and inference used, so that a comparison with
`hrl` is at equal compute (benchmarks/bench_rl.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from arsched.rl.forward import Frozen
from arsched.rl.instance import Instance
from arsched.rl.rollout import Timer, Trajectory, run

if TYPE_CHECKING:
    from arsched.rl.nets import Policy


def restarts(
    inst: Instance, timer: Timer, calls: int, seed: int, policy: Policy | Frozen | None = None
) -> tuple[Trajectory, list[float]]:
    """The fastest of `calls` episodes (uniformly random without `policy`, else sampled from
    it; the first one the policy's deterministic episode) and the best gap after each call
    (the search's curve)."""
    rng = np.random.default_rng(seed)
    best, curve = None, []
    for i in range(calls):
        if policy is None:
            t = run(inst, None, timer, "random", rng)
        else:
            t = run(inst, policy, timer, "policy" if i == 0 else "sample", rng)
        if best is None or t.gap < best.gap:
            best = t
        curve.append(best.gap)
    return best, curve
