"""Ring AllReduce (Patarasuk & Yuan 2009; NCCL's ring): reduce-scatter then all-gather.

The vector is cut into N segments (or a multiple: `chunks` = N·p moves p chunks per hop);
in step t rank r adds segment r−t into its successor, then the completed segments travel once
more around the ring as copies. 2(N−1) steps, bandwidth-optimal when every hop has its own
link. The ring order is topology-aware (`order='auto'`): the given order or a nearest-neighbour
tour, whichever has fewer hops in total.

The same ring builds the other collectives (NCCL's ring algorithms): ReduceScatter is its first
half and AllGather its second, with the segments named so that each rank ends with (or starts
from) its own shard; Broadcast and Reduce pipeline the chunks along the ring as a chain from
or to the root (chunk c crosses the h-th hop in step c + h): N − 2 + chunks steps, each rank
sending and receiving the whole buffer once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import (
    chain_floor,
    check_nbytes,
    check_ranks,
    check_root,
    chunk_multiple,
    pipeline_chunks,
    ring_order,
)
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology


def add_ring(b: ScheduleBuilder, positions: np.ndarray, first_chunk: int, per: int, step0: int = 0) -> int:
    """Append a ring over rank indices `positions` (in ring order) carrying chunks
    first_chunk ... first_chunk + n·per − 1; returns the number of steps used."""
    n = len(positions)
    segments = np.arange(n)
    _half(b, positions, segments, first_chunk, per, step0, "reduce")
    _half(b, positions, segments, first_chunk, per, step0 + n - 1, "copy")
    return 2 * (n - 1)


def _half(
    b: ScheduleBuilder, positions: np.ndarray, segments: np.ndarray, first: int, per: int, step0: int, op: str
) -> None:
    """One half of the ring: reduce-scatter (position i adds segment i − t into i + 1, so that
    position i ends with segment i + 1) or all-gather (position i forwards segment i + 1 − t);
    segment s is chunks first + segments[s]·per ... + per − 1."""
    n = len(positions)
    pos = np.arange(n)
    src, dst = positions, positions[(pos + 1) % n]
    shift = 0 if op == "reduce" else 1
    for t in range(n - 1):
        for k in range(per):
            b.add_rank_arrays(step0 + t, first + segments[(pos + shift - t) % n] * per + k, src, dst, op)


def _ring_builder(
    topology: Topology, ranks: Sequence[str] | None, nbytes: float, chunks: int | None, order: str, unit
) -> tuple[ScheduleBuilder, np.ndarray, int]:
    """Checked ranks and size, the chunk count (a multiple of `unit`(n)), the builder and the
    ring as rank indices."""
    rs = check_ranks(topology, ranks, "ring")
    nbytes = check_nbytes(nbytes, "ring")
    if order not in ("auto", "given"):
        raise ArschedError(f"ring: order must be 'auto' or 'given', got {order!r}")
    n = len(rs)
    chunks = chunk_multiple(chunks, unit(n), "ring", ranks=n, paths=n)  # one per rank: to the next
    cycle = ring_order(topology, rs) if order == "auto" else rs
    index = {r: i for i, r in enumerate(rs)}
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "ring", {"params": {"chunks": chunks, "order": list(cycle)}}
    )
    return b, np.array([index[r] for r in cycle]), chunks


def _floor(topology: Topology, ranks: tuple[str, ...], nbytes: float, alpha: float) -> float:
    """Every chunk (1/N of the vector by default) is reduced around the ring and copied around it
    again: 2(N − 1) transfers in a chain."""
    n = len(ranks)
    return chain_floor(topology, ranks, 2 * (n - 1), nbytes / n, alpha) if n > 1 else 0.0


@register("ring", "NCCL-style ring: reduce-scatter then all-gather over a short-hop ring order", floor=_floor)
def ring(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    chunks: int | None = None,
    order: str = "auto",
) -> Schedule:
    """Ring AllReduce; `order='given'` keeps the rank order, 'auto' picks a short-hop ring."""
    b, positions, chunks = _ring_builder(topology, ranks, nbytes, chunks, order, lambda n: n)
    add_ring(b, positions, 0, chunks // len(positions))
    return b.build()


def _sharded(collective: str, op: str):
    """The ring builder of one half: ReduceScatter (reduces) or AllGather (copies)."""

    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        chunks: int | None = None,
        order: str = "auto",
    ) -> Schedule:
        b, positions, chunks = _ring_builder(topology, ranks, nbytes, chunks, order, lambda n: n)
        b.collective = collective
        # position p ends with (AllGather: starts from) segment p + 1: name it p's own shard
        _half(b, positions, np.roll(positions, 1), 0, chunks // len(positions), 0, op)
        return b.build()

    build.__doc__ = f"Ring {collective}: half of the ring AllReduce."
    return build


register("ring", "", "reduce_scatter")(_sharded("reduce_scatter", "reduce"))
register("ring", "", "allgather")(_sharded("allgather", "copy"))


def _chain(collective: str):
    """The ring builder of a rooted collective: a pipelined chain from (Broadcast) or to
    (Reduce) the root."""

    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        chunks: int | None = None,
        order: str = "auto",
        root: str | None = None,
    ) -> Schedule:
        rs = check_ranks(topology, ranks, "ring")
        if chunks is None:  # enough to pipeline the chain, not so many that α dominates
            chunks = pipeline_chunks(topology, rs, check_nbytes(nbytes, "ring"), len(rs) - 1)
        b, positions, chunks = _ring_builder(topology, rs, nbytes, chunks, order, lambda n: 1)
        b.collective, b.root = collective, check_root(b.ranks, root, "ring")
        at = int(np.flatnonzero(positions == b.ranks.index(b.root))[0])
        chain = np.roll(positions, -at)  # the root first
        if collective == "reduce":
            chain = np.concatenate([chain[:1], chain[1:][::-1]])  # towards the root, the other way
        hops = len(chain) - 1
        c, h = (x.ravel() for x in np.meshgrid(np.arange(chunks), np.arange(hops), indexing="ij"))
        if collective == "broadcast":  # chunk c crosses hop h at step c + h
            b.add_rank_arrays(c + h, c, chain[h], chain[h + 1], "copy")
        else:  # the far end first: hop h carries the partial sum of the h + 1 farthest ranks
            b.add_rank_arrays(c + h, c, chain[hops - h], chain[hops - h - 1], "reduce")
        return b.build()

    build.__doc__ = (
        f"Ring {collective}: a pipelined chain {'from' if collective == 'broadcast' else 'to'} the root."
    )
    return build


register("ring", "", "broadcast")(_chain("broadcast"))
register("ring", "", "reduce")(_chain("reduce"))
