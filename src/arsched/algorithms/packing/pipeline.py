"""Pipelined tree packing: a packing's rates turned into chunks and pipeline steps, and the
choice of how many.

The vector is cut into `units`·`stages` equal chunks, dealt to the trees in proportion to their
rates (`deal`, largest remainder), and every tree's chunks are spread evenly over `stages`
pipeline steps, about `units`·x_T/X of them entering at each. In every step the trees'
concurrent flows on a link then stand in the LP's proportions, so max-min sharing gives each
tree its LP rate. More stages shorten the pipeline's fill and drain; fewer pay the per-step
overhead (α plus the path latency, `step_overhead`) less often (`default_stages`).
`choose_pipeline` also weighs no pipeline at all (one or two stages, with a chunk or more for
every tree), by the time the steps would take with barriers (`sends_time`): stars on a
fat-tree load every link alike in each step, so pipelining them only adds steps.

Pipelining needs connections that carry their steps in order, as a runtime's channels do:
simulate with `simulate_flow(..., fifo=True)`. Sent all at once (the default flow model),
every chunk on every tree edge shares the links at once and the pipeline does not form.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from arsched.algorithms.packing.lp import Packing
from arsched.algorithms.routes import Routes, intern
from arsched.algorithms.trees import Sends, add_sends, tree_sends
from arsched.collective.schedule import ScheduleBuilder
from arsched.topology.core import Topology

MAX_STAGES = 256
SELECT_TRANSFERS = 1_000_000  # transfers of the pipelines simulated besides the first (`stage_candidates`)
UNITS = 32  # default parallel pipelines: the trees' shares are rounded to 1/(UNITS·stages)


def deal(weights: np.ndarray, chunks: int) -> np.ndarray:
    """Chunks per tree in proportion to the weights, rounded by largest remainder."""
    quota = weights / weights.sum() * chunks
    count = np.floor(quota).astype(np.int64)
    count[np.argsort(-(quota - count), kind="stable")[: chunks - count.sum()]] += 1
    return count


def step_overhead(topology: Topology, alpha: float) -> float:
    """What every step costs a connection besides its bytes: α plus a path latency."""
    return alpha + float(topology.compiled.latency.max()) * 2


def default_stages(rate: float, topology: Topology, nbytes: float, alpha: float) -> int:
    """The pipeline length S = √(T / o), T the LP's time for the size (`rate` the packing's)
    and o = `step_overhead`: the fill and drain cost a few steps of T / S each and the steps
    S·o, and this S minimises T / S + S·o (clipped to 1..`MAX_STAGES`)."""
    steps = np.sqrt(nbytes / rate / step_overhead(topology, alpha))
    return int(np.clip(round(steps), 1, MAX_STAGES))


def sends_time(
    sends: Sequence[Sends],
    weights: np.ndarray,
    routes: Routes,
    capacity: np.ndarray,
    units: int,
    stages: int,
    nbytes: float,
    overhead: float,
) -> float:
    """The time of trees given by their sends (`tree_sends`, `in_out_sends`) and rates if every
    step waited for the previous one (barriers): the sum over steps of the most loaded link's
    bytes / capacity, plus `overhead` per step. Without barriers connections run ahead, so
    this overstates pipelines, but it is exact for a packing whose unpipelined steps load every
    link alike (stars on a fat-tree), which it tells from one that needs pipelining, at the
    cost of two sparse products."""
    n = int(max(routes.src.max(), routes.dst.max())) + 1  # rank indices (pair keys src·n + dst)
    count = deal(weights, units * stages)
    trees = np.flatnonzero(count)
    # rows: (tree, step after its chunk's entry), each with the routed pairs it sends on
    rows, pairs, spans = [], [], []
    num_rows = 0
    for i in trees.tolist():
        src, dst, at = sends[i]
        rows.append(num_rows + at)
        pairs.append(routes.index(src, dst, n))
        spans.append(int(at.max()) + 1)
        num_rows += spans[-1]
    span = np.asarray(spans)
    pair_links = routes.link_matrix(len(capacity))
    row, pair = np.concatenate(rows), np.concatenate(pairs)
    sending = sp.csr_array((np.ones(len(row)), (row, pair)), shape=(num_rows, len(routes.src)))
    usage = sending @ pair_links
    # bytes entering every tree at each step, shifted to each of its rows' steps
    offset = np.arange(num_rows) - np.repeat(np.cumsum(span) - span, span)
    entering = np.stack([np.bincount(np.arange(c) * stages // c, minlength=stages) for c in count[trees]])
    step = (offset[:, None] + np.arange(stages)[None, :]).ravel()
    weight = np.repeat(entering, span, axis=0).ravel() * (nbytes / (units * stages))
    col = np.repeat(np.arange(num_rows), stages)
    inflow = sp.csr_array((weight, (step, col)), shape=(stages + int(span.max()), num_rows))
    load = (inflow @ usage).toarray()
    busy = load.max(axis=1) > 0
    return float((load / capacity).max(axis=1).sum() + busy.sum() * overhead)


def choose_pipeline(
    packing: Packing, routes: Routes, topology: Topology, nbytes: float, alpha: float
) -> tuple[int, int, float]:
    """(units, stages, time) for a packing: the pipeline of `default_stages` over `UNITS`
    units, or no pipeline (one or two steps, a chunk or more for every tree), whichever
    `sends_time` finds faster. Pipelining pays for fill and drain; a packing whose every step
    keeps the links equally busy (stars on a fat-tree or a small Jellyfish) does not need it."""
    sends = [tree_sends(parent) for parent in packing.parents]
    return choose_stages(sends, packing.weights, packing.rate, routes, topology, nbytes, alpha)


def choose_stages(
    sends: Sequence[Sends],
    weights: np.ndarray,
    rate: float,
    routes: Routes,
    topology: Topology,
    nbytes: float,
    alpha: float,
) -> tuple[int, int, float]:
    """`choose_pipeline` for trees given by their sends and rates (`rate` their sum)."""
    overhead = step_overhead(topology, alpha)
    wide = max(UNITS, len(weights))
    options = [(UNITS, default_stages(rate, topology, nbytes, alpha)), (wide, 1), (wide, 2)]
    cap = topology.compiled.capacity
    times = [sends_time(sends, weights, routes, cap, u, s, nbytes, overhead) for u, s in options]
    best = int(np.argmin(times))
    return *options[best], times[best]


def stage_candidates(first: tuple[int, int], stages: int) -> list[tuple[int, int]]:
    """(units, stages) to simulate: `first`, then `stages` (the pipeline length of
    `default_stages`) and its half, double and quarter, over 2·`UNITS` and `UNITS` units."""
    options = [first]
    for units in (2 * UNITS, UNITS):
        for s in (stages, stages // 2, 2 * stages, stages // 4):
            option = (units, int(np.clip(s, 1, MAX_STAGES)))
            if option not in options:
                options.append(option)
    return options


def add_sends_pipeline(
    b: ScheduleBuilder, sends: Sequence[Sends | None], count: np.ndarray, stages: int, routes: Routes
) -> None:
    """Tree i's `count[i]` chunks (numbered tree by tree) spread evenly over `stages` steps,
    about count[i] / stages entering at each, every one pipelined along tree i's sends
    (`tree_sends`, `in_out_sends`; None for trees without chunks) on the `routes` of its edges."""
    used = [x for x, c in zip(sends, count.tolist(), strict=True) if c]
    paths = intern(b, routes, np.concatenate([x[0] for x in used]), np.concatenate([x[1] for x in used]))
    members = np.arange(len(b.ranks))
    first = 0
    for x, c in zip(sends, count.tolist(), strict=True):
        if c:
            chunks = np.arange(first, first + c)
            offsets = np.arange(c) * stages // c
            add_sends(b, members, x, chunks, offsets, paths)
            first += c
