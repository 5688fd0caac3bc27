"""Direct schemes for the collectives other than AllReduce: every piece of data goes straight from
where it is to where it must end, on routes spread over equal-cost paths (as `sharded-ps`, the
direct AllReduce, does).

- `direct`: one step. ReduceScatter: every rank adds each shard into its owner; AllGather: every
  owner copies its shard to every rank; Broadcast: the root copies the buffer to every rank;
  Reduce: every rank adds its buffer into the root; AllToAll: every block goes to its
  destination. Latency-optimal (one α), and bandwidth-optimal where the network is one
  non-blocking switch; elsewhere N − 1 flows share each rank's links at once.
- `pairwise` (AllToAll; the pairwise exchange of MPI libraries, Thakur, Rabenseifner & Gropp
  2005): N − 1 steps, in step t rank i sends its block for rank i + t (mod N), so that each
  rank sends to and receives from one peer at a time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, check_root, chunk_multiple
from arsched.algorithms.registry import register
from arsched.collective.kinds import ROOTED
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.topology.core import Topology


def _start(
    name: str,
    collective: str,
    topology: Topology,
    ranks: Sequence[str] | None,
    nbytes: float,
    chunks: int | None,
    unit,
    root: str | None = None,
) -> tuple[ScheduleBuilder, int, int]:
    """The builder (spread routes), the number of ranks and the chunk count (a multiple of
    `unit`(n); every scheme here moves each chunk to or from each rank at most once)."""
    rs = check_ranks(topology, ranks, name)
    nbytes = check_nbytes(nbytes, name)
    n = len(rs)
    chunks = chunk_multiple(chunks, unit(n), name, ranks=n, transfers=lambda c: c * (n - 1))
    params = {"chunks": chunks}
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, name, {"params": params}, spread=True, collective=collective
    )
    if collective in ROOTED:
        b.root = check_root(rs, root, name)
    return b, n, chunks


def _pairs(n: int, chunks: int, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(chunk, other rank) of every chunk with every rank but its owner."""
    c = np.repeat(np.arange(chunks), n - 1)
    k = np.tile(np.arange(1, n), chunks)
    return c, (owner[c] + k) % n


def _sharded(collective: str, op: str):
    def build(
        topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
    ) -> Schedule:
        b, n, chunks = _start("direct", collective, topology, ranks, nbytes, chunks, lambda n: n)
        owner = np.arange(chunks) // (chunks // n)
        c, other = _pairs(n, chunks, owner)
        if op == "reduce":
            b.add_rank_arrays(0, c, other, owner[c], "reduce")
        else:
            b.add_rank_arrays(0, c, owner[c], other, "copy")
        return b.build()

    build.__doc__ = f"Direct {collective} in one step."
    return build


def _rooted(collective: str):
    def build(
        topology: Topology,
        ranks: Sequence[str] | None = None,
        nbytes: float = 1e8,
        chunks: int | None = None,
        root: str | None = None,
    ) -> Schedule:
        b, n, chunks = _start("direct", collective, topology, ranks, nbytes, chunks, lambda n: 1, root)
        owner = np.full(chunks, b.ranks.index(b.root))
        c, other = _pairs(n, chunks, owner)
        if collective == "broadcast":
            b.add_rank_arrays(0, c, owner[c], other, "copy")
        else:
            b.add_rank_arrays(0, c, other, owner[c], "reduce")
        return b.build()

    build.__doc__ = f"Direct {collective} in one step."
    return build


register("direct", "every piece straight to where it ends, in one step", "reduce_scatter")(
    _sharded("reduce_scatter", "reduce")
)
register("direct", "", "allgather")(_sharded("allgather", "copy"))
register("direct", "", "broadcast")(_rooted("broadcast"))
register("direct", "", "reduce")(_rooted("reduce"))


def _blocks(n: int, chunks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chunk, source, destination) of every AllToAll chunk between two different ranks."""
    c = np.arange(chunks)
    src, dst = np.divmod(c // (chunks // (n * n)), n)
    far = src != dst
    return c[far], src[far], dst[far]


@register("direct", "", "alltoall")
def direct_alltoall(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Direct AllToAll: every block to its destination in one step."""
    b, n, chunks = _start("direct", "alltoall", topology, ranks, nbytes, chunks, lambda n: n * n)
    c, src, dst = _blocks(n, chunks)
    b.add_rank_arrays(0, c, src, dst, "copy")
    return b.build()


@register("pairwise", "pairwise-exchange AllToAll: N - 1 steps, one peer at a time", "alltoall")
def pairwise(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Pairwise-exchange AllToAll: in step t every rank sends its block for the rank t ahead."""
    b, n, chunks = _start("pairwise", "alltoall", topology, ranks, nbytes, chunks, lambda n: n * n)
    c, src, dst = _blocks(n, chunks)
    b.add_rank_arrays((dst - src) % n - 1, c, src, dst, "copy")
    return b.build()
