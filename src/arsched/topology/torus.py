"""Tori and rings: servers linked directly to their neighbours, no switches."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.errors import TopologyError
from arsched.limits import check_topology, product
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Topology, is_int, per_level


def torus(
    dims: Sequence[int],
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """A torus of any number of dimensions; server `s{i}` has row-major coordinates.

    Each dimension of size d >= 3 gives every server two cables (to -1 and +1 with wrap-around);
    a dimension of size 2 gives one cable, size 1 none. Bandwidth/latency can be set per
    dimension.
    """
    dims = tuple(dims)
    if not dims or not all(isinstance(d, (int, np.integer)) and d >= 1 for d in dims):
        raise TopologyError(f"torus needs dimension sizes >= 1, got {dims!r}")
    num = product(dims)
    if num < 2:
        raise TopologyError(f"torus {dims!r} has fewer than two servers")
    name = "torus(" + "x".join(str(d) for d in dims) + ")"
    check_topology(name, num, 0, sum(2 * num if d > 2 else num if d == 2 else 0 for d in dims))
    bws = per_level(bandwidth, len(dims), "bandwidth", name)
    lats = per_level(latency, len(dims), "latency", name)
    servers = [f"s{i}" for i in range(num)]
    coords = np.array(np.unravel_index(np.arange(num), dims)).T
    cables = []
    for axis, size in enumerate(dims):
        if size < 2:
            continue
        for i in range(num):
            if size == 2 and coords[i, axis] == 1:
                continue  # the single cable of a size-2 dimension was added from coordinate 0
            nb = coords[i].copy()
            nb[axis] = (nb[axis] + 1) % size
            j = int(np.ravel_multi_index(tuple(nb), dims))
            cables.append((servers[i], servers[j], bws[axis], lats[axis]))
    return Topology.from_cables(name, servers, [], cables)


def ring(n: int, bandwidth: float = DEFAULT_BANDWIDTH, latency: float = DEFAULT_LATENCY) -> Topology:
    """n servers on a bidirectional ring (a 1-D torus)."""
    if not (is_int(n) and n >= 2):
        raise TopologyError(f"ring needs n >= 2 servers, got n={n!r}")
    check_topology(f"ring({n})", int(n), 0, 2 * int(n) if n > 2 else 2)
    (bw,), (lat,) = per_level(bandwidth, 1, "bandwidth", "ring"), per_level(latency, 1, "latency", "ring")
    t = torus((n,), bw, lat)
    return Topology(f"ring({n})", [(s, t.kind(s)) for s in t.nodes], t.links)
