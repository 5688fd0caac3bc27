"""Tori and rings: servers linked directly to their neighbours, no switches.

Both may be directed: `oneway` keeps only the links in the + direction of every dimension (server
at coordinate c to c + 1, wrapping round), and `reverse` gives the − direction links (c + 1 to c)
their own bandwidth, an asymmetric ring or torus. The name says which was built:
'torus(3x3,oneway)', 'ring(8,reverse=100Gbps)'.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arsched.errors import TopologyError
from arsched.limits import check_topology, product
from arsched.topology.core import (
    DEFAULT_BANDWIDTH,
    DEFAULT_LATENCY,
    MIN_BANDWIDTH,
    SERVER,
    Link,
    Topology,
    is_int,
    per_level,
)


def torus(
    dims: Sequence[int],
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
    oneway: bool = False,
    reverse: float | Sequence[float] | None = None,
) -> Topology:
    """A torus of any number of dimensions; server `s{i}` has row-major coordinates.

    Each dimension of size d >= 3 gives every server two cables (to -1 and +1 with wrap-around);
    a dimension of size 2 gives one cable, size 1 none. Bandwidth/latency can be set per
    dimension. A cable's forward link goes in the + direction (coordinate c to c + 1 mod d),
    its reverse link back; `reverse` sets the reverse links' bandwidth (one value, or one per
    dimension; default: `bandwidth`). `oneway` keeps the forward links only: each server then
    sends only to its + neighbour in every dimension (a size-2 dimension keeps both its links,
    as 1 -> 0 is the wrap-around + link).
    """
    dims = tuple(dims)
    if not dims or not all(isinstance(d, (int, np.integer)) and d >= 1 for d in dims):
        raise TopologyError(f"torus needs dimension sizes >= 1, got {dims!r}")
    num = product(dims)
    if num < 2:
        raise TopologyError(f"torus {dims!r} has fewer than two servers")
    plain = "x".join(str(d) for d in dims)
    one = _oneway("torus", oneway, reverse)
    name = _name("torus", plain, one, [], [])  # the reverse bandwidths join it once read
    cables = sum(num if d > 2 else num // 2 if d == 2 else 0 for d in dims)
    links = sum(num if d >= 2 else 0 for d in dims) if one else 2 * cables
    check_topology(name, num, 0, links)
    bws = per_level(bandwidth, len(dims), "bandwidth", name)
    lats = per_level(latency, len(dims), "latency", name)
    revs = bws if reverse is None else _reverse("torus", reverse, len(dims), name)
    name = _name("torus", plain, one, bws, revs)
    servers = [f"s{i}" for i in range(num)]
    coords = np.array(np.unravel_index(np.arange(num), dims)).T
    out: list[Link] = []
    for axis, size in enumerate(dims):
        if size < 2:
            continue
        for i in range(num):
            if size == 2 and coords[i, axis] == 1 and not one:
                continue  # the single cable of a size-2 dimension was added from coordinate 0
            nb = coords[i].copy()
            nb[axis] = (nb[axis] + 1) % size
            j = int(np.ravel_multi_index(tuple(nb), dims))
            out.append(Link(servers[i], servers[j], bws[axis], lats[axis]))
            if not one:
                out.append(Link(servers[j], servers[i], revs[axis], lats[axis]))
    return Topology(name, [(s, SERVER) for s in servers], out)


def ring(
    n: int,
    bandwidth: float = DEFAULT_BANDWIDTH,
    latency: float = DEFAULT_LATENCY,
    oneway: bool = False,
    reverse: float | None = None,
) -> Topology:
    """n servers on a bidirectional ring (a 1-D torus); `oneway` and `reverse` as in `torus`:
    a one-way ring sends s{i} -> s{i+1} only, `reverse` is the bandwidth of s{i+1} -> s{i}."""
    if not (is_int(n) and n >= 2):
        raise TopologyError(f"ring needs n >= 2 servers, got n={n!r}")
    one = _oneway("ring", oneway, reverse)
    check_topology(
        _name("ring", str(n), one, [], []), int(n), 0, int(n) if one else 2 * int(n) if n > 2 else 2
    )
    (bw,), (lat,) = per_level(bandwidth, 1, "bandwidth", "ring"), per_level(latency, 1, "latency", "ring")
    revs = [bw] if reverse is None else _reverse("ring", reverse, 1, f"ring({n})")
    t = torus((n,), bw, lat, one, None if reverse is None else revs)
    return Topology(_name("ring", str(n), one, [bw], revs), [(s, t.kind(s)) for s in t.nodes], t.links)


def _oneway(family: str, oneway: object, reverse: object) -> bool:
    """`oneway` as a bool (True, False, 1 or 0), refused together with `reverse`."""
    if not (isinstance(oneway, (bool, np.bool_)) or (is_int(oneway) and oneway in (0, 1))):
        raise TopologyError(f"{family}: oneway must be 0 or 1 (or True/False), got oneway={oneway!r}")
    if oneway and reverse is not None:
        raise TopologyError(
            f"{family}: oneway=1 and a reverse bandwidth cannot be combined, as a one-way {family} "
            "has no reverse links"
        )
    return bool(oneway)


def _reverse(family: str, reverse: float | Sequence[float], levels: int, name: str) -> list[float]:
    """The reverse links' bandwidth per level; finite and > 0 as every link's."""
    revs = per_level(reverse, levels, "reverse bandwidth", name)
    for r in revs:
        if not (np.isfinite(r) and r >= MIN_BANDWIDTH):
            raise TopologyError(
                f"{family}: the reverse bandwidth must be a finite number of at least "
                f"{MIN_BANDWIDTH:.3g} bytes/s, got {r!r}"
            )
    return revs


def _name(family: str, size: str, oneway: bool, bws: list[float], revs: list[float]) -> str:
    """'ring(8)', 'ring(8,oneway)' or 'ring(8,reverse=100Gbps)' (per level joined by '/' where the
    levels differ): the reverse bandwidth shows only where it differs from the forward one."""
    if oneway:
        return f"{family}({size},oneway)"
    if list(revs) == list(bws):
        return f"{family}({size})"
    shown = revs[:1] if len(set(revs)) == 1 else revs  # one value where all levels have it
    return f"{family}({size},reverse=" + "/".join(f"{r * 8 / 1e9:g}Gbps" for r in shown) + ")"
