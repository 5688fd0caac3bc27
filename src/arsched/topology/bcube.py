"""BCube(n, k) (Guo et al., SIGCOMM'09): a server-centric network of n-port switches.

n^(k+1) servers, each with k+1 ports; level l has n^k switches, and the level-l switch of a
server connects the n servers whose base-n addresses differ only in digit l.
"""

from __future__ import annotations

from collections.abc import Sequence

from arsched.errors import TopologyError
from arsched.limits import check_topology, power
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Topology, is_int, per_level


def bcube(
    n: int,
    k: int,
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """BCube(n, k): servers `s{i}`, level-l switches `w{l}_{j}`; bandwidth/latency per level."""
    if not (is_int(n) and n >= 2):
        raise TopologyError(f"bcube needs n >= 2 ports per switch, got n={n!r}")
    if not (is_int(k) and k >= 0):
        raise TopologyError(f"bcube needs level k >= 0, got k={k!r}")
    servers = power(n, k + 1)
    check_topology(f"bcube({n},{k})", servers, (k + 1) * power(n, k), 2 * (k + 1) * servers)
    bws = per_level(bandwidth, k + 1, "bandwidth", f"bcube({n},{k})")
    lats = per_level(latency, k + 1, "latency", f"bcube({n},{k})")
    num = n ** (k + 1)
    servers = [f"s{i}" for i in range(num)]
    switches = [f"w{level}_{j}" for level in range(k + 1) for j in range(n**k)]
    cables = []
    for level in range(k + 1):
        low = n**level
        for i in range(num):
            # the switch index is the server address with digit `level` removed
            j = (i // (low * n)) * low + i % low
            cables.append((servers[i], f"w{level}_{j}", bws[level], lats[level]))
    return Topology.from_cables(f"bcube({n},{k})", servers, switches, cables)
