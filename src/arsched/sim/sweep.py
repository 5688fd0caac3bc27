"""The flow model's contention-free sweep and the check that makes it exact, in one pass each.

If every flow had its path to itself, a transfer would be ready when the groups it waits for
(`deps`: the latest earlier writers of its source and destination buffers, the destination's
readers since, its connection's previous step, a barrier) are done, and done α + chunk /
bottleneck + latency later. Taking the steps in order, those groups are always the latest ones
of a buffer or connection, so a table per buffer and per connection of "the latest group's
finish" gives every transfer's time in one pass over the transfers — no group lists, no sorts
of the transfers (`Dependencies` holds about four entries per transfer; a 4,096-rank ring has
33 million transfers). The times equal `deps`-based propagation bit for bit (only max and one
sum per transfer, in the same order).

The sweep is the flow model's answer when no two sending intervals overlap on a link
(`contended`): each path's transfers sorted by sending start, each link's paths merged in
start order, and every interval checked against the one before it on the link.
"""

from __future__ import annotations

import numba
import numpy as np

from arsched.collective.schedule import Schedule
from arsched.sim.engine import REL
from arsched.sim.grouping import dense, stable_order
from arsched.sim.paths import CompiledPaths


# fmt: off
@numba.njit(cache=True)
def _sweep(
    order, step, src_buf, dst_buf, conn, n_buf, n_conn, path_id, bottleneck, latency,
    chunk_bytes, alpha, fifo, synchronous,
):  # pragma: no cover - compiled
    # fmt: on
    """Ready and done times, the transfers taken in `order` (sorted by dense `step`)."""
    n = len(step)
    ready = np.zeros(n)
    done = np.zeros(n)
    # per buffer, side by side (one cache line): the finish of its latest write group, of its
    # readers since, and that group's step + 1; per connection: its latest step's finish and
    # step + 1 (0: none yet, so that untouched rows of the zeroed tables are never paged in)
    buf = np.zeros((n_buf, 3))
    con = np.zeros((n_conn, 2))
    barrier = 0.0  # the previous step's finish
    i = 0
    while i < n:
        k = step[order[i]] + 1
        j = i
        while j < n and step[order[j]] + 1 == k:
            j += 1
        last = 0.0
        for a in range(i, j):
            t = order[a]
            d = dst_buf[t]
            r = max(buf[src_buf[t], 0], buf[d, 0], buf[d, 1])
            if fifo:
                r = max(r, con[conn[t], 0])
            if synchronous:
                r = max(r, barrier)
            ready[t] = r
            p = path_id[t]
            done[t] = r + (alpha + chunk_bytes / bottleneck[p] + latency[p])
            last = max(last, done[t])
        for a in range(i, j):  # this step's writes start their buffers' new groups
            t = order[a]
            d = dst_buf[t]
            if buf[d, 2] != k:
                buf[d, 0], buf[d, 1], buf[d, 2] = done[t], 0.0, k
            else:
                buf[d, 0] = max(buf[d, 0], done[t])
        for a in range(i, j):
            t = order[a]
            buf[src_buf[t], 1] = max(buf[src_buf[t], 1], done[t])
        if fifo:
            for a in range(i, j):
                t = order[a]
                c = conn[t]
                if con[c, 1] != k:
                    con[c, 0], con[c, 1] = done[t], k
                else:
                    con[c, 0] = max(con[c, 0], done[t])
        barrier = last
        i = j
    return ready, done


def _key(major: np.ndarray, scale: int, minor: np.ndarray) -> np.ndarray:
    """major * scale + minor, element by element, in one new array."""
    key = major.astype(np.int64)
    key *= scale
    key += minor
    return key


def _table(keys: list[np.ndarray], size: int) -> tuple[list[np.ndarray], int]:
    """Keys as indices into one table: themselves where they all lie in 0..size−1 and the table
    is at most a few entries per key, else renumbered together densely; and the table's size."""
    total = sum(len(k) for k in keys)
    if size <= 4 * total + 1024 and all(k.min(initial=0) >= 0 and k.max(initial=0) < size for k in keys):
        return keys, max(size, 1)
    both, count = dense(np.concatenate(keys))
    return np.split(both, np.cumsum([len(k) for k in keys])[:-1]), max(count, 1)


def sweep_times(
    schedule: Schedule, cp: CompiledPaths, alpha: float, fifo: bool, synchronous: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Ready and done times of every transfer if every flow had its path to itself."""
    s = schedule
    n = len(s)
    step, n_steps = dense(s.step)
    order = np.arange(n, dtype=np.int64)
    if n and (step[1:] < step[:-1]).any():
        order = stable_order([(step, n_steps)], n)
    rank_of, chunks = s.rank_of_node, s.num_chunks
    bufs = [_key(rank_of[s.src], chunks, s.chunk), _key(rank_of[s.dst], chunks, s.chunk)]
    (src_buf, dst_buf), n_buf = _table(bufs, s.num_ranks * chunks)
    (conn,), n_conn = (step,), 1
    if fifo:
        key, size = s.connections()
        (conn,), n_conn = _table([key], size)
    return _sweep(
        order, step, src_buf, dst_buf, conn, n_buf, n_conn, cp.path_id, cp.path_bottleneck,
        cp.path_latency, float(s.chunk_bytes), float(alpha), fifo, synchronous,
    )  # fmt: skip


@numba.njit(cache=True)
def _before(start, a, b):  # pragma: no cover - compiled
    """Transfer a sends before transfer b (ties: the lower index first)."""
    return start[a] < start[b] or (start[a] == start[b] and a < b)


@numba.njit(cache=True)
def _overlap(by_path, first, start, stop, link_ptr, link_paths, tol):  # pragma: no cover - compiled
    """True if some link's sending intervals, in sending order, have one that starts before the
    one before it stops (less `tol`). `by_path` lists the transfers path by path (path p's at
    first[p]..first[p+1]−1, reordered here by start); link l is crossed by the paths
    link_paths[link_ptr[l]:link_ptr[l+1]]."""
    num_paths = len(first) - 1
    for p in range(num_paths):
        lo, hi = first[p], first[p + 1]
        ordered = True
        for a in range(lo + 1, hi):
            if not _before(start, by_path[a - 1], by_path[a]):
                ordered = False
                break
        if not ordered:  # stable: equal starts keep index order
            seg = by_path[lo:hi].copy()
            by_path[lo:hi] = seg[np.argsort(start[seg], kind="mergesort")]
        for a in range(lo + 1, hi):  # a path alone on a link
            if start[by_path[a]] < stop[by_path[a - 1]] - tol:
                return True
    heap = np.empty(len(link_paths), dtype=np.int64)  # each path's next position in by_path
    end = np.empty(len(link_paths), dtype=np.int64)  # ... and where its transfers end
    for lk in range(len(link_ptr) - 1):
        k = 0
        for i in range(link_ptr[lk], link_ptr[lk + 1]):
            p = link_paths[i]
            if first[p] < first[p + 1]:
                heap[k], end[k] = first[p], first[p + 1]
                k += 1
        if k < 2:
            continue
        for i in range(k // 2 - 1, -1, -1):
            _sift(heap, end, k, i, by_path, start)
        prev_stop = -np.inf
        while k > 0:
            t = by_path[heap[0]]
            if start[t] < prev_stop - tol:
                return True
            prev_stop = stop[t]
            heap[0] += 1
            if heap[0] == end[0]:
                k -= 1
                heap[0], end[0] = heap[k], end[k]
            _sift(heap, end, k, 0, by_path, start)
    return False


@numba.njit(cache=True)
def _sift(heap, end, k, i, by_path, start):  # pragma: no cover - compiled
    """Restore the heap order (by the transfer each entry points at) below entry i."""
    while True:
        c = 2 * i + 1
        if c >= k:
            return
        if c + 1 < k and _before(start, by_path[heap[c + 1]], by_path[heap[c]]):
            c += 1
        if not _before(start, by_path[heap[c]], by_path[heap[i]]):
            return
        heap[i], heap[c] = heap[c], heap[i]
        end[i], end[c] = end[c], end[i]
        i = c


def contended(cp: CompiledPaths, start: np.ndarray, stop: np.ndarray) -> bool:
    """True if two transfers' sending intervals [start, stop) overlap on some link (by more than
    `REL` of the last stop)."""
    n = len(cp.path_id)
    num_paths = len(cp.path_ptr) - 1
    if n < 2:  # every path crosses a link (`compile_paths`): two transfers are needed to overlap
        return False
    per_path = np.bincount(cp.path_id, minlength=num_paths)
    first = np.concatenate([[0], np.cumsum(per_path)]).astype(np.int64)
    by_path = stable_order([(cp.path_id, num_paths)], n)
    used = per_path[cp.path_owner] > 0
    links, owner = cp.path_links[used], cp.path_owner[used]
    order = np.argsort(links, kind="stable")
    link_ptr = np.concatenate([[0], np.cumsum(np.bincount(links))])
    tol = REL * max(float(stop.max()), 1e-300)
    return bool(_overlap(by_path, first, start, stop, link_ptr.astype(np.int64), owner[order], tol))
