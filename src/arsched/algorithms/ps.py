"""Parameter servers: the baseline of the hierarchical-RL paper (arXiv 2503.21013).

`ps`: one server rank. Chunk c is reduced into the root in step c and copied back to every
rank in step c+1, so with several chunks the root receives and sends at once (pipelining; one
chunk is the classic two-phase PS). Without a given root, the root minimising the simulated
flow-model time among the most promising candidates is taken (ties: lowest rank index).

`sharded-ps`: every rank serves 1/N of the vector (the "all-to-all" reduce-scatter then
all-gather of BytePS-style sharded servers): step 0 every rank reduces each shard into its
owner, step 1 the owners copy the shards back. Its transfers take routes spread over equal-cost
paths at switches (as ECMP spreads all-to-all traffic; `ScheduleBuilder(spread=True)`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.registry import register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.errors import ArschedError
from arsched.topology.core import Topology

ROOT_CANDIDATES = 8


def _ps(topology: Topology, ranks: tuple[str, ...], nbytes: float, root: int, chunks: int) -> Schedule:
    b = ScheduleBuilder(
        topology, ranks, nbytes, chunks, "ps", {"params": {"root": ranks[root], "chunks": chunks}}
    )
    others = np.array([i for i in range(len(ranks)) if i != root])
    for c in range(chunks):
        b.add_rank_arrays(c, c, others, np.full(len(others), root), "reduce")
        b.add_rank_arrays(c + 1, c, np.full(len(others), root), others, "copy")
    return b.build()


def _ports(topology: Topology, ranks: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each rank's ingress and egress: the summed capacity of its links in and out."""
    c = topology.compiled
    idx = np.array([c.index[r] for r in ranks])
    ingress = np.bincount(c.link_dst, weights=c.capacity, minlength=c.num_nodes)[idx]
    return ingress, np.bincount(c.link_src, weights=c.capacity, minlength=c.num_nodes)[idx]


def _root_estimate(topology: Topology, ranks: tuple[str, ...]) -> np.ndarray:
    """Lower is better: the slower of the root's ingress and egress, then total hops."""
    ingress, egress = _ports(topology, ranks)
    hops = topology.router.hop_matrix(ranks).sum(axis=1)
    return 1.0 / np.minimum(ingress, egress) * 1e12 + hops


def _floor(topology: Topology, ranks: tuple[str, ...], nbytes: float, alpha: float) -> float:
    """All N − 1 other ranks' vectors enter the server: through its ingress, at best the largest
    of any rank's."""
    return (len(ranks) - 1) * nbytes / float(_ports(topology, ranks)[0].max())


@register("ps", "one parameter server: all ranks reduce into the root, the root copies back", floor=_floor)
def ps(
    topology: Topology,
    ranks: Sequence[str] | None = None,
    nbytes: float = 1e8,
    root: str | None = None,
    chunks: int = 1,
) -> Schedule:
    """Single parameter server (the RL paper's PS baseline); optimises nothing but simplicity."""
    from arsched.sim.flow import simulate_flow

    rs = check_ranks(topology, ranks, "ps")
    nbytes = check_nbytes(nbytes, "ps")
    chunks = chunk_multiple(chunks, 1, "ps", ranks=len(rs), paths=2 * len(rs))  # to and from the root
    if root is not None:
        if root not in rs:
            raise ArschedError(f"ps: root {root!r} is not one of the ranks")
        return _ps(topology, rs, nbytes, rs.index(root), chunks)
    order = np.argsort(_root_estimate(topology, rs), kind="stable")[:ROOT_CANDIDATES]
    best = min(
        (simulate_flow(_ps(topology, rs, nbytes, int(r), chunks)).time_s, int(r)) for r in sorted(order)
    )
    return _ps(topology, rs, nbytes, best[1], chunks)


@register("sharded-ps", "every rank is the server of 1/N of the vector")
def sharded_ps(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Sharded parameter server: bandwidth-optimal on a non-blocking star, N(N-1) flows a phase."""
    rs = check_ranks(topology, ranks, "sharded-ps")
    nbytes = check_nbytes(nbytes, "sharded-ps")
    n = len(rs)
    chunks = chunk_multiple(chunks, n, "sharded-ps", ranks=n, paths=n * (n - 1))  # every pair
    per = chunks // n
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "sharded-ps", {"params": {"chunks": chunks}}, spread=True
    )
    src, dst = np.nonzero(~np.eye(n, dtype=bool))  # every ordered pair of different ranks
    for k in range(per):
        # shard of owner d is chunks d*per ... d*per+per-1
        b.add_rank_arrays(0, dst * per + k, src, dst, "reduce")
        b.add_rank_arrays(1, src * per + k, src, dst, "copy")
    return b.build()
