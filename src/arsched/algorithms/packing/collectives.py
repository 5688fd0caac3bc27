"""The `tree-packing` builders of AllGather, ReduceScatter, Broadcast and Reduce: a packing of
arborescences (`forest.pack_forest`) scheduled as pipelined trees.

Every root's data (its shard, or the root's whole buffer) is cut into chunks dealt to the root's
trees in proportion to their rates (`pipeline.deal`), and every tree's chunks are spread evenly
over `stages` pipeline steps, as AllReduce's pipelined trees are (`pipeline`): a chunk is copied
down an out-tree (a rank at depth d receives it in step d − 1 after its entry) or summed up an
in-tree (a rank of height h adds into its parent in step h, after its children), every transfer
on the route its tree arc was priced with. A sharded collective's root gets ⌈units·stages / N⌉
chunks, and at least one per tree.

Unless given, the units and stages are the fastest in the flow model (in-order connections) of
a few candidates (`pipeline.stage_candidates`): `choose_stages`' pick by the time with barriers, and the
pipeline length of `default_stages` halved, quartered and doubled over one and two `UNITS`.
Barrier times cannot see what sets these collectives' time: every transfer on a connection
waits α before its bytes, so more chunks pay α more often, and fewer fill deep trees slowly;
the simulation weighs both. The candidates after the first are simulated while their transfers
add up to at most `SELECT_TRANSFERS` (a bound on work, not on the clock, so that the same inputs
give the same schedule on any machine); `SELECT_SECONDS` only guards against a simulation far
slower than usual (the choice then depends on the machine, and the meta says so).

Broadcast and Reduce also weigh, where every link has a reverse of the same bandwidth, the
reversal (`arsched.collective.reverse`) of the other one's schedule: on two A100 boxes the
reversed Broadcast is a faster Reduce than the in-trees' own (their chunks are summed in the
order the leaves send them, not one pipeline step after another), on a torus the reversed
Reduce a faster Broadcast (`benchmarks/bench_collectives.py`).

ReduceScatter and AllGather also weigh, where the fastest pipeline is more than `NEAR` above the
bound (as AllReduce's tree packing does), two schedules without a pipeline, in which each chunk
crosses its tree once and every link is about as busy in every step (no fill or drain): the
shortest-path trees placed level by level (`levels`, any network) and, where every link has an
equal reverse link, the halves (`halves.half`) of the AllReduce's balanced steps (`balanced`)
with as many chunks rooted at every rank. The fastest in the flow model is kept (`levels`
forces one side).
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, check_root
from arsched.algorithms.halves import half
from arsched.algorithms.packing.balanced import add_balanced, balance, chunk_count
from arsched.algorithms.packing.build import MAX_RANKS, NAME, NEAR, positive_int
from arsched.algorithms.packing.directed import symmetric
from arsched.algorithms.packing.forest import Forest, pack_forest
from arsched.algorithms.packing.levels import level_schedule
from arsched.algorithms.packing.lp import MAX_ITERATIONS
from arsched.algorithms.packing.pipeline import (
    SELECT_TRANSFERS,
    UNITS,
    choose_stages,
    deal,
    default_stages,
    stage_candidates,
    step_overhead,
)
from arsched.algorithms.registry import NotApplicable, register
from arsched.algorithms.routes import Routes, intern, route
from arsched.algorithms.trees import Sends, tree_depths, tree_heights
from arsched.collective.kinds import ROOTED
from arsched.collective.reverse import DUAL, reverse
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError, NotFaster, OutOfTime
from arsched.limits import check_schedule
from arsched.sim.flow import simulate_flow
from arsched.sim.result import check_alpha
from arsched.topology.core import Topology

SELECT_SECONDS = 60.0  # a guard only: past it no further candidate is simulated


def forest_schedule(
    collective: str,
    topology: Topology,
    ranks: Sequence[str] | None,
    nbytes: float,
    units: int | None,
    stages: int | None,
    alpha: float,
    iterations: int,
    root: str | None = None,
    levels: bool | None = None,
    dual: bool = True,
) -> Schedule:
    """Tree packing of `collective` (see the module docstring); `units` parallel pipelines of
    `stages` steps over trees from at most `iterations` rounds of column generation, tuned for a
    per-transfer overhead `alpha`; for ReduceScatter and AllGather, `levels` True takes the
    fastest schedule without a pipeline (`_unpipelined`), False never, None where the pipeline
    is more than `NEAR` above the bound and it is faster; for Broadcast and Reduce with `dual`,
    the reversal of the other one's schedule where it is faster. Beyond `MAX_RANKS` ranks, with
    no LP, ReduceScatter and AllGather are the balanced steps' half (`_balanced_half`)."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    alpha = check_alpha(alpha)
    rooted = collective in ROOTED
    root = check_root(rs, root, NAME) if rooted else None
    if levels is not None and not isinstance(levels, bool):
        raise ArschedError(f"{NAME}: levels must be true or false, got {levels!r}")
    if levels and (units is not None or stages is not None):
        raise ArschedError(f"{NAME}: levels replace the pipeline: give units and stages or levels")
    if len(rs) > MAX_RANKS:  # no LP: the balanced steps' half alone, where there is one
        if rooted or levels is False or units is not None or stages is not None or not symmetric(topology):
            raise NotApplicable(
                f"{NAME} takes more than {MAX_RANKS} ranks only for ReduceScatter and AllGather as the "
                "half of its balanced AllReduce steps, on links with equal reverses: the rest needs an "
                "LP that grows with the rank pairs"
            )
        return _balanced_half(collective, topology, rs, nbytes, alpha)
    if levels:
        unpipelined = _unpipelined(collective, topology, rs, nbytes, alpha)
        if unpipelined is None:
            raise NotApplicable(
                f"{NAME}: no schedule without a pipeline for {len(rs)} ranks of {topology.name}"
            )
        return unpipelined[0]
    forest = pack_forest(
        topology, rs, collective, rs.index(root) if rooted else None, positive_int(iterations, "iterations")
    )
    sends = [_sends(forest.kind, p) for p in forest.parents]
    routes = route(topology, rs, np.concatenate([x[0] for x in sends]), np.concatenate([x[1] for x in sends]))
    total = float(forest.weights.sum())  # bytes/s over all roots: the whole buffer takes nbytes / total
    meta = {"params": {"alpha": alpha, "iterations": iterations}, "lp_rate": forest.rate}
    meta["lp_optimum"] = forest.optimum
    args = (topology, rs, nbytes, collective, root, forest, sends, routes, meta)
    schedule = functools.partial(_pipelined, *args)
    if units is not None or stages is not None:
        stages = positive_int(
            default_stages(total, topology, nbytes, alpha) if stages is None else stages, "stages"
        )
        return schedule(positive_int(UNITS if units is None else units, "units"), stages)
    first = choose_stages(sends, forest.weights, total, routes, topology, nbytes, alpha)[:2]
    best, gap = _fastest(
        schedule, stage_candidates(first, default_stages(total, topology, nbytes, alpha)), alpha
    )
    if rooted and dual and symmetric(topology):  # every route has its way back
        args = (DUAL[collective], topology, rs, nbytes, None, None, alpha, iterations, root)
        other = reverse(forest_schedule(*args, dual=False))
        return other if simulate_flow(other, alpha).gap < gap else best
    if levels is None and not rooted and gap > 1 + NEAR:
        unpipelined = _unpipelined(collective, topology, rs, nbytes, alpha)
        if unpipelined is not None and unpipelined[1] < gap:
            return unpipelined[0]
    return best


def _unpipelined(
    collective: str, topology: Topology, rs: tuple[str, ...], nbytes: float, alpha: float
) -> tuple[Schedule, float] | None:
    """The fastest in the flow model, and its gap, of the sharded `collective`'s schedules
    without a pipeline: the balanced steps' half where every link has an equal reverse link
    (first, so it is kept on a tie), the level-placed trees where not too many to place; None
    where neither applies."""
    options = [_balanced_half(collective, topology, rs, nbytes, alpha)] if symmetric(topology) else []
    with contextlib.suppress(NotApplicable):  # too many ranks to place
        options.append(level_schedule(collective, topology, rs, nbytes))
    gaps = [simulate_flow(s, alpha).gap for s in options]
    return (options[int(np.argmin(gaps))], min(gaps)) if options else None


def _balanced_half(
    collective: str, topology: Topology, rs: tuple[str, ...], nbytes: float, alpha: float
) -> Schedule:
    """The `collective` half of tree packing's balanced AllReduce steps, over a multiple of N
    chunks (chunk k rooted at rank k mod N), so that every rank owns a shard."""
    n = len(rs)
    plan = balance(
        topology, rs, nbytes, step_overhead(topology, alpha), chunks=max(1, chunk_count(n, nbytes) // n) * n
    )
    meta = {"params": {"levels": True, "alpha": alpha}, "level_time": plan.time, "level_steps": plan.steps}
    b = ScheduleBuilder(topology, rs, nbytes, len(plan.columns), NAME, meta)
    add_balanced(b, plan)
    return half(b.build(), collective)


def _fastest(
    schedule: Callable[[int, int], Schedule], options: list[tuple[int, int]], alpha: float
) -> tuple[Schedule, float]:
    """The schedule of `options` (units, stages) that is fastest in the flow model, and its gap;
    the first is simulated in full, each other one if its transfers fit in what is left of
    `SELECT_TRANSFERS` (and `SELECT_SECONDS` have not passed)."""
    deadline = time.monotonic() + SELECT_SECONDS
    best = schedule(*options[0])
    first = simulate_flow(best, alpha)
    best_time, bound = first.time_s, first.bound_s
    left = SELECT_TRANSFERS
    cut = False
    for option in options[1:]:
        s = schedule(*option)
        if len(s) > left:
            continue
        left -= len(s)
        try:
            t = simulate_flow(s, alpha, deadline=deadline, give_up_above=best_time).time_s
        except NotFaster:  # no faster than the best: a lower bound on its time says so
            continue
        except OutOfTime:
            cut = True
            break
        if t < best_time:
            best, best_time = s, t
    if cut:
        best.meta["selection"] = f"cut after {SELECT_SECONDS:g} s: the choice depends on the machine"
    return best, best_time / bound


def _pipelined(
    topology: Topology,
    rs: tuple[str, ...],
    nbytes: float,
    collective: str,
    root: str | None,
    forest: Forest,
    sends: list[Sends],
    routes: Routes,
    meta: dict,
    units: int,
    stages: int,
) -> Schedule:
    """The schedule of `forest` in `units` × `stages` chunks (see the module docstring)."""
    n = len(rs)
    owners = np.unique(forest.roots)
    per = units * stages
    if root is None:
        per = max(math.ceil(per / n), int(np.bincount(forest.roots).max()))
    count = np.concatenate([deal(forest.weights[forest.roots == r], per) for r in owners])
    chunks = per * len(owners)
    check_schedule(NAME, n, chunks, chunks * (n - 1))
    meta = {
        **meta,
        "params": {"units": units, "stages": stages, **meta["params"]},
        "trees": int((count > 0).sum()),
        "max_height": int(forest.heights[count > 0].max()),
    }
    b = ScheduleBuilder(topology, rs, nbytes, chunks, NAME, meta, collective=collective, root=root)
    _add(b, forest, sends, count, stages, routes)
    return b.build()


def _sends(kind: int, parent: np.ndarray) -> Sends:
    """(sources, destinations, steps) of a chunk's sends on one tree relative to its entry: down
    an out-tree (kind 1) to a rank of depth d in step d − 1, or up an in-tree (kind 0) from a
    rank of height h in step h."""
    kids = np.flatnonzero(parent >= 0)
    if kind:
        return parent[kids], kids, tree_depths(parent)[kids] - 1
    return kids, parent[kids], tree_heights(parent)[kids]


def _add(
    b: ScheduleBuilder, forest: Forest, sends: list[Sends], count: np.ndarray, stages: int, routes: Routes
) -> None:
    """Tree i's `count[i]` chunks (numbered tree by tree, so that a root's chunks are its shard)
    spread evenly over `stages` steps, each crossing the tree's arcs on their `routes`."""
    op = "copy" if forest.kind else "reduce"
    paths = intern(b, routes, np.concatenate([x[0] for x in sends]), np.concatenate([x[1] for x in sends]))
    first = 0
    for (src, dst, at), c in zip(sends, count.tolist(), strict=True):
        if not c:
            continue
        entry = np.arange(c) * stages // c  # chunk k enters the pipeline in this step
        step = (entry[:, None] + at[None, :]).ravel()
        chunk = np.repeat(np.arange(first, first + c), len(src))
        b.add_rank_arrays(step, chunk, np.tile(src, c), np.tile(dst, c), op, np.tile(paths[src, dst], c))
        first += c


def _sharded(collective: str):
    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        units: int | None = None,
        stages: int | None = None,
        alpha: float = DEFAULT_ALPHA,
        iterations: int = MAX_ITERATIONS,
        levels: bool | None = None,
    ) -> Schedule:
        return forest_schedule(
            collective, topology, ranks, nbytes, units, stages, alpha, iterations, levels=levels
        )

    build.__doc__ = (
        f"Tree packing {collective}: {'out' if collective == 'allgather' else 'in'}-trees at every rank."
    )
    return build


def _rooted(collective: str):
    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        units: int | None = None,
        stages: int | None = None,
        alpha: float = DEFAULT_ALPHA,
        iterations: int = MAX_ITERATIONS,
        root: str | None = None,
    ) -> Schedule:
        return forest_schedule(collective, topology, ranks, nbytes, units, stages, alpha, iterations, root)

    build.__doc__ = (
        f"Tree packing {collective}: {'out' if collective == 'broadcast' else 'in'}-trees at the root."
    )
    return build


register(NAME, "", "allgather")(_sharded("allgather"))
register(NAME, "", "reduce_scatter")(_sharded("reduce_scatter"))
register(NAME, "", "broadcast")(_rooted("broadcast"))
register(NAME, "", "reduce")(_rooted("reduce"))
