"""AllReduce as a ReduceScatter followed by an AllGather, each built by any algorithm that builds it.

The two halves of most bandwidth-optimal AllReduce schemes (ring, halving-doubling, sharded
servers) are a ReduceScatter and an AllGather over the same shards; `rs-ag` joins any pair: the
ReduceScatter leaves rank r with the sum of shard r, exactly where the AllGather starts from.
The AllGather's steps follow the ReduceScatter's, so each of its transfers waits only for the
shard it forwards (asynchronous execution overlaps the halves where the data allows).

The halves may cut the buffer into different numbers of chunks (a builder without `chunks`,
such as tree packing, picks its own): both are then refined to the least common multiple
(`refine`: chunk c of C becomes chunks c·k .. c·k + k − 1 of C·k, each transfer one per
piece), which keeps every shard's bytes where they were; where that would not fit in memory
the limit says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks
from arsched.algorithms.registry import build, register
from arsched.collective.schedule import OPS, Schedule, ScheduleBuilder
from arsched.errors import ArschedError
from arsched.limits import check_schedule
from arsched.topology.core import Topology

NAME = "rs-ag"


def refine(s: Schedule, chunks: int) -> Schedule:
    """`s` over `chunks` chunks, a multiple of its own: every chunk cut into equal pieces and
    every transfer repeated once per piece, in the same step on the same path."""
    k = chunks // s.num_chunks
    if k == 1:
        return s
    cols = {f: np.repeat(getattr(s, f), k) for f in ("step", "src", "dst", "op", "path_id")}
    chunk = (s.chunk[:, None] * k + np.arange(k)[None, :]).ravel()
    return dataclasses.replace(s, num_chunks=chunks, chunk=chunk, **cols)


def concatenate(parts: Sequence[Schedule], b: ScheduleBuilder) -> Schedule:
    """The transfers of `parts` (over the same ranks), one after the other in `b`: each part's
    steps start after the previous part's last."""
    step0 = 0
    for s in parts:
        if s.ranks != b.ranks:
            raise ArschedError(f"{b.algorithm}: the parts run over different ranks")
        if not len(s):
            continue
        path_ids = np.array([b.intern_path(p) for p in s.paths], dtype=np.int64)
        rank_of = s.rank_of_node
        steps = s.step - s.step.min() + step0
        for code, op in enumerate(OPS):
            m = s.op == code
            b.add_rank_arrays(
                steps[m], s.chunk[m], rank_of[s.src[m]], rank_of[s.dst[m]], op, path_ids[s.path_id[m]]
            )
        step0 = int(steps.max()) + 1
    return b.build()


@register(NAME, "AllReduce as any ReduceScatter then any AllGather (reduce_scatter=, allgather= name them)")
def rs_ag(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    reduce_scatter: str = "ring",
    allgather: str = "ring",
    chunks: int | None = None,
) -> Schedule:
    """The ReduceScatter of `reduce_scatter` then the AllGather of `allgather`, both with
    `chunks` (default N, every builder's default for these)."""
    rs = check_ranks(topology, ranks, NAME)
    nbytes = check_nbytes(nbytes, NAME)
    extra = {} if chunks is None else {"chunks": chunks}
    first = build(reduce_scatter, topology, rs, nbytes, collective="reduce_scatter", **extra)
    second = build(allgather, topology, rs, nbytes, collective="allgather", **extra)
    return join(first, second, NAME, {"reduce_scatter": reduce_scatter, "allgather": allgather})


def join(first: Schedule, second: Schedule, name: str, params: dict, meta: dict | None = None) -> Schedule:
    """The AllReduce `name` of the ReduceScatter `first` then the AllGather `second` (over the
    same ranks), both refined to a common chunk count (`refine`); `params` (with the chunk
    count added) and `meta` go into its meta."""
    chunks = math.lcm(first.num_chunks, second.num_chunks)
    transfers = sum(len(s) * (chunks // s.num_chunks) for s in (first, second))
    check_schedule(name, len(first.ranks), chunks, transfers)
    parts = [refine(first, chunks), refine(second, chunks)]
    info = {**(meta or {}), "params": {**params, "chunks": chunks}}
    b = ScheduleBuilder(first.topology, first.ranks, first.nbytes, chunks, name, info)
    return concatenate(parts, b)
