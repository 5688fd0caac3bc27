"""Where a job's GPUs go: best-fit on one server, fewest servers (under one ToR if possible),
topology-blind fewest servers, or random GPUs. All return a ring ((server, gpus), ...) ordered
by server index (= locality order: servers are grouped by ToR), or None if it does not fit.
`FreeGPUs` keeps the free counts bucketed for a fast best fit (GADGET's inner loop)."""

from __future__ import annotations

import heapq
from itertools import pairwise

import numpy as np

from arsched.cluster.network import Placement


def _ring(servers: np.ndarray, counts: np.ndarray) -> Placement:
    order = np.argsort(servers, kind="stable")
    pairs = zip(servers[order].tolist(), counts[order].tolist(), strict=True)
    return tuple((s, g) for s, g in pairs if g > 0)


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
    return single if single is not None else spread(free, need, group)


def spread(free: np.ndarray, need: int, group: np.ndarray | None = None) -> Placement:
    """`need` GPUs (at most the free ones) on the fewest servers: inside the ToR group with the
    least room that fits when `group` is given and one fits, else across groups."""
    inside = in_group(free, need, group) if group is not None else None
    return inside if inside is not None else _take(np.flatnonzero(free > 0), free, need)


def in_group(free: np.ndarray, need: int, group: np.ndarray) -> Placement | None:
    """`spread` inside the ToR group with the least room that fits, or None if none fits."""
    room = np.bincount(group, weights=free)
    fits = np.flatnonzero(room >= need)
    if not len(fits):
        return None
    g = fits[np.argmin(room[fits])]
    return _take(np.flatnonzero((group == g) & (free > 0)), free, need)


def random_rings(
    sizes: list[int], num_servers: int, gpus_per_server: int, rng: np.random.Generator
) -> list[Placement]:
    """Rings of the given sizes on GPUs drawn uniformly at random without replacement from an
    empty cluster (one shuffle of every GPU, cut into consecutive pieces)."""
    slots = rng.permutation(np.repeat(np.arange(num_servers), gpus_per_server))[: sum(sizes)]
    key = np.repeat(np.arange(len(sizes)), sizes) * num_servers + slots  # (ring, server), sorted below
    pairs, counts = np.unique(key, return_counts=True)
    ring, server = np.divmod(pairs, num_servers)
    cuts = np.searchsorted(ring, np.arange(len(sizes) + 1)).tolist()
    srv, cnt = server.tolist(), counts.tolist()
    return [tuple(zip(srv[a:b], cnt[a:b], strict=True)) for a, b in pairwise(cuts)]


def take(free: np.ndarray, placement: Placement, sign: int = -1) -> None:
    """Take (sign -1) or give back (+1) a placement's GPUs in the free array."""
    for s, g in placement:
        free[s] += sign * g


class FreeGPUs:
    """Free GPUs per server (`free` for numpy, `count` for Python loops, both kept current) and,
    per free count c, a heap of the servers with c free GPUs, so that `one_server` is a walk over
    at most G buckets instead of a scan of every server. Heaps are pruned lazily: an entry whose
    server's count changed is skipped. `counts`: the servers' free GPUs to start from (default:
    all free); `group`: each server's ToR group, for `in_group` (free GPUs kept per group)."""

    def __init__(
        self,
        num_servers: int,
        gpus_per_server: int,
        counts: np.ndarray | None = None,
        group: np.ndarray | None = None,
    ) -> None:
        if counts is None:
            self.free = np.full(num_servers, gpus_per_server, dtype=np.int64)
            self.count = [gpus_per_server] * num_servers
            self.buckets: list[list[int]] = [[] for _ in range(gpus_per_server)]
            self.buckets.append(list(range(num_servers)))  # sorted: already a heap
        else:
            self.free = np.array(counts, dtype=np.int64)
            self.count = self.free.tolist()
            self.buckets = [[] for _ in range(gpus_per_server + 1)]
            for s, c in enumerate(self.count):  # in server order: each bucket sorted, a heap
                self.buckets[c].append(s)
        self.total = int(self.free.sum())
        self.group: list[int] = []
        if group is not None:
            self.group = group.tolist()
            order = np.argsort(group, kind="stable")
            bounds = np.searchsorted(group[order], np.arange(int(group.max()) + 2)).tolist()
            self.members = [order[a:b].tolist() for a, b in pairwise(bounds)]
            room = np.bincount(group, weights=self.free, minlength=len(self.members))
            self.room = room.astype(np.int64).tolist()

    def one_server(self, need: int) -> Placement | None:
        """Same answer as `one_server(self.free, need)`."""
        for c in range(need, len(self.buckets)):
            heap = self.buckets[c]
            while heap and self.count[heap[0]] != c:
                heapq.heappop(heap)
            if heap:
                return ((heap[0], need),)
        return None

    def spread(self, need: int) -> Placement:
        """Same answer as `spread(self.free, need)` (at most `total`): servers with the most free
        GPUs first, lowest index at ties, each bucket's first servers popped and pushed back."""
        count, ring, got = self.count, [], 0
        for c in range(len(self.buckets) - 1, 0, -1):
            heap, taken = self.buckets[c], []
            while got < need and heap:
                s = heapq.heappop(heap)
                if count[s] != c or (taken and s == taken[-1]):  # stale, or a duplicate entry
                    continue
                taken.append(s)
                ring.append((s, min(c, need - got)))
                got += ring[-1][1]
            for s in taken:
                heapq.heappush(heap, s)
            if got >= need:
                break
        return tuple(sorted(ring))

    def in_group(self, need: int) -> Placement | None:
        """Same answer as `in_group(self.free, need, group)`."""
        best, least = -1, 0
        for g, r in enumerate(self.room):
            if r >= need and (best < 0 or r < least):
                best, least = g, r
        if best < 0:
            return None
        count = self.count
        order = sorted((s for s in self.members[best] if count[s] > 0), key=lambda s: -count[s])  # stable
        got, ring = 0, []
        for s in order:
            t = min(count[s], need - got)
            ring.append((s, t))
            got += t
            if got >= need:
                break
        return tuple(sorted(ring))

    def take(self, placement: Placement, sign: int = -1) -> None:
        """Take (sign -1) or give back (+1) a placement's GPUs."""
        for s, g in placement:
            self.count[s] += sign * g
            self.free[s] = self.count[s]
            heapq.heappush(self.buckets[self.count[s]], s)
            self.total += sign * g
            if self.group:
                self.room[self.group[s]] += sign * g

    def set(self, s: int, c: int) -> None:
        """Server s has c free GPUs."""
        if self.count[s] != c:
            self.total += c - self.count[s]
            if self.group:
                self.room[self.group[s]] += c - self.count[s]
            self.count[s] = c
            self.free[s] = c
            heapq.heappush(self.buckets[c], s)
