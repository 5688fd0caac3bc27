"""Recursive halving-doubling AllReduce (Rabenseifner 2004; Thakur, Rabenseifner & Gropp 2005).

For N = 2^k: k halving steps (reduce-scatter: exchange half of the current range with the
partner at distance 1, 2, 4, ...) then k doubling steps (all-gather in reverse), 2k steps in
all, bandwidth-optimal on a non-blocking network and logarithmic in latency. The nearest
partners come first, so the largest exchanges (half the vector) stay between neighbouring ranks
(one box, one edge switch) and only 1/2^i of it crosses the i-th level: on multi-GPU boxes
numbered box by box this is the box-then-rail hierarchy, on an oversubscribed fabric it keeps
the bulk below the oversubscribed level. Any other N: the
first 2r ranks (r = N − 2^⌊log2 N⌋) pair up, the even one of each pair first adds its whole
vector into the odd one, the 2^k remaining ranks run the power-of-two algorithm, and the odd
ones copy the result back: 2⌊log2 N⌋ + 2 steps.

Each step is a permutation of partners at one distance, which a fat-tree carries without
contention only if its switches spread the pairs over their equal-cost uplinks, as ECMP does:
transfers take spread routes (d-mod-k, `ScheduleBuilder(spread=True)`), not the lowest-index
route, on which every pair crossing the core met at one core switch.

Pipelining (`stages`): the vector is cut into that many segments, each running the whole
algorithm one step behind the one before, so that where the exchanges cross different links
(NVSwitch for the near partners, a NIC for the far ones) every link keeps busy instead of each
level waiting for the last one (an exchange's reductions need the level before it, and a
runtime's connection carries its steps in order, so without segments nothing overlaps). Each
segment's transfer pays α at every level, so more segments only pay where the levels' links
differ. By default the depth is chosen: none where the steps, one after another, are within
`SLACK` of the busiest link's time (every step crosses the same bottleneck: a star, a fat-tree),
else the fastest of `STAGES` in the flow model (`fastest`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.fastest import SIMULATE_INSTANTS, SIMULATE_TRANSFERS, fastest
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.defaults import default_alpha
from arsched.errors import ArschedError
from arsched.sim.paths import compile_paths
from arsched.topology.core import Topology, is_int

STAGES = (16, 8, 4, 2)  # the pipeline depths timed besides none, deepest first
MAX_STAGES = 64
SLACK = 0.01  # no pipeline where the steps in a row take at most this much over the busiest link


def _halve(
    b: ScheduleBuilder, members: np.ndarray, names: np.ndarray, step: int, stages: int
) -> tuple[np.ndarray, int, int]:
    """The halving steps over a power of two of `members` (rank indices): in each, exchange
    half of the range you own with the partner at distance 1, 2, 4, ... (nearest first: the
    big exchanges stay local) and keep your side. Ranges are of positions 0 .. len(names) − 1,
    position x being chunk names[x] and in segment `_segment(x)`, which goes `stages` steps
    after segment 0 in each exchange. Returns each member's range start, its size and the
    next step."""
    p2, size = len(members), len(names)
    block = size // p2
    lo = np.zeros(p2, dtype=np.int64)
    v = np.arange(p2)
    for m in _bits(p2):
        half = size // 2
        upper = (v & m) != 0
        send_lo = np.where(upper, lo, lo + half)  # the half the partner keeps
        for j in range(half):
            at = step + _segment(j, block, stages)
            b.add_rank_arrays(at, names[send_lo + j], members, members[v ^ m], "reduce")
        lo = np.where(upper, lo + half, lo)
        size = half
        step += stages
    return lo, size, step


def _double(
    b: ScheduleBuilder,
    members: np.ndarray,
    names: np.ndarray,
    lo: np.ndarray,
    size: int,
    step: int,
    stages: int,
) -> tuple[np.ndarray, int]:
    """The doubling steps, the halving's mirror: send everything you own to the partner at
    distance ..., 4, 2, 1, segment by segment. Returns the range starts (all 0) and the next
    step."""
    v = np.arange(len(members))
    block = size
    for m in _bits(len(members))[::-1]:
        for j in range(size):
            b.add_rank_arrays(
                step + _segment(j, block, stages), names[lo + j], members, members[v ^ m], "copy"
            )
        lo = np.minimum(lo, lo[v ^ m])
        size *= 2
        step += stages
    return lo, step


def _segment(position: np.ndarray | int, block: int, stages: int) -> np.ndarray | int:
    """The pipeline segment of a position: its place in its member's final block (of `block`
    positions; `stages` divides it), so that every segment is a slice of every range."""
    return position % block * stages // block


def _bits(p2: int) -> list[int]:
    return [1 << i for i in range(p2.bit_length() - 1)]


def _allreduce(
    topology: Topology, rs: tuple[str, ...], nbytes: float, chunks: int | None, stages: int
) -> Schedule:
    """The AllReduce (module docstring) with `chunks` chunks in `stages` segments."""
    n = len(rs)
    k = n.bit_length() - 1
    p2 = 1 << k
    paths = n * (k + 2)  # a partner per level, the folds
    chunks = chunk_multiple(chunks, p2 * stages, "rhd", ranks=n, paths=paths)
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "rhd", {"params": {"chunks": chunks, "stages": stages}}, spread=True
    )
    every = np.arange(chunks)
    at = _segment(every, chunks // p2, stages)
    members, folded = _fold(n, p2)
    step = 0
    if len(folded):
        for i in folded.tolist():  # the even rank of each pair adds its vector into the odd one
            b.add_rank_arrays(at, every, np.full(chunks, i), np.full(chunks, i + 1), "reduce")
        step = stages
    lo, size, step = _halve(b, members, every, step, stages)
    _, step = _double(b, members, every, lo, size, step, stages)
    for i in folded.tolist():
        b.add_rank_arrays(step + at, every, np.full(chunks, i + 1), np.full(chunks, i), "copy")
    return b.build()


def _fold(n: int, p2: int) -> tuple[np.ndarray, np.ndarray]:
    """The members that run the power-of-two algorithm and the folded ranks: ranks 0 .. 2r − 1
    (r = n − p2) pair up (2i, 2i + 1), the odd ones and ranks 2r .. n − 1 take part."""
    extra = n - p2
    members = np.array([2 * i + 1 for i in range(extra)] + list(range(2 * extra, n)), dtype=np.int64)
    return members, 2 * np.arange(extra)


def _pipelined(
    make: Callable[[int | None, int], Schedule],
    unit: int,
    chunks: int | None,
    stages: int | None,
    alpha: float | None,
) -> Schedule:
    """`make(chunks, stages)` at the `stages` asked for, or at the depth chosen (module
    docstring) among those that fit the memory limit and divide `chunks` (a multiple of `unit`
    per segment) where that is given."""
    if stages is not None:
        if not (is_int(stages) and 1 <= stages <= MAX_STAGES):
            raise ArschedError(f"rhd: stages must be an integer from 1 to {MAX_STAGES}, got {stages!r}")
        return make(chunks, int(stages))
    a = default_alpha("flow") if alpha is None else float(alpha)
    if not (a >= 0 and math.isfinite(a)):
        raise ArschedError(f"rhd: alpha must be a non-negative number of seconds, got {alpha!r}")
    first = make(chunks, 1)
    if _in_a_row(first) <= 1 + SLACK:
        return first
    depths = [g for g in STAGES if chunks is None or chunks % (unit * g) == 0]
    # a depth's transfers: the segments multiply them unless `chunks` is given (one over the
    # memory limit is left out by `fastest`, its chunk check refusing it before it is built)
    sizes = {g: len(first) * (1 if chunks else g) for g in depths}
    timed = [g for g in depths if sizes[g] + len(first) <= SIMULATE_TRANSFERS]
    return fastest(
        first,
        [functools.partial(make, chunks, g) for g in timed],
        [sizes[g] for g in timed],
        a,
        SIMULATE_TRANSFERS,
        SIMULATE_INSTANTS,
    )


def _in_a_row(schedule: Schedule) -> float:
    """The time of the schedule's steps one after another, each as long as its busiest link
    needs, over the busiest link's time for all of them (≥ 1): what pipelining could gain at
    most, α and latencies aside."""
    cp = compile_paths(schedule)
    caps = schedule.topology.compiled.capacity
    steps, step = np.unique(schedule.step, return_inverse=True)
    num_paths, num_links = len(cp.path_ptr) - 1, len(caps)
    per_path = np.bincount(step.ravel() * num_paths + cp.path_id, minlength=len(steps) * num_paths)
    per_path = per_path.reshape(len(steps), num_paths)
    busy = np.zeros((len(steps), num_links))
    for k in range(len(steps)):
        busy[k] = np.bincount(cp.path_links, weights=per_path[k][cp.path_owner], minlength=num_links) / caps
    total = busy.sum(axis=0).max()
    return float(busy.max(axis=1).sum() / total) if total > 0 else 1.0


def _builder(collective: str):
    """The builder of `collective`: the AllReduce (module docstring), or recursive halving
    (ReduceScatter) or doubling (AllGather) alone: log2 N steps for a power of two of ranks, the
    chunks named so that rank v ends with (starts from) its shard. Any other N folds the first
    2r ranks in pairs as the AllReduce does: ReduceScatter first adds each even one's vector
    into its odd partner, halves over the 2^k members, and ends with each member copying its
    part of the even ranks' shards to them; AllGather mirrors it (the even ranks first copy
    their shards to the members, the odd ones last copy the vector back)."""

    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        chunks: int | None = None,
        stages: int | None = None,
        alpha: float | None = None,
    ) -> Schedule:
        rs = check_ranks(topology, ranks, "rhd")
        nbytes = check_nbytes(nbytes, "rhd")
        n = len(rs)
        p2 = 1 << (n.bit_length() - 1)
        if collective == "allreduce":
            return _pipelined(functools.partial(_allreduce, topology, rs, nbytes), p2, chunks, stages, alpha)
        return _pipelined(
            functools.partial(_shards, topology, rs, nbytes, collective),
            _shard_unit(n),
            chunks,
            stages,
            alpha,
        )

    build.__doc__ = (
        "Halving-doubling AllReduce: log-depth, bandwidth-optimal on non-blocking networks; in `stages` "
        "pipelined segments (None: chosen, module docstring; `alpha` the flow model's α to time them "
        "with, default the flow model's)."
        if collective == "allreduce"
        else f"Recursive {'halving' if collective == 'reduce_scatter' else 'doubling'} {collective}."
    )
    return build


def _shard_unit(n: int) -> int:
    """The chunks of one segment of the ReduceScatter or AllGather over n ranks: every member's
    block holds its shard and an equal share of the folded ranks' shards."""
    p2 = 1 << (n.bit_length() - 1)
    return n * p2 // math.gcd(n - p2, p2)


def _shards(
    topology: Topology, rs: tuple[str, ...], nbytes: float, collective: str, chunks: int | None, stages: int
) -> Schedule:
    """The ReduceScatter or AllGather (`_builder`) with `chunks` chunks in `stages` segments."""
    n = len(rs)
    p2 = 1 << (n.bit_length() - 1)
    chunks = chunk_multiple(chunks, _shard_unit(n) * stages, "rhd", ranks=n)
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "rhd", {"params": {"chunks": chunks, "stages": stages}},
        spread=True, collective=collective,
    )  # fmt: skip
    per, block = chunks // n, chunks // p2
    members, folded = _fold(n, p2)
    ends = np.zeros(p2, dtype=np.int64)  # where halving leaves each member: block ends[v]
    v = np.arange(p2)
    size = p2
    for m in _bits(p2):
        size //= 2
        ends = np.where(v & m, ends + size, ends)
    # block ends[j]: member j's shard, then its share of the folded ranks' shards
    spare = (folded[:, None] * per + np.arange(per)).reshape(p2, -1)  # member j's share: row j
    own = members[:, None] * per + np.arange(per)
    names = np.empty(chunks, dtype=np.int64)
    names.reshape(p2, block)[ends] = np.hstack([own, spare])
    at = np.empty(chunks, dtype=np.int64)  # each chunk's segment, by its position
    at[names] = _segment(np.arange(chunks), block, stages)
    owner = np.repeat(np.arange(p2), block - per)  # the member holding each spare chunk
    spare_from, spare_to = members[owner], spare.ravel() // per
    everything = np.arange(chunks)
    first = stages if len(folded) else 0  # the halving's or doubling's first step
    if collective == "reduce_scatter":
        for i in folded.tolist():
            b.add_rank_arrays(at, everything, np.full(chunks, i), np.full(chunks, i + 1), "reduce")
        step = _halve(b, members, names, first, stages)[2]
        b.add_rank_arrays(step + at[spare.ravel()], spare.ravel(), spare_from, spare_to, "copy")
    else:
        b.add_rank_arrays(at[spare.ravel()], spare.ravel(), spare_to, spare_from, "copy")
        _, step = _double(b, members, names, ends * block, block, first, stages)
        for i in folded.tolist():
            theirs = np.setdiff1d(everything, np.arange(i * per, (i + 1) * per))
            b.add_rank_arrays(
                step + at[theirs], theirs, np.full(len(theirs), i + 1), np.full(len(theirs), i), "copy"
            )
    return b.build()


register("rhd", "recursive halving-doubling (Rabenseifner), any number of ranks")(_builder("allreduce"))
register("rhd", "", "reduce_scatter")(_builder("reduce_scatter"))
register("rhd", "", "allgather")(_builder("allgather"))
