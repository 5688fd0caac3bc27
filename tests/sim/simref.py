"""The independent reference for the simulator tests, written from design §3.3/§3.5 in plain
Python without arsched.sim: the dependency sets of asynchronous execution (every pair of
transfers compared against the rules), max-min fair rates by the bottleneck-link algorithm (not
the progressive filling arsched uses), first-fit rounds, and a plain event loop for the flow
model. Everything works on the (node, node) links of each transfer's written path; slow and
simple on purpose.
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def link_lists(schedule) -> list[list[tuple[str, str]]]:
    """The directed links (u, v) of every transfer's path, in stored order."""
    return [list(zip(t.path[:-1], t.path[1:], strict=True)) for t in schedule.transfers]


def link_index(topology) -> dict[tuple[str, str], int]:
    """(src, dst) -> position of that link in topology.links (the order of per-link arrays)."""
    return {(lk.src, lk.dst): i for i, lk in enumerate(topology.links)}


def link_numbers(schedule) -> list[list[int]]:
    """The positions in topology.links of every transfer's path links."""
    index = link_index(schedule.topology)
    return [[index[lk] for lk in links] for links in link_lists(schedule)]


def path_latency(schedule) -> np.ndarray:
    """Every transfer's path latency: the sum over its links."""
    top = schedule.topology
    return np.array([sum(top.link(u, v).latency for u, v in ls) for ls in link_lists(schedule)])


def path_bottleneck(schedule) -> np.ndarray:
    """Every transfer's path bandwidth: the slowest of its links."""
    top = schedule.topology
    return np.array([min(top.link(u, v).bandwidth for u, v in ls) for ls in link_lists(schedule)])


def steps_of(schedule) -> dict[int, list[int]]:
    """Transfer indices of every step, in stored order, steps ascending."""
    out: dict[int, list[int]] = {}
    for i, t in enumerate(schedule.transfers):
        out.setdefault(t.step, []).append(i)
    return dict(sorted(out.items()))


def step_link_loads(schedule) -> dict[int, int]:
    """The largest number of a step's transfers sharing one directed link, per step."""
    links = link_lists(schedule)
    return {
        step: max(Counter(lk for i in rows for lk in links[i]).values())
        for step, rows in steps_of(schedule).items()
    }


def disjoint_steps(schedule) -> bool:
    """True if no directed link carries two transfers of the same step."""
    return all(v == 1 for v in step_link_loads(schedule).values())


def uniform_bandwidth(topology) -> bool:
    return len({lk.bandwidth for lk in topology.links}) == 1


def max_link_load(link_sets: list[set]) -> int:
    """The most transfers of the list that use one directed link."""
    return max(Counter(lk for ls in link_sets for lk in ls).values())


def semantic_preds(schedule, synchronous: bool = False, fifo: bool = False) -> list[set[int]]:
    """Every earlier-step transfer that writes t's source buffer or reads or writes t's
    destination buffer (design §3.3); with `synchronous`, every transfer of an earlier step;
    with `fifo`, also every transfer of the latest earlier step t's (source, destination)
    connection used."""
    tr = schedule.transfers
    step = np.array([t.step for t in tr])
    src = [(t.src, t.chunk) for t in tr]
    dst = [(t.dst, t.chunk) for t in tr]
    conn = [(t.src, t.dst) for t in tr]
    out = []
    for i in range(len(tr)):
        preds = set()
        earlier = np.flatnonzero(step < step[i]).tolist()
        for u in earlier:
            if synchronous or dst[u] == src[i] or dst[u] == dst[i] or src[u] == dst[i]:
                preds.add(u)
        if fifo:
            mine = [u for u in earlier if conn[u] == conn[i]]
            last = max((step[u] for u in mine), default=None)
            preds |= {u for u in mine if step[u] == last}
        out.append(preds)
    return out


def water_fill(flow_links: dict[int, list], cap: dict) -> dict[int, float]:
    """Max-min fair rates by the bottleneck-link algorithm: the link with the smallest fair
    share (spare capacity / unfrozen flows) fixes its flows at that share; repeat."""
    rate: dict[int, float] = {}
    spare = dict(cap)
    while len(rate) < len(flow_links):
        users: dict = {}
        for f, links in flow_links.items():
            if f not in rate:
                for lk in set(links):
                    users.setdefault(lk, []).append(f)
        share = {lk: spare[lk] / len(fs) for lk, fs in users.items()}
        low = min(share.values())
        for lk, s in share.items():
            if s <= low * (1 + 1e-12):
                for f in users[lk]:
                    if f not in rate:
                        rate[f] = low
                        for other in set(flow_links[f]):
                            spare[other] -= low
    return rate


def first_fit(link_sets: list[set]) -> list[int]:
    """Round of each transfer (in the given order): the first round none of its links is taken."""
    taken: dict = {}
    out = []
    for links in link_sets:
        r = 0
        while any(r in taken.get(lk, ()) for lk in links):
            r += 1
        out.append(r)
        for lk in links:
            taken.setdefault(lk, set()).add(r)
    return out


def reference_rounds(schedule, alpha: float) -> tuple[int, float]:
    """Rounds and time of the round model: first fit per step over the written paths, each
    round lasting chunk / slowest used link + longest path latency + α."""
    links = link_lists(schedule)
    bw, lat = path_bottleneck(schedule), path_latency(schedule)
    rounds, total = 0, 0.0
    for rows in steps_of(schedule).values():
        rnd = np.array(first_fit([set(links[i]) for i in rows]))
        rows_a = np.array(rows)
        for r in range(rnd.max() + 1):
            members = rows_a[rnd == r]
            total += schedule.chunk_bytes / bw[members].min() + lat[members].max() + alpha
        rounds += int(rnd.max()) + 1
    return rounds, total


def reference_flow(
    schedule, alpha: float, synchronous: bool = False, fifo: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) per transfer in the flow model of design §3.5, by a plain event loop:
    a transfer is ready when all its semantic predecessors (`semantic_preds`) are done, sends
    from ready + α at its max-min fair rate and is done one path latency after its last byte."""
    topology = schedule.topology
    links = link_lists(schedule)
    cap = {(lk.src, lk.dst): lk.bandwidth for lk in topology.links}
    lat = path_latency(schedule)
    preds = semantic_preds(schedule, synchronous, fifo)
    n = len(links)
    size = schedule.chunk_bytes
    ready = np.full(n, np.nan)
    done = np.full(n, np.inf)
    remaining = [size] * n
    sent_at: dict[int, float] = {}
    sending: set[int] = set()
    finished: set[int] = set()
    now = 0.0
    eps = 1e-12
    while len(finished) < n:
        for t in range(n):
            if np.isnan(ready[t]) and preds[t] <= finished:
                ready[t] = max((done[u] for u in preds[t]), default=0.0)
        for t in range(n):
            waiting = t not in sending and t not in sent_at and not np.isnan(ready[t])
            if waiting and ready[t] + alpha <= now * (1 + eps) + 1e-300:
                sending.add(t)
        rate = water_fill({t: links[t] for t in sending}, cap) if sending else {}
        nxt = [done[t] for t in sent_at if t not in finished]
        nxt += [ready[t] + alpha for t in range(n) if not np.isnan(ready[t]) and t not in sending]
        nxt = [x for x in nxt if x > now * (1 + eps)]
        nxt += [now + remaining[t] / rate[t] for t in sending]
        t_next = min(nxt)
        for t in sending:
            remaining[t] -= rate[t] * (t_next - now)
        now = t_next
        for t in list(sending):
            if remaining[t] <= 1e-9 * size:
                sending.discard(t)
                sent_at[t] = now
                done[t] = now + lat[t]
        for t in sent_at:
            if t not in finished and done[t] <= now * (1 + eps):
                finished.add(t)
    return ready, done
