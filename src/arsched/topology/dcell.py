"""DCell(n, k) (Guo et al., SIGCOMM'08): recursive server-centric network.

DCell_0 is n servers on one switch. DCell_l joins t_{l-1}+1 copies of DCell_{l-1}; for every
pair of copies i < j, server j-1 of copy i links to server i of copy j. Every server ends with
k+1 ports: its switch and one server link per level.
"""

from __future__ import annotations

from collections.abc import Sequence

from arsched.errors import TopologyError
from arsched.limits import HUGE, check_topology
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Topology, is_int, per_level


def dcell_size(n: int, k: int) -> int:
    """t_k, the number of servers of DCell(n, k) (saturated at `limits.HUGE`)."""
    t = int(n)
    for _ in range(k):
        if t >= HUGE:
            return HUGE
        t = t * (t + 1)
    return min(t, HUGE)


def dcell(
    n: int,
    k: int,
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """DCell(n, k): servers `s{i}` (global index), switches `w{j}` (one per DCell_0).

    Level 0 is server-switch cables; level l >= 1 the server-server cables of that level.
    """
    if not (is_int(n) and n >= 2):
        raise TopologyError(f"dcell needs n >= 2 servers per DCell_0, got n={n!r}")
    if not (is_int(k) and k >= 0):
        raise TopologyError(f"dcell needs level k >= 0, got k={k!r}")
    t = dcell_size(n, k)  # cables: one per server to its switch, and t/2 on every level
    check_topology(f"dcell({n},{k})", t, t // n, 2 * t + k * t)
    bws = per_level(bandwidth, k + 1, "bandwidth", f"dcell({n},{k})")
    lats = per_level(latency, k + 1, "latency", f"dcell({n},{k})")
    total = t
    servers = [f"s{i}" for i in range(total)]
    switches = [f"w{j}" for j in range(total // n)]
    cables = [(servers[i], f"w{i // n}", bws[0], lats[0]) for i in range(total)]
    sizes = [n]
    for _ in range(k):
        sizes.append(sizes[-1] * (sizes[-1] + 1))
    for level in range(1, k + 1):
        sub = sizes[level - 1]  # servers per copy of DCell_{level-1}
        for base in range(0, total, sizes[level]):  # each DCell_level
            for i in range(sub + 1):
                for j in range(i + 1, sub + 1):
                    u = base + i * sub + (j - 1)
                    v = base + j * sub + i
                    cables.append((servers[u], servers[v], bws[level], lats[level]))
    return Topology.from_cables(f"dcell({n},{k})", servers, switches, cables)
