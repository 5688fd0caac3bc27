"""Switched two-tier networks: a star (one switch) and a leaf-spine."""

from __future__ import annotations

from collections.abc import Sequence

from arsched.errors import TopologyError
from arsched.limits import check_topology, product
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Topology, is_int, per_level


def star(n: int, bandwidth: float = DEFAULT_BANDWIDTH, latency: float = DEFAULT_LATENCY) -> Topology:
    """n servers `s{i}` on one non-blocking switch `w0`."""
    if not (is_int(n) and n >= 2):
        raise TopologyError(f"star needs n >= 2 servers, got n={n!r}")
    check_topology(f"star({n})", int(n), 1, 2 * int(n))
    (bw,), (lat,) = per_level(bandwidth, 1, "bandwidth", "star"), per_level(latency, 1, "latency", "star")
    servers = [f"s{i}" for i in range(n)]
    return Topology.from_cables(f"star({n})", servers, ["w0"], [(s, "w0", bw, lat) for s in servers])


def leafspine(
    leaves: int,
    spines: int,
    servers_per_leaf: int,
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """Every leaf `leaf{i}` cabled to every spine `spine{j}`; servers `s{i}` under the leaves.

    Levels: 0 server-leaf, 1 leaf-spine.
    """
    for label, val, low in (
        ("leaves", leaves, 1),
        ("spines", spines, 1),
        ("servers_per_leaf", servers_per_leaf, 1),
    ):
        if not (is_int(val) and val >= low):
            raise TopologyError(f"leafspine needs {label} >= {low}, got {val!r}")
    name = f"leafspine({leaves},{spines},{servers_per_leaf})"
    if leaves * servers_per_leaf < 2:
        raise TopologyError(f"{name} has fewer than two servers")
    num = product((leaves, servers_per_leaf))
    check_topology(name, num, int(leaves) + int(spines), 2 * (num + product((leaves, spines))))
    bws = per_level(bandwidth, 2, "bandwidth", name)
    lats = per_level(latency, 2, "latency", name)
    servers = [f"s{i}" for i in range(num)]
    leaf_ids = [f"leaf{i}" for i in range(leaves)]
    spine_ids = [f"spine{j}" for j in range(spines)]
    cables = [(s, leaf_ids[i // servers_per_leaf], bws[0], lats[0]) for i, s in enumerate(servers)]
    cables += [(lf, sp, bws[1], lats[1]) for lf in leaf_ids for sp in spine_ids]
    return Topology.from_cables(name, servers, leaf_ids + spine_ids, cables)
