"""The collectives a schedule may compute: what each rank's buffers hold before and must hold after.

Every collective uses the same buffer model (design §3.3): each rank has one buffer per chunk
and transfers keep a chunk's id. A collective is its pre-condition (which rank's data each
buffer starts with, or nothing usable) and its post-condition (the data each buffer must end
with, or none required). `nbytes` is always one rank's buffer; `num_chunks` splits it, except
for AllToAll, whose chunk ids name (source, destination) pairs, so that a rank's buffer is
`num_chunks / n` of them.

- `allreduce`: every buffer starts with its rank's data and ends with the sum over all ranks.
- `reduce_scatter`: `num_chunks` is a multiple of n; chunk c belongs to rank c // (num_chunks /
  n) (contiguous shards, as torch's `reduce_scatter_tensor`), whose buffer must end with the
  sum over all ranks; other buffers may end with anything.
- `allgather`: the same shards; a rank starts with only its own shard (its other buffers hold
  nothing usable) and every buffer must end with the owner's data (`all_gather_into_tensor`).
- `broadcast`: the root starts with its data in every chunk, the others with nothing usable;
  every buffer must end with the root's data.
- `reduce`: every buffer starts with its rank's data; the root's must end with the sum.
- `alltoall`: `num_chunks` is a multiple of n², chunk c = (s·n + d)·k + j (k = num_chunks /
  n², j < k) is piece j of the block rank s sends to rank d (`all_to_all_single` with equal
  splits); it starts at s and must end at d, other buffers hold nothing usable and need not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NAMES = ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall")
ROOTED = ("broadcast", "reduce")
NOTHING = -1  # a buffer holds no usable data (start), or may end with anything (goal)
EVERYONE = -2  # a buffer must end with the sum over all ranks
TITLES = dict(
    zip(NAMES, ("AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce", "AllToAll"), strict=True)
)


@dataclass(frozen=True)
class Collective:
    """One collective over `n` ranks split into `num_chunks` chunks; `root` is a rank index
    for broadcast and reduce, None for the others."""

    name: str
    n: int
    num_chunks: int
    root: int | None = None

    def problem(self) -> str | None:
        """Why these ranks and chunks cannot form this collective, in words; None if they can."""
        if self.name not in NAMES:
            return f"collective {self.name!r} is not one of {', '.join(NAMES)}"
        if (self.root is not None) != (self.name in ROOTED):
            return f"{self.name} needs a root rank" if self.name in ROOTED else f"{self.name} takes no root"
        shards = {"reduce_scatter": self.n, "allgather": self.n, "alltoall": self.n * self.n}.get(self.name)
        if shards is not None and self.num_chunks % shards:
            return (
                f"{self.name} over {self.n} ranks needs a multiple of {shards} chunks, not {self.num_chunks}"
            )
        return None

    @property
    def per_buffer(self) -> int:
        """How many chunks make one rank's buffer of `nbytes`."""
        return self.num_chunks // self.n if self.name == "alltoall" else self.num_chunks

    def _shard(self, chunks: np.ndarray) -> np.ndarray:
        return chunks // (self.num_chunks // self.n)

    def _pair(self, chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(source, destination) rank of AllToAll chunks."""
        return np.divmod(chunks // (self.num_chunks // (self.n * self.n)), self.n)

    def start(self, chunks: np.ndarray) -> np.ndarray:
        """(n, len(chunks)): the rank whose data each buffer starts with, or NOTHING."""
        ranks = np.arange(self.n)[:, None]
        own = np.broadcast_to(ranks, (self.n, len(chunks)))
        if self.name in ("allreduce", "reduce_scatter", "reduce"):
            return own.copy()
        if self.name == "allgather":
            holder = self._shard(chunks)[None, :]
        elif self.name == "broadcast":
            holder = np.full((1, len(chunks)), self.root)
        else:
            holder = self._pair(chunks)[0][None, :]
        return np.where(own == holder, own, NOTHING)

    def goal(self, chunks: np.ndarray) -> np.ndarray:
        """(n, len(chunks)): what each buffer must end with: EVERYONE (the sum), one rank's data,
        or NOTHING required."""
        shape = (self.n, len(chunks))
        ranks = np.arange(self.n)[:, None]
        if self.name == "allreduce":
            return np.full(shape, EVERYONE)
        if self.name == "reduce_scatter":
            return np.where(ranks == self._shard(chunks)[None, :], EVERYONE, NOTHING)
        if self.name == "allgather":
            return np.broadcast_to(self._shard(chunks)[None, :], shape).copy()
        if self.name == "broadcast":
            return np.full(shape, self.root)
        if self.name == "reduce":
            return np.where(np.broadcast_to(ranks == self.root, shape), EVERYONE, NOTHING)
        src, dst = self._pair(chunks)
        return np.where(ranks == dst[None, :], src[None, :], NOTHING)

    def first_unmoved(self, touched: np.ndarray) -> int | None:
        """The smallest chunk id that no transfer touches (`touched`: sorted distinct ids) and
        yet must move to meet the goal; None if there is none. Only AllToAll has chunks that
        need no transfer (a rank's block to itself); with one rank nothing needs to move."""
        if self.n == 1:
            return None
        a = np.concatenate([[0], touched + 1])  # every run of untouched ids [a, b)
        b = np.concatenate([touched, [self.num_chunks]])
        first = a
        if self.name == "alltoall":
            k = self.num_chunks // (self.n * self.n)
            pair = a // k
            first = np.where(pair // self.n == pair % self.n, (pair + 1) * k, a)  # skip a self block
        ok = first < b
        return int(first[ok].min()) if ok.any() else None

    @property
    def title(self) -> str:
        """The collective's usual name (AllReduce, ReduceScatter, ...), for reports."""
        return TITLES[self.name]
