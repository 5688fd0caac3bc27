"""The ReduceScatter and AllGather halves of an AllReduce that sums every chunk into one rank
and copies it out from there.

Most bandwidth-optimal AllReduce schemes are a reduce-scatter followed by an all-gather
(Thakur, Rabenseifner and Gropp, IJHPCA 2005; Patarasuk and Yuan, JPDC 2009): every chunk is
summed into one rank, its owner, by reduces, then copied from the owner to every rank. Where
every rank owns as many chunks as every other, the reduces alone are a ReduceScatter and the
copies alone an AllGather, once the chunks are renumbered so that rank r's are the r-th
contiguous shard (`split`). So a family's AllReduce design gives its ReduceScatter and AllGather
with the same optimality argument: each half moves half the AllReduce's bytes over the same
links, in the same proportions, against a bound that is half the AllReduce's (ForestColl's cut
bound). `halved` registers the halves of the families with that structure; tree packing's
ReduceScatter and AllGather weigh the halves of its balanced steps.

Example::

    rs, ag = split(build("torus-native", parse_spec("torus:dims=4x4")))
"""

from __future__ import annotations

import dataclasses

import numpy as np

from arsched.algorithms.registry import NotApplicable
from arsched.collective.kinds import TITLES
from arsched.collective.schedule import COPY, REDUCE, Schedule

SHARDED = {"reduce_scatter": REDUCE, "allgather": COPY}  # the op each half keeps


def split(schedule: Schedule) -> tuple[Schedule, Schedule]:
    """The (ReduceScatter, AllGather) halves of an AllReduce `schedule` whose every chunk is
    reduced into one rank in steps before any copy of it, that rank sending every copy of the
    chunk's first copy step; NotApplicable where it is not so, or where the ranks own unequal
    numbers of chunks (a shard is a contiguous block of num_chunks / N chunks)."""
    return half(schedule, "reduce_scatter"), half(schedule, "allgather")


def half(schedule: Schedule, collective: str) -> Schedule:
    """The `collective` ('reduce_scatter' or 'allgather') half of `schedule` (see `split`): its
    reduces or its copies, chunks renumbered by owner, steps from 0, only the paths it uses."""
    s = schedule
    shard = _shard_numbers(s)
    keep = s.op == SHARDED[collective]
    used, path_id = np.unique(s.path_id[keep], return_inverse=True)
    step = s.step[keep]
    return dataclasses.replace(
        s,
        step=step - (step.min() if len(step) else 0),
        chunk=shard[s.chunk[keep]],
        src=s.src[keep],
        dst=s.dst[keep],
        op=s.op[keep],
        path_id=path_id.ravel(),
        paths=tuple(s.paths[p] for p in used.tolist()),
        meta={**s.meta, "half_of": "allreduce"},
        collective=collective,
        root=None,
    )


def _shard_numbers(s: Schedule) -> np.ndarray:
    """The new number of every chunk: its owner's shard block, old order kept inside it."""
    where = f"{s.algorithm}'s AllReduce"
    if s.collective != "allreduce":
        raise NotApplicable(f"{where}: only an AllReduce has halves, not a {TITLES[s.collective]}")
    n, c = s.num_ranks, s.num_chunks
    reduce = s.op == REDUCE
    last_reduce = np.full(c, -1, dtype=np.int64)
    np.maximum.at(last_reduce, s.chunk[reduce], s.step[reduce])
    first_copy = np.full(c, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_copy, s.chunk[~reduce], s.step[~reduce])
    if (last_reduce >= first_copy).any():
        raise NotApplicable(f"{where} copies a chunk before its last reduce: it has no halves")
    src = s.rank_of_node[s.src]
    opening = ~reduce & (s.step == first_copy[s.chunk])
    owner = np.full(c, -1, dtype=np.int64)
    owner[s.chunk[opening]] = src[opening]
    if (owner < 0).any() or (owner[s.chunk[opening]] != src[opening]).any():
        raise NotApplicable(f"{where} does not copy every chunk out of one rank: it has no halves")
    if not _copies_spread_from(
        owner, s.chunk[~reduce], src[~reduce], s.rank_of_node[s.dst[~reduce]], s.step[~reduce], n
    ):
        raise NotApplicable(
            f"{where} does not copy every chunk from its owner to every rank: it has no halves"
        )
    if (np.bincount(owner, minlength=n) != c // n).any() or c % n:
        raise NotApplicable(f"{where} leaves its ranks owning unequal numbers of chunks: no equal shards")
    shard = np.empty(c, dtype=np.int64)
    shard[np.argsort(owner, kind="stable")] = np.arange(c)
    return shard


def _copies_spread_from(
    owner: np.ndarray, chunk: np.ndarray, src: np.ndarray, dst: np.ndarray, step: np.ndarray, n: int
) -> bool:
    """True if every copy leaves the chunk's owner or a rank that received a copy of it in an
    earlier step, and every rank but the owner receives one: then the copies alone carry the
    owner's value to every rank, which is what makes them an AllGather (and the owner's value
    the full sum, since copies overwrite)."""
    key = chunk * n + dst
    first = np.full(len(owner) * n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, key, step)
    first[np.arange(len(owner)) * n + owner] = -1  # the owner holds it from the start
    return bool((first[chunk * n + src] < step).all() and (first < np.iinfo(np.int64).max).all())
