"""`hrl`: the learned hierarchical scheduler (after arXiv 2503.21013) as a registered algorithm.

It runs a policy trained by `arsched train` (see `arsched.rl`): the upper network picks the
chunk count and pipeline stages and every chunk's flow tree from the instance's library, the
lower network builds the rounds. Without `checkpoint` it runs the general policy shipped in
`arsched/rl/checkpoints/default` (its meta.json holds the `arsched train` command that made
it). It runs the networks in numpy (`forward`): torch, the `rl` extra, is for training only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from arsched.algorithms.flowtrees import SHAPES
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError
from arsched.rl.checkpoint import DEFAULT, load_policy
from arsched.rl.instance import Instance
from arsched.rl.rollout import Timer, run
from arsched.topology.core import Topology


@register("hrl", "hierarchical RL: learned chunks and stages, tree per chunk and rounds (GNN policy)")
def hrl(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    checkpoint: str | Path | None = None,
    samples: int = 1,
    seed: int = 0,
) -> Schedule:
    """Run a trained policy (default: the shipped one) deterministically; with `samples` k > 1,
    keep the fastest in the flow model (α = 5 µs) of the deterministic episode and k − 1
    seeded samples (an inference-time search, reported as such)."""
    if not (isinstance(samples, int) and not isinstance(samples, bool) and samples >= 1):
        raise ArschedError(f"hrl: samples must be a positive integer, got {samples!r}")
    inst = Instance(topology, ranks, nbytes)
    policy, meta = load_policy(Path(DEFAULT if checkpoint is None else checkpoint))
    # the shipped policy is recorded as null, not as the folder it is installed in, so that the
    # same inputs give the same bytes wherever arsched is installed
    recorded = None if checkpoint is None else str(checkpoint)
    info = {"params": {"checkpoint": recorded, "samples": samples}, "seed": seed}
    timer = Timer(DEFAULT_ALPHA) if samples > 1 else None
    best = run(inst, policy, timer, meta=info)
    rng = np.random.default_rng(seed)
    for _ in range(samples - 1):
        t = run(inst, policy, timer, "sample", rng, info)
        if t.time_s < best.time_s:
            best = t
    schedule = best.schedule
    shapes = [SHAPES[k] for kind, _, k in best.choices if kind == "tree"]
    schedule.meta["hrl"] = {
        "chunks": len(shapes),
        "stages": inst.chunk_options[best.choices[0][2]][1],
        "trees": {s: shapes.count(s) for s in SHAPES if s in shapes},
        "trained_on": meta.get("topologies"),
        "warm_start": meta.get("warm_start"),
    }
    return schedule
