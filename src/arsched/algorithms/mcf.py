"""`mcf`: AllToAll routed by the maximum concurrent multicommodity flow (the LP of
`collective_bounds.alltoall_flow`, whose rate is AllToAll's bound).

Each rank's traffic in the LP's optimum is split into paths to each destination (a flow
decomposition: the fewest-hop path in what is left of the source's flow, as much as it carries,
until the destination's demand is met), and each block's `pieces` pieces are dealt to its
paths in proportion to their flow (largest remainders). Every piece goes in one step, straight
from its source to its destination along its path (servers on it relay, as in BCube and DCell):
where the direct routes crowd some links (several ports per server, one-way links, a torus), the
pieces spread over the paths the LP found. With few pieces the deal rounds the LP's split,
which costs a little: `pieces` trades that against the number of transfers.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from arsched.algorithms.common import check_nbytes, check_ranks, chunk_multiple
from arsched.algorithms.registry import NotApplicable, register
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.collective_bounds import alltoall_flow
from arsched.errors import ArschedError
from arsched.topology.core import Topology

PIECES = 16  # default pieces per block
TOLERANCE = 1e-9  # flow below this share of the rate is rounding, not a path


def decompose(topology: Topology, flow: np.ndarray, src: int, sinks: np.ndarray, demand: float) -> list:
    """Paths (node indices) and rates of a single-source flow (`flow[e]` bytes/s on link e)
    that carries `demand` from node `src` to each of `sinks`: per sink, the fewest-hop path in
    what is left, as much as it carries, until the sink's demand is met."""
    c = topology.compiled
    left = flow.copy()
    tiny = TOLERANCE * demand
    out = []
    for sink in sinks:
        need = demand
        while need > tiny:
            on = left > tiny
            g = sp.csr_array(
                (np.flatnonzero(on) + 1, (c.link_src[on], c.link_dst[on])), shape=(c.num_nodes,) * 2
            )
            _, pred = breadth_first_order(g, src, directed=True, return_predecessors=True)
            if pred[sink] < 0:
                break  # what is left is rounding
            nodes = [int(sink)]
            while nodes[-1] != src:
                nodes.append(int(pred[nodes[-1]]))
            nodes.reverse()
            links = np.array([g[a, b] - 1 for a, b in itertools.pairwise(nodes)])
            amount = min(need, float(left[links].min()))
            left[links] -= amount
            need -= amount
            out.append((int(sink), nodes, amount))
    return out


def deal(rates: np.ndarray, pieces: int) -> np.ndarray:
    """Whole pieces per path in proportion to `rates` (largest remainders, first path first at
    ties)."""
    share = rates / rates.sum() * pieces
    count = np.floor(share).astype(np.int64)
    extra = pieces - int(count.sum())
    order = np.lexsort((np.arange(len(rates)), -(share - count)))
    count[order[:extra]] += 1
    return count


@register("mcf", "AllToAll over the paths of the maximum concurrent multicommodity flow (an LP)", "alltoall")
def mcf(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, pieces: int = PIECES
) -> Schedule:
    """Every block's pieces over the LP's paths, in one step."""
    rs = check_ranks(topology, ranks, "mcf")
    nbytes = check_nbytes(nbytes, "mcf")
    if not (isinstance(pieces, (int, np.integer)) and pieces >= 1):
        raise ArschedError(f"mcf: pieces must be a positive integer, got {pieces!r}")
    n = len(rs)
    chunks = chunk_multiple(n * n * int(pieces), n * n, "mcf", ranks=n, transfers=lambda k: k)
    flow = alltoall_flow(topology, rs)
    if flow is None:
        raise NotApplicable(f"mcf: the flow LP over {n} ranks of {topology.name} is too large")
    c = topology.compiled
    ids = c.node_ids
    nodes = np.array([c.index[r] for r in rs])
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "mcf", {"params": {"pieces": int(pieces)}}, collective="alltoall"
    )
    for s in range(n):
        sinks = nodes[np.arange(n) != s]
        paths = decompose(topology, flow.flows[s], int(nodes[s]), sinks, flow.rate)
        for d_node in sinks:
            d = int(np.flatnonzero(nodes == d_node)[0])
            mine = [(p, a) for sink, p, a in paths if sink == d_node]
            first = (s * n + d) * int(pieces)
            counts = deal(np.array([a for _, a in mine]), int(pieces))
            piece = first
            for (p, _), k in zip(mine, counts, strict=True):
                for _ in range(k):
                    b.add(0, piece, rs[s], rs[d], "copy", [ids[v] for v in p])
                    piece += 1
    return b.build()
