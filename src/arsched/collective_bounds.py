"""Lower bounds for every collective (`collective.kinds`), beside AllReduce's in `bounds`.

Bandwidth bounds, for `nbytes` = one rank's buffer (as in the schedule format):
- **AllGather**: T*_AG, the cut bound of `bounds.allgather_cut` (ForestColl's): the ranks
  outside a node set S need the shards of the k ranks inside, k/N of the buffer, through the
  links leaving S.
- **ReduceScatter**: the same bound on the network with every link reversed: the shards of the
  ranks outside S need the contributions of those inside (which may be summed on the way, so
  at least one shard's worth per outside rank leaves S); on a network whose links come in
  equal pairs it equals AllGather's.
- **Broadcast**: the buffer must reach every rank, so at least `nbytes` / λ(root → r) for the
  rank r with the least max flow λ from the root; **Reduce**: the same towards the root.
- **AllToAll**: each ordered pair of ranks must move one block, `nbytes` / N. Averaged over
  any schedule's time T, the pairs' rates B / T form a concurrent multicommodity flow, so T ≥
  B / r* with r* the maximum concurrent flow (`alltoall_flow`: an LP, flows aggregated by
  source, which is exact for it, solved by HiGHS). Where the LP would be too large (more than
  `MAX_FLOW_VARIABLES` source × link variables) the bound falls back to the best of a set of
  candidate cuts: through any node set S with k of the N ranks, k(N − k)/N of a buffer must
  leave (every single rank, and AllGather's binding cut on the network and on its reverse),
  valid but looser on sparse or oversubscribed networks.
- **AllReduce**: `bounds.allreduce_bound`.

Latency bounds (flow model): α plus the slowest fastest path between ranks that must meet:
every pair for the all-to-all-shaped four, the root and each rank for Broadcast and Reduce.
The round model's extra ⌈log_{k+1} N⌉ levels (`bounds.latency_bound`) is applied to the
unrooted ones only.

Max flows run on integer capacities (scipy); where bandwidths share no exact unit each is
rounded up, which can only raise a flow and so lower, never break, the bound.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse.csgraph import maximum_flow

from arsched.bounds import (
    BoundError,
    allgather_cut,
    allreduce_bound,
    bound_ranks,
    integer_capacities,
    latency_bound,
    rank_latencies,
)
from arsched.topology.core import Link, Topology

MAX_FLOW_VARIABLES = 25_000  # source × link variables of the AllToAll LP (BCube(4,2): 24,576, 5 s)
METHOD = "highs-ipm"  # 4.7x faster than dual simplex on BCube(4,2), the same rate

_REVERSED: weakref.WeakKeyDictionary[Topology, Topology | None] = weakref.WeakKeyDictionary()
_FLOWS: weakref.WeakKeyDictionary[Topology, dict] = weakref.WeakKeyDictionary()


def reversed_topology(topology: Topology) -> Topology:
    """The network with every link turned around (the same object where links come in equal
    pairs); cached per topology (topologies compare by content, so the cache keeps None for
    "itself" rather than another, equal object)."""
    if topology not in _REVERSED:
        c = topology.compiled
        back = np.asarray(c.adjacency[c.link_dst, c.link_src]).ravel() - 1
        if (back >= 0).all() and np.array_equal(c.capacity[back], c.capacity):
            _REVERSED[topology] = None
        else:
            links = [Link(lk.dst, lk.src, lk.bandwidth, lk.latency) for lk in topology.links]
            nodes = [(v, topology.kind(v)) for v in topology.nodes]
            _REVERSED[topology] = Topology(f"{topology.name} reversed", nodes, links)
    return _REVERSED[topology] or topology


def root_flows(topology: Topology, root: str, ranks: Sequence[str]) -> np.ndarray:
    """Max flow in bytes/s from `root` to every rank (0 for the root itself); cached."""
    c = topology.compiled
    caps, _ = integer_capacities(c.capacity)
    unit = float(np.max(c.capacity / caps))  # one integer unit is at least this many bytes/s
    key = (root, tuple(ranks))
    cache = _FLOWS.setdefault(topology, {})
    if key not in cache:
        g = sp.csr_array((caps.astype(np.int32), (c.link_src, c.link_dst)), shape=(c.num_nodes, c.num_nodes))
        s = c.index[root]
        cache[key] = np.array(
            [0.0 if r == root else maximum_flow(g, s, c.index[r]).flow_value * unit for r in ranks]
        )
    return cache[key]


def bandwidth_bound(
    topology: Topology, ranks: Sequence[str] | None, nbytes: float, collective: str, root: str | None = None
) -> float:
    """Seconds any schedule of `collective` needs to move its data (see the module doc)."""
    rs = bound_ranks(topology, ranks)
    if collective == "allreduce":
        return allreduce_bound(topology, rs, nbytes)
    if collective == "allgather":
        return allgather_cut(topology, rs).seconds_per_byte * nbytes
    if collective == "reduce_scatter":
        return allgather_cut(reversed_topology(topology), rs).seconds_per_byte * nbytes
    if collective in ("broadcast", "reduce"):
        if root not in rs:
            raise BoundError(f"{collective} needs a root among the ranks, got {root!r}")
        net = topology if collective == "broadcast" else reversed_topology(topology)
        flows = np.delete(root_flows(net, root, rs), rs.index(root))
        if not (flows > 0).all():
            raise BoundError(f"some rank of {topology.name} cannot be reached from its root {root}")
        return nbytes / float(flows.min())
    if collective == "alltoall":
        flow = alltoall_flow(topology, rs)
        if flow is not None:
            return nbytes / len(rs) / flow.rate
        return nbytes * _alltoall_seconds_per_byte(topology, rs)
    raise BoundError(f"no bound for collective {collective!r}")


@dataclass(frozen=True)
class ConcurrentFlow:
    """The maximum concurrent flow between every ordered pair of ranks: `rate` bytes/s per
    pair, and `flows[s, e]`, the bytes/s of rank s's traffic on link e."""

    rate: float
    flows: np.ndarray


_FLOW_CACHE: weakref.WeakKeyDictionary[Topology, dict] = weakref.WeakKeyDictionary()


def alltoall_flow(topology: Topology, ranks: Sequence[str]) -> ConcurrentFlow | None:
    """The maximum concurrent flow of an AllToAll over `ranks` (None where the LP would exceed
    `MAX_FLOW_VARIABLES`); cached per topology and ranks. Maximise r subject to: each rank s
    sends r to every other rank (flow conservation of s's traffic at every node) and no link
    carries more than its capacity."""
    rs = tuple(ranks)
    cache = _FLOW_CACHE.setdefault(topology, {})
    if rs in cache:
        return cache[rs]
    c = topology.compiled
    n, nodes, links = len(rs), c.num_nodes, c.num_links
    if n * links > MAX_FLOW_VARIABLES:
        return None
    scale = float(c.capacity.max())  # capacities in units of the fastest link: a well-scaled LP
    idx = np.array([c.index[r] for r in rs])
    # variables: f[s, e] (s-major), then r; rows: conservation (s, v), then capacity e
    e = np.arange(links)
    rows, cols, vals = [], [], []
    for s in range(n):
        base = s * nodes
        rows += [base + c.link_dst, base + c.link_src]
        cols += [s * links + e, s * links + e]
        vals += [np.ones(links), -np.ones(links)]  # in − out at every node
    demand = np.zeros((n, nodes))  # in − out = r at every other rank, −(n − 1) r at the source
    demand[:, idx] = 1.0
    demand[np.arange(n), idx] = -(n - 1)
    rows.append(np.arange(n * nodes))
    cols.append(np.full(n * nodes, n * links))
    vals.append(-demand.ravel())
    a_eq = sp.csr_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n * nodes, n * links + 1)
    )
    a_ub = sp.hstack([sp.hstack([sp.identity(links, format="csr")] * n), sp.csr_array((links, 1))]).tocsr()
    cost = np.zeros(n * links + 1)
    cost[-1] = -1.0
    result = linprog(
        cost, A_ub=a_ub, b_ub=c.capacity / scale, A_eq=a_eq, b_eq=np.zeros(n * nodes), method=METHOD
    )
    if result.status != 0:
        raise BoundError(f"the AllToAll flow LP of {topology.name} failed: {result.message}")
    x = result.x * scale
    cache[rs] = ConcurrentFlow(float(x[-1]), np.maximum(x[:-1], 0.0).reshape(n, links))
    return cache[rs]


def _alltoall_seconds_per_byte(topology: Topology, rs: tuple[str, ...]) -> float:
    """The best candidate cut: k(N - k)/N of a buffer through each direction of it."""
    n = len(rs)
    c = topology.compiled
    out = np.bincount(c.link_src, weights=c.capacity, minlength=c.num_nodes)
    into = np.bincount(c.link_dst, weights=c.capacity, minlength=c.num_nodes)
    idx = np.array([c.index[r] for r in rs])
    best = (n - 1) / n / float(min(out[idx].min(), into[idx].min()))
    for net in (topology, reversed_topology(topology)):
        cut = allgather_cut(net, rs)
        k = cut.ranks_inside
        best = max(best, k * (n - k) / n / cut.egress)
    return best


def collective_bound(
    topology: Topology,
    ranks: Sequence[str] | None,
    nbytes: float,
    collective: str = "allreduce",
    root: str | None = None,
    alpha: float = 0.0,
    port_model: bool = False,
) -> float:
    """max(bandwidth bound, latency bound): no schedule of `collective` over `ranks` moving
    `nbytes` per rank can finish sooner."""
    rs = bound_ranks(topology, ranks)
    bw = bandwidth_bound(topology, rs, nbytes, collective, root)
    if collective not in ("broadcast", "reduce"):
        return max(bw, latency_bound(topology, rs, alpha=alpha, port_model=port_model))
    dist = rank_latencies(topology, rs)
    i = rs.index(root)
    far = dist[i] if collective == "broadcast" else dist[:, i]
    return max(bw, alpha + float(far.max()))
