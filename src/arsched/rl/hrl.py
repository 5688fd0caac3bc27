"""`hrl`: the learned hierarchical scheduler (after arXiv 2503.21013) as a registered algorithm.

It runs a policy trained by `arsched train` (see `arsched.rl`): the upper network picks the
chunk count and pipeline stages and every chunk's flow tree from the instance's library, the
lower network builds the rounds. Without `checkpoint` it runs the general policy shipped in
`arsched/rl/checkpoints/default` (its meta.json holds the `arsched train` command that made
it). It runs the networks in numpy (`forward`): torch, the `rl` extra, is for training only.

With `fallback` (the default) it also replays greedy-trees' plan, the heuristic its warm start
begins from, and keeps that where the flow model times it faster: a policy meets networks
unlike any it was trained on (the shipped one builds 3.6× the bound on two 4-GPU boxes, where
greedy-trees' plan is 1.16×, docs/results.md), and a user asking for `hrl` should not get a
schedule worse than the heuristic under it. The schedule's meta says which one it is
(`hrl.source`); `fallback=False` gives the policy's own, which is what the learning benchmarks
measure.
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
from arsched.rl.rollout import Timer, greedy_plan, run
from arsched.topology.core import Topology

FALLBACK = "greedy-trees' plan (fallback)"  # `meta["hrl"]["source"]` where the fallback was kept


@register("hrl", "hierarchical RL: learned chunks and stages, tree per chunk and rounds (GNN policy)")
def hrl(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    checkpoint: str | Path | None = None,
    samples: int = 1,
    seed: int = 0,
    fallback: bool = True,
) -> Schedule:
    """Run a trained policy (default: the shipped one) deterministically; with `samples` k > 1,
    keep the fastest in the flow model (α = 5 µs) of the deterministic episode and k − 1
    seeded samples (an inference-time search, reported as such); with `fallback`, greedy-trees'
    plan where it is faster still."""
    if not (isinstance(samples, int) and not isinstance(samples, bool) and samples >= 1):
        raise ArschedError(f"hrl: samples must be a positive integer, got {samples!r}")
    if not isinstance(fallback, bool):
        raise ArschedError(f"hrl: fallback must be true or false, got {fallback!r}")
    inst = Instance(topology, ranks, nbytes)
    policy, meta = load_policy(Path(DEFAULT if checkpoint is None else checkpoint))
    # the shipped policy is recorded as null, not as the folder it is installed in, so that the
    # same inputs give the same bytes wherever arsched is installed
    recorded = None if checkpoint is None else str(checkpoint)
    info = {"params": {"checkpoint": recorded, "samples": samples, "fallback": fallback}, "seed": seed}
    timer = Timer(DEFAULT_ALPHA) if samples > 1 or fallback else None
    best = run(inst, policy, timer, meta=info)
    rng = np.random.default_rng(seed)
    for _ in range(samples - 1):
        t = run(inst, policy, timer, "sample", rng, info)
        if t.time_s < best.time_s:
            best = t
    source, compared = "policy", {}
    if fallback:
        heuristic = run(inst, None, timer, "plan", meta=info, plan=greedy_plan(inst))
        compared = {"policy_gap": round(best.gap, 6), "greedy_gap": round(heuristic.gap, 6)}
        if heuristic.time_s < best.time_s:
            best, source = heuristic, FALLBACK
    schedule = best.schedule
    shapes = [SHAPES[k] for kind, _, k in best.choices if kind == "tree"]
    schedule.meta["hrl"] = {
        "source": source,
        **compared,
        "chunks": len(shapes),
        "stages": inst.chunk_options[best.choices[0][2]][1],
        "trees": {s: shapes.count(s) for s in SHAPES if s in shapes},
        "trained_on": meta.get("topologies"),
        "warm_start": meta.get("warm_start"),
    }
    return schedule
