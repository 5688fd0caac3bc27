"""The flow model's event simulation, compiled: the cost of an event is what it changes.

Semantics are the flow model's (`flow`, design §3.5): a ready transfer pays α, sends at its
max-min fair rate and is done one path latency after its last byte; every event at the same
instant (within a relative `REL`) is handled together. What makes it fast:

- **incremental max-min**: max-min fair rates decompose over the connected components of the
  graph that joins sending flows to the links they cross, so at an instant where flows start
  or stop, only the components of the links they touch are refilled (progressive filling, the
  rounds of `maxmin.maxmin_rates`, over just those links); a flow that starts alone on its
  links simply sends at its path's bottleneck (`_fill` says why rounds and not a heap).
  Within a component, only the rates at or above the lowest level the instant changes are
  refilled, from that level: progressive filling runs the same up to it (a flow of rate r
  leaving frees nothing below r; a flow joining gets at least its fairest link's share), so
  every slower path keeps its rate and only takes it off its links. Measured on the giant
  components of contended schedules: 2-3.5× faster (a refill touches 28-38 % of a
  component's paths); times equal the full refill's to 1e-10 on fat-tree rings and Jellyfish,
  3e-7 on a Clos double binary tree, where near-simultaneous events are grouped by the last
  bits of their times;
- **paths, not flows**: flows on the same path get the same max-min rate, so the filling works
  on paths weighted by their flows, and a path's flows, all of one size, finish in the order
  they started (a queue per path, a finish entry per path);
- **only links that can bind**: a link is left out of the paths the kernel walks where another
  link that every path through it also crosses is no wider (`_dominated`): that link carries
  at least its load at every instant, so it fills first. Random rings on fat-trees lose most
  of their path entries (the hosts' own links and most core links carry one hop), and the
  component walk and the filling shrink with them (`benchmarks/bench_sim.py`);
- **full links keep their rates**: a path at exactly the level an instant changes is left
  out of the refill where one of its links is full, untouched by the instant, and carries no
  path at that level or above at another rate (`_pins`): those paths cannot slow down (the
  refill starts at that level) and the link cannot carry more. Where flows share links at one
  rate (trees through racks, in-order connections), the walk otherwise spans hundreds of such
  paths to change a handful (`benchmarks/bench_sim.py`);
- **heaps of events**: ready flows by their start, paths by their first flow's finish, finished
  flows by their arrival; a path's bytes served are brought up to date only when its rate or
  its flows change. The finish heap is indexed (each path's entry is found and moved when its
  rate changes), so it holds one entry per sending path: with stale entries left behind
  instead, a refill of a giant component pushed dozens, the heap grew to the number of
  transfers, and sifting them dominated the run (random rings on fat-trees);
- **compiled** with numba (the loop is per event and per link, which numpy cannot batch).

The kernel handles a batch of instants per call and returns, so that the caller can show
progress and stop at a deadline (compiled code cannot read the clock); all state lives in the
arrays `_start` makes. With `trace`, every change of a path's total rate is logged and the
per-link rates are rebuilt from the log (`_trace`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np

from arsched.csr import gather
from arsched.errors import OutOfTime
from arsched.sim.deps import Dependencies
from arsched.sim.paths import CompiledPaths

REL = 1e-9  # relative time tolerance for simultaneous events (and, in the sweep, touching intervals)
BATCH = 20_000  # instants per kernel call: the clock and the progress callback are read between calls
_FULL = 1e-12  # a link is full when less than this share of its capacity is left
_FINISHED, _MORE, _STUCK, _LOG_FULL = 0, 1, 2, 3  # kernel return codes
_READY, _SEND, _ARRIVE = 0, 1, 2  # the three heaps


@numba.njit(cache=True)
def _put(key, val, pos, i, k, v):  # pragma: no cover - compiled
    """Entry i of a heap becomes (k, v); an indexed heap (`pos` not empty) records where v is."""
    key[i], val[i] = k, v
    if len(pos):
        pos[v] = i


@numba.njit(cache=True)
def _sift_up(key, val, pos, i):  # pragma: no cover - compiled
    k, v = key[i], val[i]
    while i > 0:
        p = (i - 1) >> 1
        if key[p] <= k:
            break
        _put(key, val, pos, i, key[p], val[p])
        i = p
    _put(key, val, pos, i, k, v)


@numba.njit(cache=True)
def _sift_down(key, val, pos, n, i):  # pragma: no cover - compiled
    k, v = key[i], val[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and key[c + 1] < key[c]:
            c += 1
        if k <= key[c]:
            break
        _put(key, val, pos, i, key[c], val[c])
        i = c
    _put(key, val, pos, i, k, v)


@numba.njit(cache=True)
def _push(key, val, pos, n, k, v):  # pragma: no cover - compiled
    """Push (k, v) onto the binary min-heap of size n held in key/val; the new size."""
    _put(key, val, pos, n, k, v)
    _sift_up(key, val, pos, n)
    return n + 1


@numba.njit(cache=True)
def _remove(key, val, pos, n, i):  # pragma: no cover - compiled
    """Remove entry i (0: the top) of a heap of size n; the new size."""
    if len(pos):
        pos[val[i]] = -1
    n -= 1
    if i < n:
        _put(key, val, pos, i, key[n], val[n])
        if i > 0 and key[(i - 1) >> 1] > key[i]:
            _sift_up(key, val, pos, i)
        else:
            _sift_down(key, val, pos, n, i)
    return n


@numba.njit(cache=True)
def _set(key, val, pos, n, k, v):  # pragma: no cover - compiled
    """Give v the key k in the indexed heap of size n (pushed if absent); the new size."""
    i = pos[v]
    if i < 0:
        return _push(key, val, pos, n, k, v)
    old = key[i]
    key[i] = k
    if k < old:
        _sift_up(key, val, pos, i)
    else:
        _sift_down(key, val, pos, n, i)
    return n


# fmt: off
@numba.njit(cache=True)
def _fill(
    comp_links, nl, ncomp, level0, cap, head, nxt, powner, pptr, plinks, mult,
    growing, count, left, open_, filled, new_rate,
):  # pragma: no cover - compiled
    # fmt: on
    """Max-min rates (`new_rate`) of the `ncomp` growing paths on the component's links by
    progressive filling from `level0` (below which no growing path's rate lies), each path
    weighing its flows (`count`: the growing flows on each link, `left`: its capacity less what
    the other paths take): each round rises to the level that fills the next link, freezes the
    paths through the links it filled, and keeps only the links that are still open (a growing
    path crosses them and capacity is left) for the next round, whose rise it finds on the way.
    (A heap of links keyed by the level at which each fills was tried: slower on every
    contended benchmark, fat-tree, Jellyfish and Clos, where the open links shrink fast, and it
    broke near-ties differently from the rounds.)"""
    active = 0
    delta = np.inf
    for i in range(nl):
        lk = comp_links[i]
        if count[lk] > 0:
            left[lk] -= level0 * count[lk]
            open_[active] = lk
            active += 1
            delta = min(delta, left[lk] / count[lk])
    growing_left = ncomp
    level = level0
    while growing_left > 0:
        rise = max(delta, 0.0)  # rounding may leave a link a hair over full at level0
        level += rise
        kept = 0
        nfull = 0
        for i in range(active):
            lk = open_[i]
            left[lk] -= rise * count[lk]
            if left[lk] <= _FULL * cap[lk]:
                filled[nfull] = lk
                nfull += 1
            else:
                open_[kept] = lk
                kept += 1
        for i in range(nfull):
            e = head[filled[i]]
            while e >= 0:
                p = powner[e]
                if growing[p] == 1:
                    growing[p] = 0
                    growing_left -= 1
                    new_rate[p] = level
                    for e2 in range(pptr[p], pptr[p + 1]):
                        count[plinks[e2]] -= mult[p]
                e = nxt[e]
        active = 0
        delta = np.inf
        for i in range(kept):
            lk = open_[i]
            if count[lk] > 0:
                open_[active] = lk
                active += 1
                delta = min(delta, left[lk] / count[lk])


@numba.njit(cache=True)
def _pins(lk, stamp, lam0, floor, cap, head, nxt, powner, path_mark, prate, mult):  # pragma: no cover
    """Whether link `lk` keeps the rate of every path on it through this instant: no path on it
    changed, it is full, and every path on it at `floor` or above sends at exactly `lam0`. Those
    paths end at lam0 or above (the refill starts there) and the link cannot carry more, so
    they all keep lam0 and the refill may treat them as fixed."""
    load = 0.0
    e = head[lk]
    while e >= 0:
        p = powner[e]
        if path_mark[p] == stamp or (prate[p] >= floor and prate[p] != lam0):
            return False
        load += mult[p] * prate[p]
        e = nxt[e]
    return load >= cap[lk] * (1.0 - _FULL)


# fmt: off
@numba.njit(cache=True, inline="always")
def _component(
    touched, ntouched, stamp, lam0, floor, cap, head, nxt, powner, pptr, plinks, mult,
    prate, path_mark, link_mark, comp_mark, comp_links, comp_paths, count, left, growing,
    pinning, pinned,
):  # pragma: no cover - compiled
    # fmt: on
    """The links and paths whose rates an instant can change, breadth first from the `touched`
    links (the paths whose flows changed are `path_mark`ed, the touched links `link_mark`ed,
    with `stamp`): every path whose flows changed, and every other path at rate `floor` or
    more that no link keeps at its rate (`_pins`), with its links' growing flows (`count`) and
    their capacity left after the other paths (`left`). Returns the numbers of links and
    paths. (Inlined: as a call of its own, it was rounded differently and ran slower.)"""
    nl = 0
    ncomp = 0
    for i in range(ntouched):
        lk = touched[i]
        comp_links[nl] = lk
        count[lk] = 0
        left[lk] = cap[lk]
        nl += 1
    i = 0
    while i < nl:
        at = comp_links[i]
        e = head[at]
        i += 1
        while e >= 0:
            p = powner[e]
            known = comp_mark[p] == stamp
            fixed = False
            if not known and prate[p] == lam0 and path_mark[p] != stamp:
                if abs(pinned[p]) != stamp:  # not yet asked this instant
                    pinned[p] = -stamp
                    for e2 in range(pptr[p], pptr[p + 1]):
                        lk = plinks[e2]
                        if abs(pinning[lk]) != stamp:
                            keeps = _pins(
                                lk, stamp, lam0, floor, cap, head, nxt, powner, path_mark, prate, mult
                            )
                            pinning[lk] = stamp if keeps else -stamp
                        if pinning[lk] == stamp:
                            pinned[p] = stamp
                            break
                fixed = pinned[p] == stamp
            if known or (not fixed and (path_mark[p] == stamp or prate[p] >= floor)):
                count[at] += mult[p]
                if comp_mark[p] != stamp:
                    comp_mark[p] = stamp
                    comp_paths[ncomp] = p
                    ncomp += 1
                    growing[p] = 1
                    for e2 in range(pptr[p], pptr[p + 1]):
                        lk = plinks[e2]
                        if link_mark[lk] != stamp:
                            link_mark[lk] = stamp
                            comp_links[nl] = lk
                            count[lk] = 0
                            left[lk] = cap[lk]
                            nl += 1
            else:
                left[at] -= mult[p] * prate[p]
            e = nxt[e]
    return nl, ncomp


# fmt: off
@numba.njit(cache=True)
def _run(
    path_of, pptr, plinks, powner, bottleneck, latency, pchunk, cap, alpha,
    member_of, group_left, wait_left, dep_ptr, dependents,
    send_at, done_at, target,
    mult, prate, service, since, queue, qhead, qtail,
    occupancy, head, nxt, prv,
    hkey, hval, spos, sizes,
    link_mark, path_mark, comp_mark, touched, comp_links, comp_paths,
    dirty, count, left, growing, open_links, new_rate, pinning, pinned,
    clock, counters, log_t, log_p, log_r, batch,
):  # pragma: no cover - compiled
    # fmt: on
    """Handle up to `batch` instants; a return code (`_FINISHED`, `_MORE`, `_STUCK`, `_LOG_FULL`).
    counters: instants, transfers done, mark stamp, log entries; clock: the current time."""
    num_paths = len(mult)
    tracing = len(log_t) > 0
    unindexed = np.empty(0, dtype=np.int64)  # the ready and arrival heaps keep no positions
    kR, vR = hkey[_READY], hval[_READY]
    kS, vS = hkey[_SEND], hval[_SEND]
    kA, vA = hkey[_ARRIVE], hval[_ARRIVE]
    now = clock[0]
    done_here = 0
    while True:
        if sizes[_READY] == 0 and sizes[_SEND] == 0 and sizes[_ARRIVE] == 0:
            clock[0] = now
            return _FINISHED
        if done_here >= batch:
            clock[0] = now
            return _MORE
        if tracing and counters[3] + num_paths > len(log_t):
            clock[0] = now
            return _LOG_FULL
        done_here += 1
        now = np.inf
        if sizes[_READY] > 0:
            now = min(now, kR[0])
        if sizes[_SEND] > 0:
            now = min(now, kS[0])
        if sizes[_ARRIVE] > 0:
            now = min(now, kA[0])
        counters[0] += 1
        counters[2] += 1
        stamp = counters[2]
        tol = REL * max(now, 1e-300)
        arrived = False
        changed = False
        lam0 = np.inf  # the lowest rate this instant changes (see the refill below)
        ntouched = 0
        ndirty = 0
        # arrivals: dependents become ready and wait alpha
        while sizes[_ARRIVE] > 0 and kA[0] <= now + tol:
            f = vA[0]
            sizes[_ARRIVE] = _remove(kA, vA, unindexed, sizes[_ARRIVE], 0)
            arrived = True
            counters[1] += 1
            for j in range(member_of.shape[1]):
                g = member_of[f, j]
                if g < 0:
                    continue
                group_left[g] -= 1
                if group_left[g] == 0:
                    for q in range(dep_ptr[g], dep_ptr[g + 1]):
                        d = dependents[q]
                        wait_left[d] -= 1
                        if wait_left[d] == 0:
                            send_at[d] = now + alpha
                            sizes[_READY] = _push(kR, vR, unindexed, sizes[_READY], send_at[d], d)
        # last bytes sent: flows leave their path (oldest first) and fly for its latency
        while sizes[_SEND] > 0:
            p = vS[0]
            if kS[0] > now + tol + REL * pchunk[p] / prate[p]:
                break
            sizes[_SEND] = _remove(kS, vS, spos, sizes[_SEND], 0)
            lam0 = min(lam0, prate[p])
            service[p] += prate[p] * (now - since[p])
            since[p] = now
            gone = 0  # its first flow is due (the entry said so), and any others due within the tolerance
            while mult[p] > 0 and (
                gone == 0 or target[queue[qhead[p]]] - service[p] <= prate[p] * tol + REL * pchunk[p]
            ):
                f = queue[qhead[p]]
                qhead[p] += 1
                mult[p] -= 1
                gone += 1
                done_at[f] = now + latency[p]
                sizes[_ARRIVE] = _push(kA, vA, unindexed, sizes[_ARRIVE], done_at[f], f)
            changed = True
            if path_mark[p] != stamp:
                path_mark[p] = stamp
                dirty[ndirty] = p
                ndirty += 1
            for e in range(pptr[p], pptr[p + 1]):
                lk = plinks[e]
                occupancy[lk] -= gone
                if mult[p] == 0:  # the path leaves its links' lists
                    if prv[e] >= 0:
                        nxt[prv[e]] = nxt[e]
                    else:
                        head[lk] = nxt[e]
                    if nxt[e] >= 0:
                        prv[nxt[e]] = prv[e]
                if occupancy[lk] > 0 and link_mark[lk] != stamp:
                    link_mark[lk] = stamp
                    touched[ntouched] = lk
                    ntouched += 1
        # starts
        while sizes[_READY] > 0 and kR[0] <= now + tol:
            f = vR[0]
            sizes[_READY] = _remove(kR, vR, unindexed, sizes[_READY], 0)
            changed = True
            p = path_of[f]
            if mult[p] == 0:
                service[p] = 0.0
                prate[p] = bottleneck[p]
            else:
                service[p] += prate[p] * (now - since[p])
            since[p] = now
            target[f] = service[p] + pchunk[p]
            queue[qtail[p]] = f
            qtail[p] += 1
            mult[p] += 1
            if path_mark[p] != stamp:
                path_mark[p] = stamp
                dirty[ndirty] = p
                ndirty += 1
            alone = True
            for e in range(pptr[p], pptr[p + 1]):
                lk = plinks[e]
                if mult[p] == 1:  # the path joins its links' lists
                    prv[e] = -1
                    nxt[e] = head[lk]
                    if head[lk] >= 0:
                        prv[head[lk]] = e
                    head[lk] = e
                occupancy[lk] += 1
                if occupancy[lk] > 1:
                    alone = False
                    if link_mark[lk] != stamp:
                        link_mark[lk] = stamp
                        touched[ntouched] = lk
                        ntouched += 1
            share = np.inf  # the new flow gets at least its fairest link's share
            for e in range(pptr[p], pptr[p + 1]):
                share = min(share, cap[plinks[e]] / occupancy[plinks[e]])
            lam0 = min(lam0, share)
            if alone:
                sizes[_SEND] = _set(kS, vS, spos, sizes[_SEND], now + pchunk[p] / prate[p], p)
        ncomp = 0
        if ntouched > 0:
            # a rate below lam0 stays as it was (max-min filling is the same up to the lowest
            # level an instant changes: a flow of rate r leaving frees nothing below r, and one
            # joining takes its fairest link's share or more), so the component (`_component`)
            # holds the faster paths only and the filling starts at lam0
            floor = lam0 * (1.0 - REL)
            nl, ncomp = _component(
                touched, ntouched, stamp, lam0, floor, cap, head, nxt, powner, pptr, plinks, mult,
                prate, path_mark, link_mark, comp_mark, comp_links, comp_paths, count, left, growing,
                pinning, pinned,
            )  # fmt: skip
            _fill(
                comp_links, nl, ncomp, lam0, cap, head, nxt, powner, pptr, plinks, mult,
                growing, count, left, open_links, touched, new_rate,
            )  # fmt: skip
            for i in range(ncomp):
                p = comp_paths[i]
                r = new_rate[p]
                if r == prate[p] and since[p] < now:
                    continue  # no flow of it came or went, its rate holds: so does its finish entry
                service[p] += prate[p] * (now - since[p])
                since[p] = now
                prate[p] = r
                k = now + (target[queue[qhead[p]]] - service[p]) / r
                sizes[_SEND] = _set(kS, vS, spos, sizes[_SEND], k, p)
                if path_mark[p] != stamp:
                    path_mark[p] = stamp
                    dirty[ndirty] = p
                    ndirty += 1
        if tracing:  # the total rate of every path whose flows or rate changed
            for i in range(ndirty):
                p = dirty[i]
                k = counters[3]
                log_t[k], log_p[k], log_r[k] = now, p, mult[p] * prate[p]
                counters[3] += 1
        if not (arrived or changed):
            clock[0] = now
            return _STUCK


@numba.njit(cache=True)
def _contains(a, b):  # pragma: no cover - compiled
    """Whether the sorted array `b` holds every element of the sorted array `a`."""
    j = 0
    for x in a:
        while j < len(b) and b[j] < x:
            j += 1
        if j == len(b) or b[j] != x:
            return False
        j += 1
    return True


@numba.njit(cache=True)
def _dominated(ptr, links, link_ptr, link_paths, cap):  # pragma: no cover - compiled
    """Links whose capacity constraint never binds first: link l is dominated by a link m that
    every path through l also crosses, with capacity no larger (ties: more paths, then the lower
    index), because m then carries at least l's load at every instant and fills no later."""
    out = np.zeros(len(link_ptr) - 1, dtype=np.bool_)
    for lk in range(len(link_ptr) - 1):
        mine = link_paths[link_ptr[lk] : link_ptr[lk + 1]]
        if len(mine) == 0:
            continue
        p = mine[0]
        for e in range(ptr[p], ptr[p + 1]):
            m = links[e]
            theirs = link_paths[link_ptr[m] : link_ptr[m + 1]]
            if m == lk or cap[m] > cap[lk] or len(theirs) < len(mine):
                continue
            if cap[m] == cap[lk] and len(theirs) == len(mine) and m > lk:
                continue
            if _contains(mine, theirs):
                out[lk] = True
                break
    return out


@dataclass(frozen=True)
class _Paths:
    """The distinct paths of the transfers: links (CSR), the path of every link entry, the path
    of every transfer, bottleneck, latency and the bytes of each of its transfers; a path's
    flows share one max-min rate. `ptr`/`links`/`owner` keep only the links whose constraint can
    bind (`_dominated`), which is all max-min filling needs; `all_ptr`/`all_links` every link,
    for the per-link trace."""

    of: np.ndarray
    ptr: np.ndarray
    links: np.ndarray
    owner: np.ndarray
    bottleneck: np.ndarray
    latency: np.ndarray
    chunk: np.ndarray
    all_ptr: np.ndarray
    all_links: np.ndarray

    @classmethod
    def of_transfers(cls, cp: CompiledPaths, chunk: np.ndarray, capacity: np.ndarray) -> _Paths:
        num = len(cp.path_ptr) - 1
        first = np.full(num, -1, dtype=np.int64)
        first[cp.path_id[::-1]] = np.arange(len(cp.path_id))[::-1]  # each path's first transfer
        used = first >= 0
        size = np.ones(num)
        size[used] = chunk[first[used]]
        owner = cp.path_owner
        live = used[owner]  # entries of paths some transfer takes
        order = np.lexsort((owner[live], cp.path_links[live]))  # by link, then path
        link_paths = owner[live][order]
        link_ptr = np.concatenate([[0], np.cumsum(np.bincount(cp.path_links[live], minlength=len(capacity)))])
        drop = _dominated(cp.path_ptr, cp.path_links, link_ptr.astype(np.int64), link_paths, capacity)
        keep = ~drop[cp.path_links]
        ptr = np.concatenate([[0], np.cumsum(np.add.reduceat(keep, cp.path_ptr[:-1]) if num else [])])
        ptr = ptr.astype(np.int64)
        return cls(
            cp.path_id, ptr, cp.path_links[keep], owner[keep], cp.path_bottleneck, cp.path_latency, size,
            cp.path_ptr, cp.path_links,
        )  # fmt: skip


def _start(
    paths: _Paths, deps: Dependencies, num_links: int, alpha: float, release: np.ndarray, trace: bool
) -> dict[str, np.ndarray]:
    """Every array the kernel reads and writes, kept between its calls: nothing sent yet, the
    transfers that wait for nothing ready at their release time plus α."""
    n, num_paths, entries = len(paths.of), len(paths.ptr) - 1, len(paths.links)
    heap = max(n, num_paths)  # ready and arrival entries: one per transfer; finish entries: one per path
    queue_ptr = np.concatenate([[0], np.cumsum(np.bincount(paths.of, minlength=num_paths))])
    log = 4 * num_paths + 16 if trace else 0
    a = {
        "group_left": deps.size.astype(np.int64),
        "wait_left": deps.wait_count.astype(np.int64),
        "send_at": np.full(n, np.inf),
        "done_at": np.full(n, np.inf),
        "target": np.zeros(n),
        "mult": np.zeros(num_paths, dtype=np.int64),
        "prate": np.zeros(num_paths),
        "service": np.zeros(num_paths),
        "since": np.zeros(num_paths),
        "queue": np.zeros(n, dtype=np.int64),
        "qhead": queue_ptr[:-1].copy(),
        "qtail": queue_ptr[:-1].copy(),
        "occupancy": np.zeros(num_links, dtype=np.int64),
        "head": np.full(num_links, -1, dtype=np.int64),
        "nxt": np.full(entries, -1, dtype=np.int64),
        "prv": np.full(entries, -1, dtype=np.int64),
        "hkey": np.zeros((3, heap)),
        "hval": np.zeros((3, heap), dtype=np.int64),
        "spos": np.full(num_paths, -1, dtype=np.int64),  # each path's finish entry in its heap
        "sizes": np.zeros(3, dtype=np.int64),
        "link_mark": np.zeros(num_links, dtype=np.int64),
        "path_mark": np.zeros(num_paths, dtype=np.int64),
        "comp_mark": np.zeros(num_paths, dtype=np.int64),
        "touched": np.zeros(num_links, dtype=np.int64),
        "comp_links": np.zeros(num_links, dtype=np.int64),
        "comp_paths": np.zeros(num_paths, dtype=np.int64),
        "dirty": np.zeros(2 * num_paths, dtype=np.int64),
        "count": np.zeros(num_links, dtype=np.int64),
        "left": np.zeros(num_links),
        "growing": np.zeros(num_paths, dtype=np.int8),
        "open_links": np.zeros(num_links, dtype=np.int64),
        "new_rate": np.zeros(num_paths),
        "pinning": np.zeros(num_links, dtype=np.int64),  # ±stamp: the link pins its paths (+) or not (−)
        "pinned": np.zeros(num_paths, dtype=np.int64),  # ±stamp: the path keeps its rate (+) or not (−)
        "clock": np.zeros(1),
        "counters": np.zeros(4, dtype=np.int64),
        "log_t": np.zeros(log),
        "log_p": np.zeros(log, dtype=np.int64),
        "log_r": np.zeros(log),
    }
    ready = np.flatnonzero(a["wait_left"] == 0)
    ready = ready[np.argsort(release[ready], kind="stable")]  # sorted keys: already a heap
    a["send_at"][ready] = release[ready] + alpha
    a["hkey"][_READY, : len(ready)] = a["send_at"][ready]
    a["hval"][_READY, : len(ready)] = ready
    a["sizes"][_READY] = len(ready)
    return a


def simulate_events(
    cp: CompiledPaths,
    deps: Dependencies,
    capacity: np.ndarray,
    chunk_bytes: float | np.ndarray,
    alpha: float,
    trace: list | None = None,
    deadline: float = np.inf,
    progress: Callable[[int, int], None] | None = None,
    release: np.ndarray | None = None,
    max_instants: int | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The exact event simulation: (send start, done, number of event instants) per transfer;
    the transfers of one path (`cp.path_id`) cross the same links and carry the same
    `chunk_bytes`, one number or one per transfer; a transfer that waits for
    nothing starts at its `release` time (default 0) plus α.

    With a `trace` list, every instant where a flow started or stopped appends (time, links,
    summed rate on each): the exact per-link rate, piecewise constant until the next entry.
    Past `deadline` (a `time.monotonic()` value) it stops with `OutOfTime`; `progress(done,
    total)` is called after every batch of `BATCH` instants and at the end, with the transfers
    done so far. After `max_instants` event instants it stops with `OutOfTime` too: a bound
    on work that, unlike a deadline, gives the same answer on any machine. Its callers check
    its memory (`limits.check_simulation`) before they derive the dependencies, which are part
    of it."""
    n = len(cp.path_id)
    paths = _Paths.of_transfers(cp, np.broadcast_to(np.asarray(chunk_bytes, dtype=float), (n,)), capacity)
    release = np.zeros(n) if release is None else release
    a = _start(paths, deps, len(capacity), alpha, release, trace is not None)
    limit = np.inf if max_instants is None else max_instants
    while True:
        instants = int(a["counters"][0])
        if time.monotonic() > deadline:
            raise OutOfTime(f"flow simulation stopped at its deadline after {instants:,} event instants")
        if instants >= limit:
            raise OutOfTime(f"flow simulation stopped at its limit of {instants:,} event instants")
        code = _run(
            paths.of, paths.ptr, paths.links, paths.owner, paths.bottleneck, paths.latency, paths.chunk,
            capacity, alpha,
            deps.member_of, a["group_left"], a["wait_left"], deps.dep_ptr, deps.dependents,
            a["send_at"], a["done_at"], a["target"],
            a["mult"], a["prate"], a["service"], a["since"], a["queue"], a["qhead"], a["qtail"],
            a["occupancy"], a["head"], a["nxt"], a["prv"],
            a["hkey"], a["hval"], a["spos"], a["sizes"],
            a["link_mark"], a["path_mark"], a["comp_mark"], a["touched"], a["comp_links"], a["comp_paths"],
            a["dirty"], a["count"], a["left"], a["growing"], a["open_links"], a["new_rate"],
            a["pinning"], a["pinned"],
            a["clock"], a["counters"], a["log_t"], a["log_p"], a["log_r"], min(BATCH, limit - instants),
        )  # fmt: skip
        if code == _STUCK:
            # a bug, never input
            raise RuntimeError(f"flow simulation made no progress at t={a['clock'][0]!r}")
        if code == _LOG_FULL:
            for name in ("log_t", "log_p", "log_r"):
                a[name] = np.concatenate([a[name], np.zeros_like(a[name])])
        if progress is not None:
            progress(int(a["counters"][1]), n)
        if code == _FINISHED:
            break
    if trace is not None:
        k = int(a["counters"][3])
        trace.extend(_trace(paths, capacity, a["log_t"][:k], a["log_p"][:k], a["log_r"][:k]))
    return a["send_at"], a["done_at"], int(a["counters"][0])


def _trace(
    paths: _Paths, capacity: np.ndarray, times: np.ndarray, flows: np.ndarray, rates: np.ndarray
) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """Per-link summed rates at every logged instant, from the log of each path's total rate
    (all its flows), in order."""
    if not len(times):
        return []
    order = np.lexsort((np.arange(len(flows)), flows))  # by flow, then in log order
    before = np.concatenate([[0.0], rates[order][:-1]])
    before[1:][flows[order][1:] != flows[order][:-1]] = 0.0  # a flow's first entry: from rate 0
    change = np.empty(len(flows))
    change[order] = rates[order] - before
    idx, lens = gather(paths.all_ptr, flows)
    entry_links, entry_change = paths.all_links[idx], np.repeat(change, lens)
    ends = np.cumsum(lens)
    total = np.zeros(len(capacity))
    tiny = _FULL * float(capacity.max())
    out = []
    for lo, hi in _runs(times):
        a, b = ends[lo] - lens[lo], ends[hi - 1]
        np.add.at(total, entry_links[a:b], entry_change[a:b])
        busy = np.flatnonzero(total > tiny)
        out.append((float(times[lo]), busy, total[busy].copy()))
    return out


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of every run of equal values."""
    cuts = (np.flatnonzero(np.diff(values)) + 1).tolist()
    return list(zip([0, *cuts], [*cuts, len(values)], strict=True))
