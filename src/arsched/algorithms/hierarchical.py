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
`dimension_ordered` on the grid (local index, group). The vector is cut into `stages` pieces,
piece s entering one step after piece s − 1, so that with in-order connections (the default flow
model) piece s crosses the rails while piece s + 1 is reduced inside the boxes. Modes and stages
are chosen by a closed-form estimate: the schedule's busiest link time for one piece (from its
own transfers on their routes) plus the pipeline's fill and drain and α per step (`estimate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple, ring_order
from arsched.algorithms.dimension_ordered import phase
from arsched.algorithms.packing.pipeline import MAX_STAGES, step_overhead
from arsched.algorithms.registry import NotApplicable, register
from arsched.algorithms.routes import route
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import default_alpha
from arsched.errors import ArschedError
from arsched.topology.core import Topology

NAME = "hierarchical"
INTRA = ("direct", "ring")
RAIL = ("direct", "ring", "rhd")
Ints = np.ndarray | int


# ---- groups -------------------------------------------------------------------------------------
def _components(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The connected-component label of every node over the undirected edges src–dst."""
    graph = sp.csr_array((np.ones(len(src)), (src, dst)), shape=(num_nodes, num_nodes))
    return connected_components(graph, directed=True, connection="weak")[1]


def _partition(labels: np.ndarray) -> tuple[tuple[int, ...], ...]:
    """Rank indices grouped by label, groups ordered by their first rank."""
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(labels.tolist()):
        groups.setdefault(x, []).append(i)
    return tuple(tuple(g) for g in groups.values())


def _usable(groups: tuple[tuple[int, ...], ...]) -> bool:
    return len(groups) > 1 and len(groups[0]) > 1 and len({len(g) for g in groups}) == 1


def candidate_groups(topology: Topology, ranks: Sequence[str]) -> list[tuple[tuple[int, ...], ...]]:
    """The usable groupings of the ranks (rank indices; ≥ 2 groups of equal size ≥ 2) that the
    topology suggests: for every link bandwidth b, the ranks joined by links of bandwidth ≥ b
    (boxes on their fast fabric), and the ranks joined through switches they attach to directly
    (servers of one leaf)."""
    c = topology.compiled
    nodes = np.array([c.index[r] for r in ranks])
    out: list[tuple[tuple[int, ...], ...]] = []
    for b in np.unique(c.capacity)[::-1].tolist():
        fast = c.capacity >= b
        groups = _partition(_components(c.num_nodes, c.link_src[fast], c.link_dst[fast])[nodes])
        if _usable(groups) and groups not in out:
            out.append(groups)
    to_switch = c.is_server[c.link_src] & ~c.is_server[c.link_dst]
    groups = _partition(_components(c.num_nodes, c.link_src[to_switch], c.link_dst[to_switch])[nodes])
    if _usable(groups) and groups not in out:
        out.append(groups)
    return out


def _given_groups(groups: object, ranks: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
    """The `groups` parameter (lists of rank names) as rank indices, each rank exactly once."""
    index = {r: i for i, r in enumerate(ranks)}
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in groups):
        raise ArschedError(f"{NAME}: groups must be a list of lists of rank names, got {groups!r}")
    names = [r for g in groups for r in g]
    if sorted(map(str, names)) != sorted(ranks) or len(names) != len(ranks):
        raise ArschedError(f"{NAME}: groups must hold every rank exactly once, got {groups!r}")
    return tuple(tuple(index[r] for r in g) for g in groups)


def _align(
    topology: Topology, ranks: tuple[str, ...], groups: tuple[tuple[int, ...], ...], ring: bool
) -> np.ndarray:
    """The (G × g) grid of rank indices: group 0 in ring order (`ring`) or as given, and in every
    other group local index j goes to the member fewest hops from group 0's rank j (ties: the
    lower index), so that the ranks of one local index share short routes (a rail)."""
    first = list(groups[0])
    if ring:
        cycle = ring_order(topology, tuple(ranks[i] for i in first))
        first = [ranks.index(r) for r in cycle]
    hops = topology.router.hop_matrix(ranks)
    grid = [first]
    for g in groups[1:]:
        free = list(g)
        row = []
        for j in first:
            pick = min(free, key=lambda x: (hops[j, x], x))
            free.remove(pick)
            row.append(pick)
        grid.append(row)
    return np.array(grid, dtype=np.int64)


# ---- the schedule ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """A hierarchical schedule's shape: `grid[d, l]` is the rank of local index l in group d."""

    grid: np.ndarray
    intra: str
    rail: str

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


def _rhd_rail(b: _OnGrid, radices: list[int], step: int, base: int, op: str) -> int:
    """Halving (op 'reduce') or doubling ('copy') along the group digit, G a power of two: the
    chunks of a piece are named by grid position (local + g·group); rank (l, d) ends the halving
    owning chunk (l, d). Returns the steps used."""
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
                b.add_rank_arrays(
                    step + i, base + local + g * (send_lo + j), x, x + g * ((group ^ bit) - group), op
                )
            lo, size = np.where(upper, lo + half, lo), half
        return k
    lo, size = group.copy(), 1
    for i in range(k):
        bit = 1 << i
        for j in range(size):
            b.add_rank_arrays(step + i, base + local + g * (lo + j), x, x + g * ((group ^ bit) - group), op)
        lo, size = np.minimum(lo, lo ^ bit), size * 2
    return k


def emit(sink: ScheduleBuilder | _Tally, plan: Plan, stages: int) -> None:
    """The transfers of `stages` pieces, piece s (chunks s·N .. s·N + N − 1) entering at step s."""
    radices = plan.radices
    n = radices[0] * radices[1]
    b = _OnGrid(sink, plan.grid.ravel())
    sign = 0 if plan.intra == "direct" else 1
    for s in range(stages):
        base, step = s * n, s
        step += phase(b, radices, 0, [], step, base, 1, "reduce", sign)  # type: ignore[arg-type]
        for op in ("reduce", "copy"):
            if plan.rail == "rhd":
                step += _rhd_rail(b, radices, step, base, op)
            else:
                rail_sign = 0 if plan.rail == "direct" else 1
                step += phase(b, radices, 1, [0], step, base, 1, op, rail_sign)  # type: ignore[arg-type]
        phase(b, radices, 0, [], step, base, 1, "copy", sign)  # type: ignore[arg-type]


def estimate(
    topology: Topology, ranks: tuple[str, ...], plan: Plan, nbytes: float, alpha: float
) -> tuple[float, int]:
    """(seconds, stages) of a plan, from one piece's transfers on their routes: T the busiest
    link's time over the whole AllReduce and F what its phases (intra reduce-scatter, rail, intra
    all-gather, each its busiest link) take one after the other beyond T, which the pipeline's
    fill and drain expose. Every piece costs a connection k·o (o = `step_overhead`, k the steps of one
    piece that one connection carries at most: both intra phases or the rail), so S = √(F / (k·o))
    stages (at most `MAX_STAGES`) take about T + F / S + (k·S + steps − k)·o."""
    n = len(ranks)
    tally = _Tally()
    emit(tally, plan, 1)
    step, src, dst = tally.columns()
    phase = (step >= plan.inner_steps).astype(np.int64) + (step >= plan.inner_steps + plan.rail_steps)
    routes = route(topology, ranks, src, dst, spread=False)
    usage = routes.link_matrix(topology.compiled.num_links)
    pair = routes.index(src, dst, n)
    cap = topology.compiled.capacity
    chunk = nbytes / n

    def busiest(rows: np.ndarray) -> float:
        load = np.bincount(pair[rows], minlength=len(routes.src)) * chunk
        return float((usage.T @ load / cap).max())

    whole = busiest(np.ones(len(step), dtype=bool))
    fill = max(sum(busiest(phase == p) for p in range(3)) - whole, 0.0)
    o = step_overhead(topology, alpha)
    k = max(2 * plan.inner_steps, plan.rail_steps)
    stages = int(np.clip(round(math.sqrt(fill / (k * o))), 1, MAX_STAGES))
    return whole + fill / stages + (k * stages + plan.steps - k) * o, stages


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
) -> Schedule:
    """Hierarchical AllReduce over equal groups of ranks (`groups`, lists of rank names, or found
    by `candidate_groups`): `intra` direct or ring inside the groups, `rail` direct, ring or rhd
    across them, the vector in `stages` pipelined pieces; 'auto' and None choose by `estimate`
    (with `alpha`, default the flow model's). NotApplicable where the ranks form no such groups."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    intras, rails = _choose("intra", intra, INTRA), _choose("rail", rail, RAIL)
    a = default_alpha("flow") if alpha is None else float(alpha)
    if not (a >= 0 and math.isfinite(a)):
        raise ArschedError(f"{NAME}: alpha must be a non-negative number of seconds, got {alpha!r}")
    if groups is None:
        options = candidate_groups(topology, rs)
        if not options:
            raise NotApplicable(
                f"{NAME}: the ranks of {topology.name} form no two or more equal groups of two or more "
                "(by fast links or shared switches)"
            )
    else:
        options = [_given_groups(groups, rs)]
        if not _usable(options[0]):
            raise NotApplicable(f"{NAME} needs two or more equal groups of two or more ranks, got {groups!r}")
    big = len(options[0])
    if "rhd" in rails and rail == "rhd" and any(len(o) & (len(o) - 1) for o in options):
        raise ArschedError(f"{NAME}: rail='rhd' needs a power-of-two number of groups, got {big}")
    best: tuple[float, int, Plan] | None = None
    for parts in options:
        for mode in intras:
            grid = _align(topology, rs, parts, mode == "ring")
            for r in rails:
                if r == "rhd" and len(parts) & (len(parts) - 1):
                    continue
                plan = Plan(grid, mode, r)
                t, s = estimate(topology, rs, plan, nbytes, a)
                if best is None or t < best[0]:
                    best = (t, s, plan)
    assert best is not None
    _, chosen, plan = best
    if stages is not None:
        if not (isinstance(stages, (int, np.integer)) and 1 <= stages <= MAX_STAGES):
            raise ArschedError(f"{NAME}: stages must be an integer from 1 to {MAX_STAGES}, got {stages!r}")
        chosen = int(stages)
    n = len(rs)
    chunks = chunk_multiple(chosen * n, n, NAME, ranks=n)
    params = {
        "groups": [[rs[i] for i in row] for row in plan.grid.tolist()],
        "intra": plan.intra,
        "rail": plan.rail,
        "stages": chosen,
        "chunks": chunks,
    }
    b = ScheduleBuilder(topology, rs, nbytes, chunks, NAME, {"params": params})
    emit(b, plan, chosen)
    return b.build()
