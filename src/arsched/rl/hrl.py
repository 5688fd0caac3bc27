"""`hrl`: the hierarchical deep-RL scheduler (arXiv 2503.21013) as a registered algorithm.

It runs a policy pair trained by `arsched train` (see `arsched.rl`) on the flow-tree round
model: the upper network selects trees each round, the lower one picks the flows. Without
`checkpoint` it runs the small policy shipped in `arsched/rl/checkpoints/default` (its
meta.json holds the `arsched train` command that made it). It needs the `rl` extra (torch,
sb3-contrib); without it, it does not apply and `arsched compare` says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from arsched.algorithms.common import check_nbytes, check_ranks
from arsched.algorithms.registry import NotApplicable, register
from arsched.collective.schedule import Schedule
from arsched.errors import ArschedError
from arsched.topology.core import Topology


@register("hrl", "hierarchical deep RL (arXiv 2503.21013): learned tree selection and flow picking")
def hrl(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    checkpoint: str | Path | None = None,
    samples: int = 1,
    seed: int = 0,
    chunks: int | None = None,
) -> Schedule:
    """Run a trained policy pair (default: the shipped one) deterministically; with `samples`
    k > 1, keep the best of the deterministic episode and k − 1 seeded samples (an
    inference-time search, reported as such)."""
    ranks = check_ranks(topology, ranks, "hrl")
    if not (isinstance(samples, int) and samples >= 1):
        raise ArschedError(f"hrl: samples must be a positive integer, got {samples!r}")
    nbytes = check_nbytes(nbytes, "hrl")
    try:
        from arsched.rl.checkpoint import DEFAULT, load_policies
        from arsched.rl.policy import schedule_with
    except ImportError as e:
        raise NotApplicable(f"hrl needs the rl extra (pip install 'arsched[rl]'): {e}") from None
    policies, meta = load_policies(Path(DEFAULT if checkpoint is None else checkpoint))
    # the shipped policy is recorded as null, not as the folder it is installed in, so that the
    # same inputs give the same bytes wherever arsched is installed
    recorded = None if checkpoint is None else str(checkpoint)
    params = {"checkpoint": recorded, "samples": samples, "chunks": chunks}
    schedule, info = schedule_with(
        topology, policies, ranks, nbytes, chunks, samples, seed, {"params": params, "seed": seed}
    )
    schedule.meta["hrl"] = {
        **info,
        "trained_on": meta.get("topologies"),
        "warm_start": meta.get("warm_start"),
    }
    return schedule
