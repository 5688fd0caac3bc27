"""Broadcast by a scatter and an all-gather, Reduce by its mirror: the long-message Broadcast of
MPI libraries (Barnett, Gupta, Payne, Shuler, van de Geijn & Watts 1994; Thakur, Rabenseifner &
Gropp 2005) and Rabenseifner's Reduce (2004), with a direct all-gather, pipelined.

The buffer is cut into N − 1 pieces, one per rank but the root. Broadcast: the root copies each
rank its piece, and that rank copies it on to the N − 2 others. As trees: piece q goes down a
tree two hops deep, the root above q and q above everyone else. Every rank then receives the
buffer once and sends it about once (the root: once, to the owners), so where the network is
one non-blocking switch (a fat-tree or a leaf-spine without oversubscription) the time
approaches the buffer over one link, the bound, at any number of ranks, through trees of depth
two where binary trees are log2 N deep and a chain N − 1 (each hop a chunk's time and an α
per chunk to fill the pipeline). Reduce runs the same trees upwards: every rank but the root
adds its part of piece q into q, then q adds its sum into the root (whose own data is already
where the sum ends). The price: every rank has a connection to every other, N − 2 at once,
which a network that is not one switch (a torus, a BCube, racks above thin uplinks) carries
over shared links; there the trees of `tree-packing`, `group-trees` or `dbtree` are faster.

Pipelined as `trees.rooted_schedule` pipelines any rooted trees: chunk c on piece c mod (N − 1),
`chunks` a multiple of N − 1. All pieces share the root's link, so the root's round k (chunk k
of every piece) ends at k/p of the buffer's time T (p chunks per piece) and the owners forward
the last round after T: about T/p exposed, against an α per chunk on each of an owner's N − 2
connections, all starting together. The default p (`default_chunks`) is half of √(T/α), where
it was fastest on a k=8 fat-tree, a star of 8 and a non-blocking leaf-spine of 16 at 16 and
256 MB (flow model, in-order connections; one-offs), within `TRANSFERS` transfers: every round
is (N − 1)² of them, so at a thousand ranks one round is all there is.
"""

from __future__ import annotations

import math

import numpy as np

from arsched.algorithms.common import rank_out_capacity
from arsched.algorithms.trees import register_rooted
from arsched.defaults import DEFAULT_ALPHA
from arsched.topology.core import Topology

TRANSFERS = 1 << 20  # the default's chunks keep the schedule within this many transfers


def pieces(topology: Topology, ranks: tuple[str, ...], root: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The N − 1 trees over positions (the root at position 0, the other ranks after it in rank
    order from the root's): tree q − 1 has the root above q and q above every other position."""
    n = len(ranks)
    members = (np.arange(n) + root) % n
    trees = []
    for q in range(1, n):
        parent = np.full(n, q)
        parent[0], parent[q] = -1, 0
        trees.append(parent)
    return trees, members


def default_chunks(topology: Topology, ranks: tuple[str, ...], nbytes: float) -> int:
    """p·(N − 1) chunks, p = ½·√(T/α) with T the buffer over the slowest rank's egress and α the
    flow model's default, at least 1 and at most what `TRANSFERS` allows."""
    n = len(ranks)
    exposed = nbytes / float(rank_out_capacity(topology, ranks).min())
    p = round(math.sqrt(exposed / DEFAULT_ALPHA) / 2)
    return int(np.clip(p, 1, max(1, TRANSFERS // max((n - 1) ** 2, 1)))) * max(n - 1, 1)


register_rooted(
    "scatter-allgather",
    "Broadcast: scatter, then a direct all-gather (van de Geijn); Reduce: its mirror",
    pieces,
    "{what} the root in N − 1 pieces, each down (Broadcast) or up (Reduce) a tree two hops deep: "
    "the root and the piece's owner, who copies it to, or sums it from, every other rank; "
    "`chunks` a multiple of N − 1 (default: `default_chunks`).",
    default_chunks=default_chunks,
)
