"""The flow model's event simulation, compiled: the cost of an event is what it changes.

Semantics are the flow model's (`flow`, design §3.5): a ready transfer pays α, sends at its
max-min fair rate and is done one path latency after its last byte; every event at the same
instant (within a relative `REL`) is handled together. What makes it fast:

- **incremental max-min**: max-min fair rates decompose over the connected components of the
  graph that joins sending flows to the links they cross, and an instant changes only part
  of a component: no rate below the lowest level the instant changes (lam0: a flow of rate r
  leaving frees nothing below r; a flow joining gets at least its fairest link's share), and
  no rate whose bottleneck (a full link where no path is faster) sees no change. So the
  refill (`_local`) takes the paths whose flows changed and, breadth first, the paths at lam0
  or above whose bottleneck is one of their links or one the instant touched; it fills them
  with every other path held at its rate (progressive filling from lam0, `_fill`), and where a
  refilled path froze below a held path on a link, or a link is over full, those held paths
  join and it fills again. Each path keeps the link that froze it. Where that does not settle
  within a few rounds, the whole component at lam0 or above is refilled (`_component`). A flow
  that starts alone on its links simply sends at its path's bottleneck. Recursive
  halving-doubling over a 512-server Jellyfish refills ~42 paths an instant, where the
  component at lam0 or above holds ~300 at ~100 distinct rates (one-off count; times in
  `benchmarks/bench_sim.py`);
- **paths, not flows**: flows on the same path get the same max-min rate, so the filling works
  on paths weighted by their flows, and a path's flows, all of one size, finish in the order
  they started (a queue per path, a finish entry per path);
- **only links that can bind**: a link is left out of the paths the kernel walks where another
  link that every path through it also crosses is no wider (`_dominated`): that link carries
  at least its load at every instant, so it fills first. Random rings on fat-trees lose most
  of their path entries (the hosts' own links and most core links carry one hop), and the
  component walk and the filling shrink with them (`benchmarks/bench_sim.py`);
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
_TIE = 1e-12  # the local refill's check: a link is full, and two rates equal, within this share
_ROUNDS = 6  # the local refill's rounds before it gives up and refills the whole component
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
    growing, count, left, open_, filled, new_rate, new_bott, level_of,
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
    broke near-ties differently from the rounds.) The link that froze each path goes to
    `new_bott`, and the level at which each link filled to `level_of`."""
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
            level_of[filled[i]] = level
            e = head[filled[i]]
            while e >= 0:
                p = powner[e]
                if growing[p] == 1:
                    growing[p] = 0
                    growing_left -= 1
                    new_rate[p] = level
                    new_bott[p] = filled[i]
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


# fmt: off
@numba.njit(cache=True, inline="always")
def _grow(
    stamp, floor, nl, ncomp, k_path, k_link, cap, head, nxt, powner, pptr, plinks, mult, prate, bott,
    comp_mark, set_mark, link_pos, comp_links, comp_paths, bcount, bleft, held_top,
):  # pragma: no cover - compiled
    # fmt: on
    """Extend the refill breadth first: the links of its paths join it, and on each link,
    every held path whose bottleneck it is (at `floor` or above: slower rates stay, see `_run`),
    since that link's load may change. Each link is walked once, when its flows on refilled
    paths, its capacity less the held paths' load and the fastest held path are counted
    (`bcount`, `bleft`, `held_top`); a path that joins later gives its load back on the links
    walked before. Returns nl, ncomp."""
    while True:
        while k_path < ncomp:
            p = comp_paths[k_path]
            k_path += 1
            for e in range(pptr[p], pptr[p + 1]):
                lk = plinks[e]
                if set_mark[lk] != stamp:
                    set_mark[lk] = stamp
                    link_pos[lk] = nl
                    comp_links[nl] = lk
                    nl += 1
        if k_link == nl:
            return nl, ncomp
        at = comp_links[k_link]
        k_link += 1
        c = 0
        room = cap[at]
        top = 0.0
        e = head[at]
        while e >= 0:
            q = powner[e]
            e = nxt[e]
            if comp_mark[q] != stamp and bott[q] == at and prate[q] >= floor:
                comp_mark[q] = stamp
                comp_paths[ncomp] = q
                ncomp += 1
                for e2 in range(pptr[q], pptr[q + 1]):
                    lk = plinks[e2]
                    if lk != at and set_mark[lk] == stamp and link_pos[lk] < k_link:
                        bleft[lk] += mult[q] * prate[q]
                        bcount[lk] += mult[q]
            if comp_mark[q] == stamp:
                c += mult[q]
            else:
                room -= mult[q] * prate[q]
                top = max(top, prate[q])
        bcount[at] = c
        bleft[at] = room
        held_top[at] = top


# fmt: off
@numba.njit(cache=True, inline="always")
def _local(
    touched, ncomp, stamp, floor, cap, head, nxt, powner, pptr, plinks, mult, prate, bott,
    comp_mark, set_mark, link_pos, comp_links, comp_paths, bcount, bleft, held_top, count, left,
    growing, open_, filled, new_rate, new_bott, level_of, rounds,
):  # pragma: no cover - compiled
    # fmt: on
    """Refill only the paths whose rates must change, found by checking the max-min condition
    around the change: rates are max-min fair where every path has a bottleneck, a full link
    on which no path sends faster (`bott` keeps the link that froze each path). The refill
    takes the paths whose flows changed and, breadth first, every path (at `floor` or above)
    whose bottleneck is a link of the refill or one the event touched (`_grow`); it fills them
    with every other path held at its rate. A held path's bottleneck is then outside the
    refill, where nothing changed, so the rates are max-min unless a refilled path froze on a
    link below a held path's rate, or a link is over full (held paths faster than the fill's
    start): those held paths join and the refill runs again. Returns the numbers of links and
    paths and whether it settled within `rounds` rounds (if not, the caller refills the whole
    component). The paths whose flows changed come `comp_mark`ed, the first `ncomp` of
    `comp_paths`. (Inlined, as a call cost about 15 % more on the Clos's group-trees: hence at
    most 30 arguments, beyond which CPython passes them as *args, which numba cannot inline.)"""
    nl = 0
    for lk in touched:
        set_mark[lk] = stamp
        link_pos[lk] = nl
        comp_links[nl] = lk
        nl += 1
    nl, ncomp = _grow(
        stamp, floor, nl, ncomp, 0, 0, cap, head, nxt, powner, pptr, plinks, mult, prate, bott,
        comp_mark, set_mark, link_pos, comp_links, comp_paths, bcount, bleft, held_top,
    )  # fmt: skip
    for _ in range(rounds):
        for i in range(nl):
            lk = comp_links[i]
            count[lk] = bcount[lk]
            left[lk] = bleft[lk]
            level_of[lk] = -1.0
        for i in range(ncomp):
            growing[comp_paths[i]] = 1
        _fill(
            comp_links, nl, ncomp, floor, cap, head, nxt, powner, pptr, plinks, mult,
            growing, count, left, open_, filled, new_rate, new_bott, level_of,
        )  # fmt: skip
        njoin = 0
        for i in range(nl):
            lk = comp_links[i]
            level = level_of[lk]  # where refilled paths froze on it, their rate
            over = left[lk] < -_TIE * cap[lk]
            if not ((level >= 0 and held_top[lk] > level * (1.0 + _TIE)) or (over and held_top[lk] > floor)):
                continue
            e = head[lk]
            while e >= 0:
                q = powner[e]
                e = nxt[e]
                if comp_mark[q] == stamp:
                    continue
                r = prate[q]
                if (level >= 0 and r > level * (1.0 + _TIE)) or (over and r > floor):
                    comp_mark[q] = stamp  # joins below, after this check (its rate is held until then)
                    comp_paths[ncomp + njoin] = q
                    njoin += 1
        if njoin == 0:
            return nl, ncomp, True
        first = ncomp
        ncomp += njoin
        for i in range(first, ncomp):  # on the links walked already, the joiners' load is no longer held
            q = comp_paths[i]
            for e in range(pptr[q], pptr[q + 1]):
                lk = plinks[e]
                if set_mark[lk] == stamp:
                    bleft[lk] += mult[q] * prate[q]
                    bcount[lk] += mult[q]
        nl, ncomp = _grow(
            stamp, floor, nl, ncomp, first, nl, cap, head, nxt, powner, pptr, plinks, mult, prate, bott,
            comp_mark, set_mark, link_pos, comp_links, comp_paths, bcount, bleft, held_top,
        )  # fmt: skip
    return nl, ncomp, False


# fmt: off
@numba.njit(cache=True, inline="always")
def _component(
    touched, ntouched, stamp, mark, floor, cap, head, nxt, powner, pptr, plinks, mult,
    prate, path_mark, link_mark, comp_mark, comp_links, comp_paths, count, left, growing,
):  # pragma: no cover - compiled
    # fmt: on
    """The links and paths whose rates an instant can change, breadth first from the `touched`
    links (the paths whose flows changed are `path_mark`ed with `stamp`; the links and paths
    reached are marked with `mark`): every path whose flows changed, and every other path at rate `floor`
    or more, with its links' growing flows (`count`) and their capacity left after the other
    paths (`left`). Returns the numbers of links and paths."""
    nl = 0
    ncomp = 0
    for i in range(ntouched):
        lk = touched[i]
        link_mark[lk] = mark
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
            if comp_mark[p] == mark or path_mark[p] == stamp or prate[p] >= floor:
                count[at] += mult[p]
                if comp_mark[p] != mark:
                    comp_mark[p] = mark
                    comp_paths[ncomp] = p
                    ncomp += 1
                    growing[p] = 1
                    for e2 in range(pptr[p], pptr[p + 1]):
                        lk = plinks[e2]
                        if link_mark[lk] != mark:
                            link_mark[lk] = mark
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
    path_of, pptr, plinks, powner, bottleneck, narrow, latency, pchunk, cap, alpha,
    member_of, group_left, wait_left, dep_ptr, dependents,
    send_at, done_at, target,
    mult, prate, service, since, queue, qhead, qtail,
    occupancy, head, nxt, prv,
    hkey, hval, spos, sizes,
    link_mark, path_mark, comp_mark, set_mark, link_pos, touched, comp_links, comp_paths, dirty,
    count, left, bcount, bleft, held_top, growing, open_links, filled, new_rate, bott, new_bott,
    level_of, rounds,
    clock, counters, log_t, log_p, log_r, batch,
):  # pragma: no cover - compiled
    # fmt: on
    """Handle up to `batch` instants; a return code (`_FINISHED`, `_MORE`, `_STUCK`, `_LOG_FULL`).
    counters: instants, transfers done, mark stamp, log entries, paths refilled; clock: the
    current time."""
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
                bott[p] = narrow[p]
                sizes[_SEND] = _set(kS, vS, spos, sizes[_SEND], now + pchunk[p] / prate[p], p)
        ncomp = 0
        if ntouched > 0:
            # a rate below lam0 stays as it was (max-min filling is the same up to the lowest
            # level an instant changes: a flow of rate r leaving frees nothing below r, and one
            # joining takes its fairest link's share or more): the local refill starts there,
            # and so does the whole component's where the local one does not settle
            floor = lam0 * (1.0 - REL)
            for i in range(ndirty):
                p = dirty[i]
                if mult[p] > 0:
                    comp_mark[p] = stamp
                    comp_paths[ncomp] = p
                    ncomp += 1
            nl, ncomp, settled = _local(
                touched[:ntouched], ncomp, stamp, floor, cap, head, nxt, powner, pptr, plinks, mult, prate,
                bott, comp_mark, set_mark, link_pos, comp_links, comp_paths, bcount, bleft, held_top, count,
                left, growing, open_links, filled, new_rate, new_bott, level_of, rounds,
            )  # fmt: skip
            if not settled:
                counters[2] += 1
                nl, ncomp = _component(
                    touched, ntouched, stamp, counters[2], floor, cap, head, nxt, powner, pptr,
                    plinks, mult, prate, path_mark, link_mark, comp_mark, comp_links, comp_paths, count, left,
                    growing,
                )  # fmt: skip
                _fill(
                    comp_links, nl, ncomp, lam0, cap, head, nxt, powner, pptr, plinks, mult,
                    growing, count, left, open_links, filled, new_rate, new_bott, level_of,
                )  # fmt: skip
            counters[4] += ncomp
            for i in range(ncomp):
                p = comp_paths[i]
                r = new_rate[p]
                bott[p] = new_bott[p]
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
    of every transfer, bottleneck (and `narrow`, a kept link of that capacity), latency and the
    bytes of each of its transfers; a path's flows share one max-min rate. `ptr`/`links`/`owner`
    keep only the links whose constraint can bind (`_dominated`), which is all max-min filling
    needs; `all_ptr`/`all_links` every link, for the per-link trace."""

    of: np.ndarray
    ptr: np.ndarray
    links: np.ndarray
    owner: np.ndarray
    bottleneck: np.ndarray
    narrow: np.ndarray
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
        links, owner = cp.path_links[keep], owner[keep]
        by_capacity = np.lexsort((capacity[links], owner))  # each path's narrowest kept link first
        narrow = np.full(num, -1, dtype=np.int64)
        narrow[owner[by_capacity][::-1]] = links[by_capacity][::-1]
        return cls(
            cp.path_id, ptr, links, owner, cp.path_bottleneck, narrow, cp.path_latency, size,
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
        "bcount": np.zeros(num_links, dtype=np.int64),
        "bleft": np.zeros(num_links),
        "filled": np.zeros(num_links, dtype=np.int64),
        "set_mark": np.zeros(num_links, dtype=np.int64),
        "link_pos": np.zeros(num_links, dtype=np.int64),
        "held_top": np.zeros(num_links),
        "level_of": np.zeros(num_links),
        "bott": np.full(num_paths, -1, dtype=np.int64),  # the link that froze each path's rate
        "new_bott": np.full(num_paths, -1, dtype=np.int64),
        "clock": np.zeros(1),
        "counters": np.zeros(5, dtype=np.int64),
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
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """The exact event simulation: send start and done per transfer, and counts: the event
    instants, and the paths refilled over all of them (the work the instants' changes took);
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
            paths.of, paths.ptr, paths.links, paths.owner, paths.bottleneck, paths.narrow, paths.latency,
            paths.chunk, capacity, alpha,
            deps.member_of, a["group_left"], a["wait_left"], deps.dep_ptr, deps.dependents,
            a["send_at"], a["done_at"], a["target"],
            a["mult"], a["prate"], a["service"], a["since"], a["queue"], a["qhead"], a["qtail"],
            a["occupancy"], a["head"], a["nxt"], a["prv"],
            a["hkey"], a["hval"], a["spos"], a["sizes"],
            a["link_mark"], a["path_mark"], a["comp_mark"], a["set_mark"], a["link_pos"], a["touched"],
            a["comp_links"], a["comp_paths"], a["dirty"], a["count"], a["left"], a["bcount"], a["bleft"],
            a["held_top"], a["growing"], a["open_links"], a["filled"], a["new_rate"], a["bott"],
            a["new_bott"], a["level_of"], _ROUNDS,
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
    counts = {"event_instants": int(a["counters"][0]), "paths_refilled": int(a["counters"][4])}
    return a["send_at"], a["done_at"], counts


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
