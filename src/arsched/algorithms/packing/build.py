"""The `tree-packing` builder: a packing of spanning trees (`lp.pack`) scheduled as pipelined
trees (`pipeline`) or as balanced steps (`balanced`), whichever is faster with barriers.

Where the pipeline's time with barriers is more than `NEAR` above the cut bound, the builder
also weighs the balanced steps, which remove the fill and drain that pipelined deep trees pay
for, and uses them where their time with barriers is below the pipeline's. The schedule's
`params` record the choice: `units` and `stages` of a pipeline, or `levels: true` for the
balanced steps.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Callable, Sequence

import numpy as np

from arsched.algorithms import registry
from arsched.algorithms.common import check_nbytes, check_ranks
from arsched.algorithms.composed import join
from arsched.algorithms.fastest import check_channels, fastest, fastest_channels
from arsched.algorithms.packing.balanced import BalancedPlan, add_balanced, balance
from arsched.algorithms.packing.directed import DirectedPacking, pack_directed, symmetric
from arsched.algorithms.packing.lp import MAX_ITERATIONS, Packing, pack
from arsched.algorithms.packing.pipeline import (
    SELECT_TRANSFERS,
    UNITS,
    add_sends_pipeline,
    choose_pipeline,
    choose_stages,
    deal,
    default_stages,
    stage_candidates,
    step_overhead,
)
from arsched.algorithms.registry import NotApplicable, register
from arsched.algorithms.routes import Routes, route
from arsched.algorithms.trees import Sends, in_out_sends, tree_edges, tree_heights, tree_sends
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError, NotFaster, OutOfTime
from arsched.limits import LimitError
from arsched.sim import simulate_flow
from arsched.topology.core import Topology

log = logging.getLogger(__name__)

MAX_RANKS = 256  # the LP has a row per link and a variable per tree over the n(n − 1)/2 rank pairs
NAME = "tree-packing"
NEAR = 0.02  # a pipeline this close to the bound (with barriers) is kept without weighing balanced steps
SELECT_INSTANTS = 100_000  # the pipeline and channel choices' simulations stop after this many event instants


def positive_int(value: object, name: str) -> int:
    """`value` as an int; an ArschedError naming the parameter `name` unless it is ≥ 1."""
    if not (isinstance(value, (int, np.integer)) and value >= 1):
        raise ArschedError(f"tree-packing: {name} must be a positive integer, got {value!r}")
    return int(value)


@register(NAME, "spanning trees weighted by an LP (column generation): bandwidth-optimal packing")
def tree_packing(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    units: int | None = None,
    stages: int | None = None,
    alpha: float = DEFAULT_ALPHA,
    iterations: int = MAX_ITERATIONS,
    seed: int = 0,
    levels: bool | None = None,
    channels: int | None = None,
) -> Schedule:
    """Tree packing (ForestColl's spanning trees, scheduled for a runtime).

    `units` parallel pipelines (default `UNITS`) of `stages` steps (default `default_stages`,
    tuned for a per-transfer overhead `alpha`; with neither given, `choose_pipeline` picks
    both, perhaps no pipeline), over trees from at most `iterations` rounds of column
    generation; `seed` for the jittered tree prices. `levels` chooses the balanced steps of
    `balanced.balance` (each chunk crosses its tree once, no pipeline): True always, False never, and
    by default (None, with neither `units` nor `stages` given) where the pipeline's time with
    barriers is more than `NEAR` above the bound and theirs is shorter. The schedule goes over
    `channels` connections per rank pair (None: one or two, whichever the flow model at
    `alpha` times faster within `SELECT_INSTANTS`, `fastest_channels`: on an MI250 box pair at
    16 MB two channels take 2.26× the bound where one takes 3.04×, on DCell(4,1) 1.22× against
    1.15×). Beyond `MAX_RANKS` ranks it places balanced steps only, which need no LP (and so no
    pipeline, and no directed trees: NotApplicable there), on one channel unless told."""
    channels = check_channels(channels, NAME)
    schedule = _tree_packing(topology, ranks, nbytes, alpha, seed, units, stages, iterations, levels)
    if channels is None and len(schedule.ranks) > MAX_RANKS:  # timing two would take minutes
        channels = 1
    return fastest_channels(schedule, alpha, channels, max_instants=SELECT_INSTANTS)


def _tree_packing(
    topology: Topology,
    ranks: Sequence[str] | None,
    nbytes: float,
    alpha: float,
    seed: int,
    units: int | None,
    stages: int | None,
    iterations: int,
    levels: bool | None,
) -> Schedule:
    """`tree_packing` on one channel."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    n = len(rs)
    big = n > MAX_RANKS  # balanced steps only: they need no LP
    if big and (levels is False or units is not None or stages is not None or not symmetric(topology)):
        raise NotApplicable(
            f"tree-packing takes more than {MAX_RANKS} ranks only as balanced steps (levels): its "
            "pipelines and its directed trees need an LP that grows with the rank pairs"
        )
    if not (float(alpha) >= 0 and np.isfinite(alpha)):
        raise ArschedError(f"tree-packing: alpha must be a non-negative number of seconds, got {alpha!r}")
    if levels is not None and not isinstance(levels, bool):
        raise ArschedError(f"tree-packing: levels must be true or false, got {levels!r}")
    if levels and (units is not None or stages is not None):
        raise ArschedError("tree-packing: levels replace the pipeline: give units and stages or levels")
    if not levels and not symmetric(topology):
        if levels is None and units is None and stages is None:
            return _directed_default(topology, rs, nbytes, alpha, iterations, seed)
        packed = pack_directed(topology, rs, positive_int(iterations, "iterations"))
        return _directed_schedule(topology, rs, nbytes, packed, units, stages, alpha, iterations, seed)
    overhead = step_overhead(topology, alpha)
    if big:
        plan = balance(topology, rs, nbytes, overhead)
        iterations = positive_int(iterations, "iterations")
        return _balanced_schedule(topology, rs, nbytes, plan, None, alpha, iterations, seed)
    packing = pack(topology, rs, positive_int(iterations, "iterations"), seed)
    if levels:
        plan = balance(topology, rs, nbytes, overhead)
        return _balanced_schedule(topology, rs, nbytes, plan, packing, alpha, iterations, seed)
    routes = route(topology, rs, *tree_edges(packing.parents))
    sends = [tree_sends(parent) for parent in packing.parents]
    timed = units is None and stages is None
    if timed:
        units, stages, time = choose_pipeline(packing, routes, topology, nbytes, alpha)
        bound = nbytes / packing.limit
        log.info(
            "tree-packing: pipeline of %d units x %d stages, %.3f x the bound", units, stages, time / bound
        )
        if levels is None and time > bound * (1 + NEAR):
            plan = balance(topology, rs, nbytes, overhead)
            log.info("tree-packing: balanced steps, R = %d, %.3f x the bound", plan.steps, plan.time / bound)
            if plan.time < time:
                return _balanced_schedule(topology, rs, nbytes, plan, packing, alpha, iterations, seed)
    args = (topology, rs, nbytes, packing, sends, routes, units, stages, alpha, iterations, seed)
    return _pipeline(*args, timed=timed)


def _balanced_schedule(
    topology: Topology,
    ranks: tuple[str, ...],
    nbytes: float,
    plan: BalancedPlan,
    packing: Packing | None,
    alpha: float,
    iterations: int,
    seed: int,
) -> Schedule:
    """The schedule of a balanced plan, with the packing's rates (where there is one) in its meta
    for comparison."""
    b = ScheduleBuilder(
        topology,
        ranks,
        nbytes,
        len(plan.columns),
        NAME,
        {
            "params": {"levels": True, "alpha": alpha, "iterations": iterations},
            "seed": seed,
            **({} if packing is None else {"lp_rate": packing.rate, "lp_optimum": packing.optimum}),
            "level_time": plan.time,
            "level_steps": plan.steps,
            "trees": len({parent.tobytes() for parent, _ in plan.columns}),
            "max_height": max(int(tree_heights(parent).max()) for parent, _ in plan.columns),
        },
    )
    add_balanced(b, plan)
    return b.build()


def _directed_schedule(
    topology: Topology,
    ranks: tuple[str, ...],
    nbytes: float,
    packing: DirectedPacking,
    units: int | None,
    stages: int | None,
    alpha: float,
    iterations: int,
    seed: int,
) -> Schedule:
    """The pipelined schedule of a directed packing: every piece's chunks up its in-tree and down
    its out-tree (`in_out_sends`), the pipeline chosen as for the undirected trees."""
    sends = [in_out_sends(i, o) for i, o in zip(packing.ins, packing.outs, strict=True)]
    routes = route(
        topology, ranks, np.concatenate([x[0] for x in sends]), np.concatenate([x[1] for x in sends])
    )
    timed = units is None and stages is None
    if timed:
        units, stages, time = choose_stages(
            sends, packing.weights, packing.rate, routes, topology, nbytes, alpha
        )
        log.info(
            "tree-packing: directed pipeline of %d units x %d stages, %.3f x the bound",
            units,
            stages,
            time * packing.limit / nbytes,
        )
    args = (topology, ranks, nbytes, packing, sends, routes, units, stages, alpha, iterations, seed)
    return _pipeline(*args, kind="directed", timed=timed)


def _directed_default(
    topology: Topology, ranks: tuple[str, ...], nbytes: float, alpha: float, iterations: int, seed: int
) -> Schedule:
    """The directed AllReduce by default: tree packing's ReduceScatter then its AllGather, each
    over shortest-path trees placed level by level, which have no fill or drain (`_halves`;
    ForestColl composes its AllReduce of the same two halves), where the flow model times them
    within `NEAR` of the bound; else the faster of them and the directed pipeline. On a one-way
    4×3 torus the halves take 1.003× the bound at 256 MB and 1.051× at 16 MB, the pipeline
    1.045× and 1.233× (`benchmarks/bench_directed.py`); on a ring with a slower way back (none
    of its shortest paths use it) the halves are far slower and the pipeline is kept."""
    halves = _halves(topology, ranks, nbytes, alpha, iterations)
    best = math.inf
    if halves is not None:
        with contextlib.suppress(OutOfTime, LimitError):
            timed = simulate_flow(halves, alpha, max_instants=SELECT_INSTANTS)
            if timed.gap <= 1 + NEAR:
                return halves
            best = timed.time_s
    packed = pack_directed(topology, ranks, positive_int(iterations, "iterations"))
    piped = _directed_schedule(topology, ranks, nbytes, packed, None, None, alpha, iterations, seed)
    if best == math.inf:  # no halves, or too long to time
        return piped
    try:
        faster = simulate_flow(piped, alpha, give_up_above=best, max_instants=SELECT_INSTANTS).time_s < best
    except (NotFaster, OutOfTime, LimitError):
        faster = False
    return piped if faster else halves


def _halves(
    topology: Topology, ranks: tuple[str, ...], nbytes: float, alpha: float, iterations: int
) -> Schedule | None:
    """Tree packing's ReduceScatter (in-trees) then AllGather (out-trees), both unpipelined
    (`levels`), joined into an AllReduce (`composed.join`); None where they do not apply."""
    try:
        parts = [
            registry.build(NAME, topology, ranks, nbytes, c, alpha=alpha, iterations=iterations, levels=True)
            for c in ("reduce_scatter", "allgather")
        ]
    except NotApplicable:
        return None
    params = {"halves": True, "alpha": alpha, "iterations": iterations}
    return join(*parts, NAME, params, {"packing": "directed"})


def _timed_pipeline(
    make: Callable[..., Schedule], first: tuple[int, int], stages: int, ranks: int, alpha: float
) -> Schedule:
    """The fastest in the flow model of the pipeline `first` (units, stages), the pick by the
    time with barriers, and the other `stage_candidates` around `stages` (`default_stages`), as
    many as fit in `SELECT_TRANSFERS`, each simulation cut after `SELECT_INSTANTS` event instants
    (`fastest`); `make(units, stages)` builds one over `ranks` ranks. Barrier times misjudge
    pipelines of deep trees: on a one-way 4×3 torus (trees 14 hops high) the pick, 32 units of
    52 stages, is 1.083× the bound at 256 MB and the fastest candidate 1.045×; at 16 MB 1.363×
    and 1.233× (`benchmarks/bench_directed.py`)."""
    options = stage_candidates(first, stages)
    per_chunk = 2 * (ranks - 1)  # every chunk crosses its trees' n − 1 edges up and down
    return fastest(
        make(*first),
        [functools.partial(make, u, s) for u, s in options[1:]],
        [u * s * per_chunk for u, s in options[1:]],
        alpha,
        SELECT_TRANSFERS,
        SELECT_INSTANTS,
    )


def _pipeline(
    topology: Topology,
    ranks: tuple[str, ...],
    nbytes: float,
    packing: Packing | DirectedPacking,
    sends: list[Sends],
    routes: Routes,
    units: int | None,
    stages: int | None,
    alpha: float,
    iterations: int,
    seed: int,
    kind: str | None = None,
    timed: bool = False,
) -> Schedule:
    """The pipelined schedule of the packing's trees (or pieces) given by their sends
    (`tree_sends`, `in_out_sends`) on `routes`, or with `timed` the fastest of it and the other
    `stage_candidates` (`_timed_pipeline`); `kind` names a packing other than the
    undirected one in the meta."""
    if timed:
        args = (topology, ranks, nbytes, packing, sends, routes)
        make = functools.partial(_pipeline, *args, alpha=alpha, iterations=iterations, seed=seed, kind=kind)
        around = default_stages(packing.rate, topology, nbytes, alpha)
        return _timed_pipeline(make, (units, stages), around, len(ranks), alpha)
    if stages is None:
        stages = default_stages(packing.rate, topology, nbytes, alpha)
    stages = positive_int(stages, "stages")
    units = positive_int(UNITS if units is None else units, "units")
    count = deal(packing.weights, units * stages)
    meta: dict = {
        "params": {"units": units, "stages": stages, "alpha": alpha, "iterations": iterations},
        "seed": seed,
    }
    if kind is not None:
        meta["packing"] = kind
    meta |= {
        "lp_rate": packing.rate,
        "lp_optimum": packing.optimum,
        "trees": int((count > 0).sum()),
        "max_height": int(packing.heights[count > 0].max()),
    }
    b = ScheduleBuilder(topology, ranks, nbytes, units * stages, NAME, meta)
    used = [x if c else None for x, c in zip(sends, count.tolist(), strict=True)]
    add_sends_pipeline(b, used, count, stages, routes)
    return b.build()
