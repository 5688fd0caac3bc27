"""The k-ary fat-tree (Al-Fares et al., SIGCOMM'08): k pods, k^3/4 hosts, 5k^2/4 switches."""

from __future__ import annotations

from collections.abc import Sequence

from arsched.errors import TopologyError
from arsched.limits import check_topology, product
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Topology, is_int, per_level


def fattree(
    k: int,
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """Fat-tree of k-port switches: hosts `s{i}`, edge `e{pod}_{j}`, agg `a{pod}_{j}`, core `c{i}`.

    Levels: 0 host-edge, 1 edge-aggregation, 2 aggregation-core. Aggregation switch j of every
    pod connects to core switches j*k/2 ... j*k/2 + k/2 - 1.
    """
    if not (is_int(k) and k >= 2 and k % 2 == 0):
        raise TopologyError(f"fattree needs an even number of ports k >= 2, got k={k!r}")
    h = k // 2
    servers = product((k, h, h))  # and as many cables on each of the three levels
    check_topology(f"fattree({k})", servers, product((5, k, k)) // 4, 6 * servers)
    bws = per_level(bandwidth, 3, "bandwidth", f"fattree({k})")
    lats = per_level(latency, 3, "latency", f"fattree({k})")
    hosts = [f"s{i}" for i in range(k * h * h)]
    edges = [f"e{p}_{j}" for p in range(k) for j in range(h)]
    aggs = [f"a{p}_{j}" for p in range(k) for j in range(h)]
    cores = [f"c{i}" for i in range(h * h)]
    cables = []
    for p in range(k):
        for j in range(h):
            for x in range(h):
                cables.append((hosts[(p * h + j) * h + x], f"e{p}_{j}", bws[0], lats[0]))
        for j in range(h):
            for a in range(h):
                cables.append((f"e{p}_{j}", f"a{p}_{a}", bws[1], lats[1]))
        for a in range(h):
            for c in range(h):
                cables.append((f"a{p}_{a}", f"c{a * h + c}", bws[2], lats[2]))
    return Topology.from_cables(f"fattree({k})", hosts, edges + aggs + cores, cables)
