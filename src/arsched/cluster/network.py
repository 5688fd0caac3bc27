"""Ring-all-reduce iteration time and the bandwidth each job's ring gets, in three network modes.

A placement is a ring: ((server, gpus), ...) in ring order, each server's GPUs adjacent. Its
inter-server hops are the routes server i -> server i+1 (cyclically); hops inside a server run
at the intra-server bandwidth. The ring's bottleneck b sets the iteration time

    T(w) = tau + 2(w-1)/w * m / b + 2(w-1) * alpha.

Modes, for the rings of all running jobs at once:
- `reserved` (GADGET's model): in the order given, each ring reserves on every link it crosses
  the largest rate the residual capacity allows (a link crossed by k of its hops gives k times
  the rate); capacity is never exceeded; a ring that finds a link full gets nothing.
- `shared` (what the network does): every hop is a flow; flows share links max-min fairly
  (`arsched.sim.maxmin`, the flow model's sharing code) and a ring runs at its slowest hop.
- `ideal` (the contention-blind view): every ring alone, at its path's smallest capacity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from arsched.cluster.cluster import Cluster
from arsched.errors import ArschedError
from arsched.sim.maxmin import maxmin_rates
from arsched.sim.paths import CompiledPaths

MODES = ("reserved", "shared", "ideal")
RING_CACHE = 100_000  # placements whose links ring_links remembers (about 20 MB)
NO_LINKS = np.zeros(0, dtype=np.int64)

Placement = tuple[tuple[int, int], ...]


def iteration_time(
    tau: np.ndarray | float, m: np.ndarray | float, w: np.ndarray | int, b: np.ndarray | float, alpha: float
) -> np.ndarray:
    """T(w) = tau + 2(w-1)/w·m/b + 2(w-1)·alpha; a single worker only computes; b = 0 gives inf."""
    w = np.asarray(w, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        comm = np.where(w > 1, 2 * (w - 1) / np.maximum(w, 1) * m / b + 2 * (w - 1) * alpha, 0.0)
    return np.asarray(tau + np.nan_to_num(comm, nan=np.inf, posinf=np.inf), dtype=float)


def throughput(tau, m, w, b, alpha: float) -> np.ndarray:
    """Work (worker-iterations) per second of w workers: w / T(w); 0 for w = 0."""
    w = np.asarray(w, dtype=float)
    return np.where(w > 0, w / iteration_time(tau, m, np.maximum(w, 1), b, alpha), 0.0)


def hops(placement: Placement) -> list[tuple[int, int]]:
    """Inter-server hops of a ring (none when it stays in one server)."""
    servers = [s for s, _ in placement]
    k = len(servers)
    return [(servers[i], servers[(i + 1) % k]) for i in range(k)] if k > 1 else []


def ring_links(cluster: Cluster, placement: Placement) -> tuple[np.ndarray, np.ndarray]:
    """Distinct links a ring crosses and how many of its hops cross each (read-only arrays,
    remembered per placement: schedulers keep proposing the same rings slot after slot)."""
    got = cluster.ring_cache.get(placement)
    if got is not None:
        return got
    per_hop = [cluster.hop_links(a, b) for a, b in hops(placement)]
    if not per_hop:
        return NO_LINKS, NO_LINKS
    links = np.sort(np.concatenate(per_hop))  # np.unique(..., return_counts=True), without its overhead
    first = np.empty(len(links) + 1, dtype=bool)
    first[0] = first[-1] = True
    np.not_equal(links[1:], links[:-1], out=first[1:-1])
    bounds = np.flatnonzero(first)
    if len(cluster.ring_cache) >= RING_CACHE:
        cluster.ring_cache.clear()
    got = cluster.ring_cache[placement] = links[bounds[:-1]], bounds[1:] - bounds[:-1]
    return got


def rings_links(cluster: Cluster, placements: Sequence[Placement]) -> tuple[np.ndarray, ...]:
    """`ring_links` of every ring at once (vectorised, not remembered: for whole decisions, such
    as the random ablation's rings, which are new every slot), as CSR arrays over the rings:
    (ptr, links, hops per link)."""
    lens = np.fromiter((len(p) for p in placements), dtype=np.int64, count=len(placements))
    servers = np.fromiter((s for p in placements for s, _ in p), dtype=np.int64, count=int(lens.sum()))
    first = np.repeat(np.cumsum(lens) - lens, lens)  # each entry's ring's first entry
    following = servers[first + (np.arange(len(servers)) - first + 1) % np.repeat(lens, lens)]
    spans = np.repeat(lens > 1, lens)  # a ring inside one server has no hops
    a, b = servers[spans], following[spans]
    table, hops_ab = cluster.routes(b)
    count = hops_ab[b, a]
    links = table[b, a][np.arange(table.shape[2])[None, :] < count[:, None]]
    key = np.repeat(np.repeat(np.arange(len(placements)), lens)[spans], count) * cluster.num_links + links
    key, mult = np.unique(key, return_counts=True)
    ring, links = np.divmod(key, cluster.num_links)
    return np.searchsorted(ring, np.arange(len(placements) + 1)), links, mult


def intra_cap(cluster: Cluster, placement: Placement) -> float:
    """The intra-server bandwidth if some server holds two or more of the ring's GPUs, else inf."""
    return cluster.intra_bandwidth if any(g > 1 for _, g in placement) else np.inf


def _reserved(cluster: Cluster, placements: Sequence[Placement]) -> np.ndarray:
    ptr, links, mult = rings_links(cluster, placements)
    cap = np.array([intra_cap(cluster, p) for p in placements], dtype=float)
    return _reserve_in_order(ptr, links, mult.astype(float), cluster.capacity.astype(float), cap)


@numba.njit(cache=True)
def _reserve_in_order(
    ptr: np.ndarray, links: np.ndarray, mult: np.ndarray, capacity: np.ndarray, cap: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """Ring by ring, the largest rate the residual capacity allows on every link it crosses
    (at most `cap`), reserved before the next ring's."""
    residual = capacity.copy()
    out = np.empty(len(ptr) - 1)
    for j in range(len(out)):
        r = np.inf
        for k in range(ptr[j], ptr[j + 1]):
            r = min(r, residual[links[k]] / mult[k])
        r = min(r, cap[j])
        for k in range(ptr[j], ptr[j + 1]):
            residual[links[k]] = max(residual[links[k]] - r * mult[k], 0.0)
        out[j] = r
    return out


def _shared(cluster: Cluster, placements: Sequence[Placement]) -> np.ndarray:
    per_hop: list[np.ndarray] = []
    owner: list[int] = []
    for j, p in enumerate(placements):
        for a, b in hops(p):
            per_hop.append(cluster.hop_links(a, b))
            owner.append(j)
    out = np.array([intra_cap(cluster, p) for p in placements], dtype=float)
    if per_hop:
        lens = np.array([len(x) for x in per_hop])
        ptr = np.concatenate([[0], np.cumsum(lens)])
        links = np.concatenate(per_hop)
        cp = CompiledPaths(np.arange(len(lens)), ptr, links, np.zeros(len(lens)), np.zeros(len(lens)))
        rates = maxmin_rates(np.arange(len(lens)), cp, cluster.capacity)
        np.minimum.at(out, np.array(owner), rates)
    return out


def _ideal(cluster: Cluster, placements: Sequence[Placement]) -> np.ndarray:
    out = np.empty(len(placements))
    for j, p in enumerate(placements):
        links, _ = ring_links(cluster, p)
        alone = float(cluster.capacity[links].min()) if len(links) else np.inf
        out[j] = min(alone, intra_cap(cluster, p))
    return out


def ring_bandwidth(cluster: Cluster, placements: Sequence[Placement], mode: str) -> np.ndarray:
    """The bottleneck bandwidth b of every ring (inf for a single GPU, which sends nothing)."""
    if mode not in MODES:
        raise ArschedError(f"network mode {mode!r} is not one of {', '.join(MODES)}")
    if not placements:
        return np.zeros(0)
    return {"reserved": _reserved, "shared": _shared, "ideal": _ideal}[mode](cluster, placements)
