"""Hierarchical AllReduce for multi-GPU boxes (NCCL's intra-node/inter-node scheme; Jia et al.
2018, "Highly scalable deep learning training system with mixed-precision", and BlueConnect,
Cho et al. 2019), on any network whose ranks fall into equal groups.

The ranks form G groups of g (the "boxes"), found from the topology (`find_groups`) or given.
Rank j of every group is "local index j", matched across groups by the fewest hops, so the
ranks of one local index (a "rail") share the shortest routes (on a rail-optimised fabric, one
rail leaf). Each piece of the vector is then

1. reduce-scattered inside every group — each rank ends with 1/g of it, summed over its group —
   either `direct` (every rank sends each peer its share at once: one step, right on a switch)
   or `ring` (g − 1 steps around the group, right on a mesh or ring of direct links);
2. allreduced along every rail, each rank's 1/g among the G ranks of its local index: `direct`
   (a reduce-scatter and all-gather with all rail peers at once, good on a rail switch), `ring`
   or `rhd` (recursive halving-doubling, G a power of two);
3. all-gathered inside every group, the reverse of 1.

Phases 1 and 3 and the `direct`/`ring` rails are the dimension-ordered phases of
`dimension_ordered` on the grid (local index, group). The vector is cut into pieces, piece s
entering one step after piece s − 1, so that with in-order connections (the default flow model)
piece s crosses the rails while piece s + 1 is reduced inside the boxes. Pieces may differ in
size (`pieces`, whole units of one chunk per rank): the pipeline's fill and drain expose only the
first piece's reduce-scatter and the last one's all-gather, so small pieces at the ends and large
ones in the middle cut both the exposed time and the number of steps, each of which costs a
connection α. Sizes ramp up geometrically by the ratio of the busiest phase to its neighbours
(what the busiest phase of piece s hides of the next piece's), hold, and ramp down. Modes and
pieces are chosen by a closed-form estimate: the schedule's busiest link time for one piece
(from its own transfers on their routes) plus the exposed ends and α per step (`estimate`); where
the plan is within `REFINE` of the bound, the estimate's few cheapest piece sizes, its best
equal pieces and equal pieces half and a quarter as many (`FEWER`: the estimate prices a
piece's α below what the flow model charges, so it cuts too finely: two A100 boxes at 256 MB,
six equal pieces 1.045× the bound where the estimate's ramp of nine was 1.057×) are timed in the
flow model (in-order connections) and the fastest is kept, as
many as fit in `SIMULATE_TRANSFERS` transfers in all (at least two, or none), each simulation
cut after `SIMULATE_INSTANTS` event instants: the estimate cannot see how the pipeline's pieces
share links on their way (32 boxes on a ToR fabric at 256 MB: the estimate's choice 1.106× the
bound, the fastest of five 1.071×, `benchmarks/bench_scale.py`), but an unstructured network
makes the same schedule's simulation last minutes (a 256-server Jellyfish: far more instants
than a GPU fabric's pipeline, whose pieces end together), and a bound on instants, not on a
clock, keeps the choice the same on every machine.

Every piece costs each connection α per step, and the box phases' connections all pay it at
the same moment, when the box fabric idles. On two channels per rank pair (`channels`,
`Schedule.channels`: step s on channel s mod 2, as NCCL runs several) a connection's next step
pays its α while the other channel still sends; pieces then share the links they overlap on, so
whether it pays depends on the fabric: one channel and two are both timed (two priced by the
estimate with α / 2) and the fastest kept (two A100 boxes at 256 MB: 1.045× the bound on one
channel, 1.024× on two; four: one channel stays).

Transfers take routes spread over equal-cost paths at switches (`ScheduleBuilder(spread=True)`),
and the estimate prices those routes: where rails cross spines (a ToR fabric, rails spanning
scalable units) the lowest-index routes would put every rail's traffic on one spine.

Limitation: both intra phases cross each GPU's link to its box fabric, 2·(g − 1)/g of the
vector in all. Where that is more than the rail carries (4 H100 boxes: 2 · 7/8 · M at 450 GB/s
against 2 · 3/4 · M/8 at 50 GB/s), the scheme is bound by the box fabric, not by the network cut,
and stays above the bound however it is pipelined. Where the box fabric and the rail are both
busy for nearly the bound's time (H100 boxes), nothing hides the pipeline's ends, and every
piece costs each connection a step: the pieces trade exposed ends against steps (`estimate`),
and with many boxes `TRANSFERS`, or `TRANSFERS_PER_RANK` per rank beyond 64 ranks, bounds them
(a unit of one chunk per rank is N·(g − 1)·G transfers inside the boxes per phase: at 1,024
GPUs, 2 million in all). On a box without a switch (MI250's xGMI mesh) `direct`
routes through other GPUs and `ring` uses one of a GPU's links: neither comes near the mesh's
cut, and even a reduce-scatter at the mesh's own bound would leave this scheme above the
cluster's bound, which counts the NICs' ingress too; tree packing is the scheme there.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.dimension_ordered import phase
from arsched.algorithms.fastest import (
    CHANNELS,
    SIMULATE_INSTANTS,
    SIMULATE_TRANSFERS,
    check_channels,
    fastest,
)
from arsched.algorithms.groups import align
from arsched.algorithms.packing.pipeline import MAX_STAGES
from arsched.algorithms.registry import NotApplicable, register
from arsched.algorithms.routes import STRIPES, route, striped_usage
from arsched.bounds import allreduce_bound
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import default_alpha
from arsched.errors import ArschedError
from arsched.limits import max_memory, schedule_memory
from arsched.topology.boxes import candidate_groups, usable
from arsched.topology.core import Topology

NAME = "hierarchical"
GROWTHS = (1.5, 2.0)  # ramp growths tried besides the phases' own ratio, where below it
SIMULATED = 4  # the estimate's cheapest piece sizes timed by simulation ...
FEWER = 2  # ... besides its best equal pieces and equal ones 1/2, ..., 1/2**FEWER as many
REFINE = 1.5  # plans whose estimate is this far above the bound are not timed (not competitive)
TRANSFERS = 524_288  # pieces are not cut finer than this many transfers allow (a runtime's limit) ...
TRANSFERS_PER_RANK = 8_192  # ... or this many per rank where that is more (hundreds of ranks)
INTRA = ("direct", "ring")
RAIL = ("direct", "ring", "rhd")
Ints = np.ndarray | int


# ---- groups -------------------------------------------------------------------------------------
def usable_groupings(
    topology: Topology, ranks: tuple[str, ...], groups: Sequence[Sequence[str]] | None
) -> list[tuple[tuple[int, ...], ...]]:
    """The given `groups` (lists of rank names) as rank indices, or else `candidate_groups`;
    NotApplicable where there are none or they are not two or more equal groups of two or more."""
    if groups is None:
        found = candidate_groups(topology, ranks)
        if not found:
            raise NotApplicable(
                f"{NAME}: the ranks of {topology.name} form no two or more equal groups of two or more "
                "(by fast links or shared switches)"
            )
        return found
    given = _given_groups(groups, ranks)
    if not usable(given):
        raise NotApplicable(f"{NAME} needs two or more equal groups of two or more ranks, got {groups!r}")
    return [given]


def _given_groups(groups: object, ranks: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """The `groups` parameter (lists of rank names) as rank indices, each rank exactly once."""
    index = {r: i for i, r in enumerate(ranks)}
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in groups):
        raise ArschedError(f"{NAME}: groups must be a list of lists of rank names, got {groups!r}")
    names = [r for g in groups for r in g]
    if sorted(map(str, names)) != sorted(ranks) or len(names) != len(ranks):
        raise ArschedError(f"{NAME}: groups must hold every rank exactly once, got {groups!r}")
    return tuple(tuple(index[r] for r in g) for g in groups)


# ---- the schedule ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """A hierarchical schedule's shape: `grid[d, l]` is the rank of local index l in group d."""

    grid: np.ndarray
    intra: str
    rail: str
    stripes: int = STRIPES  # a rank pair's transfers striped over this many routes at most
    width: int = 1  # chunks per rank in one unit: the most routes a pair is striped over

    @property
    def radices(self) -> list[int]:
        return [self.grid.shape[1], self.grid.shape[0]]  # digit 0 the local index, 1 the group

    @property
    def inner_steps(self) -> int:
        """Steps of one piece's reduce-scatter (or all-gather) inside the groups."""
        return 1 if self.intra == "direct" else self.radices[0] - 1

    @property
    def rail_steps(self) -> int:
        """Steps of one piece's allreduce along the rails."""
        big = self.radices[1]
        return {"direct": 2, "ring": 2 * (big - 1), "rhd": 2 * (big.bit_length() - 1)}[self.rail]

    @property
    def steps(self) -> int:
        """Steps one piece takes."""
        return 2 * self.inner_steps + self.rail_steps


class _OnGrid:
    """Forwards transfers given by grid position (local + g·group) to a builder, as rank indices."""

    def __init__(self, sink: ScheduleBuilder | _Tally, rank_at: np.ndarray) -> None:
        self.sink, self.rank_at = sink, rank_at

    def add_rank_arrays(
        self, step: Ints, chunk: Ints, src: np.ndarray, dst: np.ndarray, op: str = "reduce"
    ) -> None:
        self.sink.add_rank_arrays(step, chunk, self.rank_at[src], self.rank_at[dst], op)


class _Tally:
    """A stand-in builder that keeps every transfer's step, source and destination (rank
    indices), to price a plan without building it."""

    def __init__(self) -> None:
        self.rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add_rank_arrays(
        self, step: Ints, chunk: Ints, src: np.ndarray, dst: np.ndarray, op: str = "reduce"
    ) -> None:
        step, _, src, dst = np.broadcast_arrays(step, chunk, src, dst)
        self.rows.append((step.ravel(), src.ravel(), dst.ravel()))

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tuple(np.concatenate(c) for c in zip(*self.rows, strict=True))  # type: ignore[return-value]


def _rhd_rail(b: _OnGrid, radices: list[int], step: int, base: int, per: int, op: str) -> int:
    """Halving (op 'reduce') or doubling ('copy') along the group digit, G a power of two: the
    chunks of a piece are named by grid position c = local + g·group (chunks base + c·per ..
    base + c·per + per − 1, as `phase` names them); rank (l, d) ends the halving owning c = (l, d).
    Returns the steps used."""
    g, big = radices
    k = big.bit_length() - 1
    x = np.arange(g * big)
    local, group = x % g, x // g
    if op == "reduce":
        lo, size = np.zeros_like(x), big
        for i in range(k):
            bit = big >> (i + 1)
            half = size // 2
            upper = (group & bit) != 0
            send_lo = np.where(upper, lo, lo + half)  # the half the partner keeps
            for j in range(half):
                for p in range(per):
                    chunk = base + (local + g * (send_lo + j)) * per + p
                    b.add_rank_arrays(step + i, chunk, x, x + g * ((group ^ bit) - group), op)
            lo, size = np.where(upper, lo + half, lo), half
        return k
    lo, size = group.copy(), 1
    for i in range(k):
        bit = 1 << i
        for j in range(size):
            for p in range(per):
                chunk = base + (local + g * (lo + j)) * per + p
                b.add_rank_arrays(step + i, chunk, x, x + g * ((group ^ bit) - group), op)
        lo, size = np.minimum(lo, lo ^ bit), size * 2
    return k


def emit(sink: ScheduleBuilder | _Tally, plan: Plan, pieces: Sequence[int]) -> None:
    """The transfers of the pieces, piece s (`pieces[s]` units of w = `plan.width` chunks per
    rank: chunks N·u .. N·(u + w·pieces[s]) − 1, u the chunks per rank before it) entering at
    step s: a unit of w chunks gives every rank pair a transfer for each of its w routes."""
    radices = plan.radices
    n = radices[0] * radices[1]
    b = _OnGrid(sink, plan.grid.ravel())
    sign = 0 if plan.intra == "direct" else 1
    rail_sign = 0 if plan.rail == "direct" else 1
    units = 0
    for s, size in enumerate(pieces):
        per = size * plan.width
        base, step = units * n, s
        step += phase(b, radices, 0, [], step, base, per, "reduce", sign)  # type: ignore[arg-type]
        for op in ("reduce", "copy"):
            if plan.rail == "rhd":
                step += _rhd_rail(b, radices, step, base, per, op)
            else:
                step += phase(b, radices, 1, [0], step, base, per, op, rail_sign)  # type: ignore[arg-type]
        phase(b, radices, 0, [], step, base, per, "copy", sign)  # type: ignore[arg-type]
        units += per


def ramp(ratio: float, top: int, hold: int) -> list[int]:
    """Piece sizes growing by `ratio` per piece (rounded, at least one more unit each) up to
    `top`, `hold` pieces of `top`, and the same ramp down."""
    up: list[int] = []
    x = 1.0
    while not up or up[-1] < top:
        up.append(min(top, max(round(x), up[-1] + 1 if up else 1)))
        x = max(x * ratio, up[-1] + 1)
    return up[:-1] + [top] * hold + up[-2::-1]


def estimate(
    topology: Topology, ranks: tuple[str, ...], plan: Plan, nbytes: float, alpha: float
) -> list[tuple[float, list[int]]]:
    """(seconds, pieces) of a plan's candidate piece sizes, cheapest first, from one piece's
    transfers on their routes.

    T is the busiest link's time over the whole AllReduce, and the phases' busiest links take
    p0 (intra reduce-scatter), p1 (rail) and p2 (intra all-gather) one after the other; what
    they take beyond T, F = p0 + p1 + p2 − T, is what the pipeline's ends expose, in proportion
    to the end pieces' shares: F·(w_first + w_last) / (2·W) for sizes w summing to W. A
    connection carries its steps in order, each after the previous one has arrived, so every
    step it carries costs α plus its route's latency. Piece s enters one step after piece
    s − 1, so a connection's steps for piece s are its steps for piece s − 1 shifted by one
    and the pieces' steps on it coincide (with direct phases, piece s's all-gather inside a box
    shares a step with piece s + 3's reduce-scatter): a connection whose steps of one piece
    are d_1 < .. < d_m carries the union of d_i .. d_i + S − 1, S + Σ min(d_(i+1) − d_i, S)
    steps, and S pieces cost the most of these over the connections. Candidates: S equal
    pieces (S = √(F / o), o the dearest step), and ramps (`ramp`) whose growth is at most what
    the busiest phase hides of its neighbours, min(p1 / p0, p1 / p2) where the rail is busiest
    (that ratio and the gentler `GROWTHS` below it), held at every size that fits, with at most
    `MAX_STAGES` units in all and the transfers `_units` allows.
    """
    n = len(ranks)
    tally = _Tally()
    emit(tally, plan, [1])
    step, src, dst = tally.columns()
    phase = (step >= plan.inner_steps).astype(np.int64) + (step >= plan.inner_steps + plan.rail_steps)
    routes = route(topology, ranks, src, dst, spread=True)
    striped = plan.width > 1  # else every pair has one route worth taking: the spread one
    usage = (
        striped_usage(topology, ranks, routes, plan.stripes)
        if striped
        else routes.link_matrix(topology.compiled.num_links)
    )
    pair = routes.index(src, dst, n)
    cap = topology.compiled.capacity
    chunk = nbytes / (n * plan.width)

    def busiest(rows: np.ndarray) -> float:
        load = np.bincount(pair[rows], minlength=len(routes.src)) * chunk
        return float((usage.T @ load / cap).max())

    whole = busiest(np.ones(len(step), dtype=bool))
    p = [busiest(phase == i) for i in range(3)]
    fill = max(sum(p) - whole, 0.0)
    # every connection's distinct steps of one piece, the gaps between them, and what each of
    # its steps costs
    key = np.unique(pair * (plan.steps + 1) + step)
    conn, at = key // (plan.steps + 1), key % (plan.steps + 1)
    same = conn[1:] == conn[:-1]
    gaps, gap_conn = np.diff(at)[same], conn[1:][same]
    latency = np.bincount(
        np.repeat(np.arange(len(routes.src)), routes.hops), topology.compiled.latency[routes.links]
    )
    per_step = alpha + latency

    @functools.cache
    def overhead(pieces: int) -> float:
        carried = pieces + np.bincount(gap_conn, np.minimum(gaps, pieces), minlength=len(per_step))
        return float((carried * per_step).max())

    def cost(w: list[int]) -> float:
        ends = fill * (w[0] + w[-1]) / (2 * sum(w))
        return whole + ends + overhead(len(w))

    units = _units(n, len(step), _paths(plan))
    if fill <= 0:
        equal = 1
    else:  # with no cost per step, as many pieces as the limit allows
        o = float(per_step.max())
        equal = int(np.clip(round(math.sqrt(fill / o)), 1, units)) if o > 0 else units
    options = {(1,) * equal: None}
    ratio = min(p[1] / p[0], p[1] / p[2]) if min(p[0], p[2]) > 0 else 0.0
    growths = sorted({ratio, *(g for g in GROWTHS if g < ratio)}) if ratio > 1 and fill > 0 else []
    for growth in growths:
        top = 2
        while top <= units:
            hold = 1
            while sum(w := ramp(growth, top, hold)) <= units:
                options.setdefault(tuple(w))
                hold += 1
            top *= 2
    return sorted(((cost(list(w)), list(w)) for w in options), key=lambda c: c[0])


def stripe_width(topology: Topology, ranks: tuple[str, ...], grid: np.ndarray, stripes: int) -> int:
    """The most routes a rank pair of one box (a row of `grid`) or one rail (a column) is striped
    over with `stripes` (`ScheduleBuilder(multipath=)`): the chunks per rank a unit needs, as a
    connection sends one step's transfers at once and a unit of one chunk would use one route."""
    src, dst = [], []
    for rows in (grid, grid.T):  # the boxes' ordered pairs, then the rails'
        a, b = np.broadcast_arrays(rows[:, :, None], rows[:, None, :])
        other = ~np.eye(rows.shape[1], dtype=bool)[None, :, :].repeat(len(rows), axis=0)
        src.append(a[other])
        dst.append(b[other])
    probe = ScheduleBuilder(topology, ranks, 1.0, 1, NAME, spread=True, multipath=stripes)
    return int(probe.ways(np.concatenate(src), np.concatenate(dst)).max(initial=1))


def _paths(plan: Plan) -> int:
    """The most distinct paths a plan's schedule has: every rank to the others of its group and
    of its rail (`direct`; ring and halving-doubling use fewer)."""
    groups, size = plan.grid.shape
    return groups * size * (size - 1 + groups - 1) * plan.width


def _units(ranks: int, per_unit: int, paths: int) -> int:
    """The most units (of one chunk per rank, `per_unit` transfers each) a plan may cut its
    pieces into: what `TRANSFERS`, or `TRANSFERS_PER_RANK` per rank, allows (at a thousand GPUs
    one unit is 2 million transfers: `TRANSFERS` alone would leave a single piece, the three
    phases one after the other), fewer where the schedule would not fit in the memory limit."""
    units = min(MAX_STAGES, max(1, max(TRANSFERS, TRANSFERS_PER_RANK * ranks) // per_unit))
    while units > 1 and schedule_memory(ranks, units * ranks, units * per_unit, paths) > max_memory():
        units -= 1
    return units


def _choose(name: str, value: str, options: tuple[str, ...]) -> tuple[str, ...]:
    if value == "auto":
        return options
    if value not in options:
        raise ArschedError(f"{NAME}: {name} must be auto or one of {', '.join(options)}, got {value!r}")
    return (value,)


@register(NAME, "reduce-scatter inside each box, allreduce along the rails, all-gather inside; pipelined")
def hierarchical(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    groups: Sequence[Sequence[str]] | None = None,
    intra: str = "auto",
    rail: str = "auto",
    stages: int | None = None,
    alpha: float | None = None,
    stripes: int = STRIPES,
    channels: int | None = None,
) -> Schedule:
    """Hierarchical AllReduce over equal groups of ranks (`groups`, lists of rank names, or found
    by `candidate_groups`): `intra` direct or ring inside the groups, `rail` direct, ring or rhd
    across them, the vector in pipelined pieces (`stages` equal ones, or sizes chosen with the
    modes); 'auto' and None choose by `estimate` (with `alpha`, default the flow model's). A rank
    pair's transfers are striped over up to `stripes` routes where they add capacity
    (`ScheduleBuilder(multipath=)`; 1: one route per pair, one queue pair per connection), and
    go over `channels` connections (`Schedule.channels`; None: 1 or `CHANNELS`, whichever
    simulates faster). NotApplicable where the ranks form no such groups."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    intras, rails = _choose("intra", intra, INTRA), _choose("rail", rail, RAIL)
    a = default_alpha("flow") if alpha is None else float(alpha)
    if not (a >= 0 and math.isfinite(a)):
        raise ArschedError(f"{NAME}: alpha must be a non-negative number of seconds, got {alpha!r}")
    if not (isinstance(stripes, (int, np.integer)) and not isinstance(stripes, bool) and 1 <= stripes <= 64):
        raise ArschedError(f"{NAME}: stripes must be an integer from 1 to 64, got {stripes!r}")
    channels = check_channels(channels, NAME)
    groupings = usable_groupings(topology, rs, groups)
    big = len(groupings[0])
    if "rhd" in rails and rail == "rhd" and any(len(o) & (len(o) - 1) for o in groupings):
        raise ArschedError(f"{NAME}: rail='rhd' needs a power-of-two number of groups, got {big}")
    plan: Plan | None = None
    options: list[tuple[float, list[int]]] = []  # the chosen plan's piece sizes, cheapest first
    for parts in groupings:
        for mode in intras:
            grid = align(topology, rs, parts, mode == "ring")
            width = stripe_width(topology, rs, grid, int(stripes))
            for r in rails:
                if r == "rhd" and len(parts) & (len(parts) - 1):
                    continue
                candidate = Plan(grid, mode, r, int(stripes), width)
                priced = estimate(topology, rs, candidate, nbytes, a)
                if plan is None or priced[0][0] < options[0][0]:
                    plan, options = candidate, priced
    assert plan is not None
    if stages is not None:
        if not (isinstance(stages, (int, np.integer)) and 1 <= stages <= MAX_STAGES):
            raise ArschedError(f"{NAME}: stages must be an integer from 1 to {MAX_STAGES}, got {stages!r}")
        return _schedule(topology, rs, nbytes, plan, [1] * int(stages), channels or 1)
    if options[0][0] > REFINE * allreduce_bound(topology, rs, nbytes):
        return _schedule(topology, rs, nbytes, plan, options[0][1], channels or 1)
    candidates = []
    for c in (1, CHANNELS) if channels is None else (channels,):
        # with c channels a connection's α overlaps the other channels' bytes: priced as α / c
        priced = options if c == 1 else estimate(topology, rs, plan, nbytes, a / c)
        candidates += [(w, c) for w in _timed(priced)]
    return _fastest(topology, rs, nbytes, plan, candidates, a)


def _timed(options: list[tuple[float, list[int]]]) -> list[list[int]]:
    """The piece sizes to time of the estimate's `options` (cheapest first): its `SIMULATED`
    cheapest, its best equal pieces, and equal pieces a half and a quarter as many (`FEWER`)."""
    timed = [w for _, w in options[:SIMULATED]]
    equal = len(next(w for _, w in options if len(set(w)) == 1))
    for count in (equal, *(equal // 2**k for k in range(1, FEWER + 1))):
        if count >= 1 and [1] * count not in timed:
            timed.append([1] * count)
    return timed


def _schedule(
    topology: Topology, rs: tuple[str, ...], nbytes: float, plan: Plan, pieces: list[int], channels: int = 1
) -> Schedule:
    n = len(rs)
    chunks = chunk_multiple(sum(pieces) * n * plan.width, n, NAME, ranks=n, paths=_paths(plan))
    params = {
        "groups": [[rs[i] for i in row] for row in plan.grid.tolist()],
        "intra": plan.intra,
        "rail": plan.rail,
        "stages": len(pieces),
        "pieces": pieces,
        "chunks": chunks,
        "stripes": plan.stripes,
        "unit": plan.width,
        **({"channels": channels} if channels > 1 else {}),
    }
    b = ScheduleBuilder(
        topology,
        rs,
        nbytes,
        chunks,
        NAME,
        {"params": params},
        spread=True,
        multipath=plan.stripes if plan.width > 1 else 1,
        channels=channels,
    )
    emit(b, plan, pieces)
    return b.build()


def _fastest(
    topology: Topology,
    rs: tuple[str, ...],
    nbytes: float,
    plan: Plan,
    candidates: list[tuple[list[int], int]],
    alpha: float,
) -> Schedule:
    """The candidate (piece sizes, channels) whose schedule is fastest in the default flow model
    (`fastest`, within `SIMULATE_TRANSFERS` and `SIMULATE_INSTANTS`); the estimate's choice,
    the first, where none can be timed."""
    first = _schedule(topology, rs, nbytes, plan, *candidates[0])
    per_unit = len(first) / sum(candidates[0][0])
    return fastest(
        first,
        [functools.partial(_schedule, topology, rs, nbytes, plan, w, c) for w, c in candidates[1:]],
        [sum(w) * per_unit for w, _ in candidates[1:]],
        alpha,
        SIMULATE_TRANSFERS,
        SIMULATE_INSTANTS,
    )
