"""Where a job's GPUs go: best-fit on one server, fewest servers (under one ToR if possible),
topology-blind fewest servers, or random GPUs. All return a ring ((server, gpus), ...) ordered
by server index (= locality order: servers are grouped by ToR), or None if it does not fit."""

from __future__ import annotations

import numpy as np

from arsched.cluster.network import Placement


def _ring(servers: np.ndarray, counts: np.ndarray) -> Placement:
    order = np.argsort(servers, kind="stable")
    return tuple((int(servers[i]), int(counts[i])) for i in order if counts[i] > 0)


def one_server(free: np.ndarray, need: int) -> Placement | None:
    """The server with the fewest free GPUs that still holds `need` (lowest index at ties)."""
    fits = np.flatnonzero(free >= need)
    if not len(fits):
        return None
    s = fits[np.argmin(free[fits])]
    return ((int(s), need),)


def _take(servers: np.ndarray, free: np.ndarray, need: int) -> Placement:
    """Fill the given servers most-free first until `need` GPUs are taken."""
    order = servers[np.argsort(-free[servers], kind="stable")]
    got = np.cumsum(free[order])
    k = int(np.searchsorted(got, need)) + 1
    take = free[order[:k]].copy()
    take[-1] -= got[k - 1] - need
    return _ring(order[:k], take)


def fewest_servers(free: np.ndarray, need: int, group: np.ndarray | None = None) -> Placement | None:
    """One server if possible, else the fewest servers, inside one ToR group when one has room
    (the group with the least room that fits), else across groups."""
    if free.sum() < need:
        return None
    single = one_server(free, need)
    if single is not None:
        return single
    if group is not None:
        room = np.bincount(group, weights=free)
        fits = np.flatnonzero(room >= need)
        if len(fits):
            g = fits[np.argmin(room[fits])]
            return _take(np.flatnonzero((group == g) & (free > 0)), free, need)
    return _take(np.flatnonzero(free > 0), free, need)


def random_gpus(free: np.ndarray, need: int, rng: np.random.Generator) -> Placement | None:
    """`need` free GPUs drawn uniformly at random over the cluster."""
    if free.sum() < need:
        return None
    slots = np.repeat(np.arange(len(free)), free)
    pick = rng.choice(slots, size=need, replace=False)
    servers, counts = np.unique(pick, return_counts=True)
    return _ring(servers, counts)


def take(free: np.ndarray, placement: Placement, sign: int = -1) -> None:
    """Take (sign -1) or give back (+1) a placement's GPUs in the free array."""
    for s, g in placement:
        free[s] += sign * g
