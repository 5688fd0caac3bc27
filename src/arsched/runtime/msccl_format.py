"""MSCCL XML: the vocabulary that export and import share.

The MSCCL runtime (microsoft/msccl-executor-nccl) runs a collective written as XML: `<algo>`
holds one `<gpu>` per rank, each with thread blocks `<tb>` that execute their `<step>`s in
order. A thread block sends to at most one peer and receives from at most one; each (peer,
channel) is a connection that delivers in order. A step may first wait for a step of another
thread block of the same GPU (`depid` = that block, `deps` = its step); a step others wait for
is marked `hasdep="1"`; a step that must wait for several goes after `nop` steps that carry the
extra waits. The limits below are the runtime's own constants.

`Buffers` says where each chunk id of a schedule lives in MSCCL's input (`i`), output (`o`) and
scratch (`s`) buffers, per collective, so that export and import read the program alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from arsched.errors import ArschedError

PROTOCOLS = ("Simple", "LL", "LL128")
MAX_STEPS_PER_TB = 256  # MSCCL_MAX_NUM_STEPS: the interpreter's limit per thread block
MAX_TBS = 216  # MSCCL_MAX_NUM_THREAD_BLOCKS per gpu (two per A100 SM)
MAX_TBS_PER_CHANNEL = 32  # MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL, for sends and for receives
MAX_BYTES = 2**63 - 1  # "every size": the largest int64 the runtime reads for maxBytes
MAX_COUNT = 71  # chunks one step may move: the runtime needs cnt < MSCCL_MAX_COUNT (72)

# arsched's collective -> the runtime's `coll` (msccl-executor-nccl's parser); import also takes
# msccl-tools' spelling `reduce_scatter`
COLLS = {
    "allreduce": "allreduce",
    "reduce_scatter": "reducescatter",
    "allgather": "allgather",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "alltoall",
}
FROM_COLL = {coll: name for name, coll in COLLS.items()} | {"reduce_scatter": "reduce_scatter"}

# step type -> (receives, reduces, sends); local ops and nop do none of these
STEP_TYPES = {
    "s": (False, False, True),
    "r": (True, False, False),
    "rrc": (True, True, False),
    "rcs": (True, False, True),
    "rrcs": (True, True, True),
    "rrs": (True, True, True),
    "cpy": (False, False, False),
    "re": (False, False, False),
    "nop": (False, False, False),
}


class MscclFormatError(ArschedError):
    """An MSCCL XML file is malformed or describes something a schedule cannot hold."""


@dataclass(frozen=True)
class Buffers:
    """Where chunk c (of `num_chunks`) of gpu r lives in MSCCL's buffers, for `collective` over
    `n` gpus. Every collective but AllToAll runs in place, as the runtime's in-place calls lay
    it out: AllReduce, Broadcast and Reduce on `i` (= `o`) at offset c; ReduceScatter on its
    input `i` at offset c (the output `o` is gpu r's shard, `i` from offset r·k, k = chunks / n);
    AllGather on its output `o` at offset c (the input `i` is gpu r's shard inside it). AllToAll
    runs out of place, as its MSCCL programs do: chunk c = (s·n + d)·k + j (k = chunks / n²) is
    `i` offset d·k + j at s, `o` offset s·k + j at d and `s` offset c at any other gpu it passes;
    each gpu's block to itself is one local copy from `i` to `o`."""

    collective: str
    n: int
    num_chunks: int

    @property
    def per_loop(self) -> int:
        """MSCCL's `nchunksperloop`: the chunks of the buffer the runtime sizes them by (the
        input of AllToAll and ReduceScatter, the output of AllGather, the vector otherwise)."""
        return self.num_chunks // self.n if self.collective == "alltoall" else self.num_chunks

    @property
    def block(self) -> int:
        """k: chunks per shard (ReduceScatter, AllGather) or per block (AllToAll); 1 otherwise."""
        if self.collective in ("reduce_scatter", "allgather"):
            return self.num_chunks // self.n
        return self.num_chunks // (self.n * self.n) if self.collective == "alltoall" else 1

    def sizes(self, scratch: bool) -> dict[str, int]:
        """Chunks of each buffer of one gpu; `scratch`: whether it relays AllToAll chunks."""
        c, k = self.num_chunks, self.block
        if self.collective == "reduce_scatter":
            return {"i": c, "o": k, "s": 0}
        if self.collective == "allgather":
            return {"i": k, "o": c, "s": 0}
        if self.collective == "alltoall":
            return {"i": self.per_loop, "o": self.per_loop, "s": c if scratch else 0}
        return {"i": c, "o": c, "s": 0}

    def place(self, rank: int, chunk: int) -> tuple[str, int]:
        """(buffer, offset) of `chunk` on gpu `rank`."""
        if self.collective == "allgather":
            return "o", chunk
        if self.collective != "alltoall":
            return "i", chunk
        k, n = self.block, self.n
        pair, j = divmod(chunk, k)
        src, dst = divmod(pair, n)
        if rank == src:
            return "i", dst * k + j
        return ("o", src * k + j) if rank == dst else ("s", chunk)

    def chunk(self, rank: int, buf: str, offset: int) -> int:
        """The chunk id at (`buf`, `offset`) of gpu `rank`, which `sizes` bounds."""
        k, n = self.block, self.n
        shard = {"reduce_scatter": "o", "allgather": "i"}.get(self.collective)
        if buf == shard:
            return rank * k + offset
        if self.collective != "alltoall" or buf == "s":
            return offset
        block, j = divmod(offset, k)
        pair = rank * n + block if buf == "i" else block * n + rank
        return pair * k + j
