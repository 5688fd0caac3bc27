"""Independent references for the simulator tests, written from design §3.3/§3.5 in plain Python
(no arsched.sim): the literal dependency rules, per-transfer link lists, progressive filling and a
small event-driven max-min flow simulator. Slow and simple on purpose."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

from arsched.collective import Schedule
from arsched.topology import Topology

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def link_ids(topology: Topology) -> dict[tuple[str, str], int]:
    """(src, dst) -> link number, in the topology's link order (the compiled order)."""
    return {(lk.src, lk.dst): i for i, lk in enumerate(topology.links)}


def transfer_links(schedule: Schedule) -> list[list[int]]:
    """The directed links of every transfer's written path."""
    ids = link_ids(schedule.topology)
    return [[ids[(a, b)] for a, b in pairwise(t.path)] for t in schedule]


def path_latency(schedule: Schedule) -> list[float]:
    lat = [lk.latency for lk in schedule.topology.links]
    return [sum(lat[x] for x in links) for links in transfer_links(schedule)]


def path_bottleneck(schedule: Schedule) -> list[float]:
    cap = [lk.bandwidth for lk in schedule.topology.links]
    return [min(cap[x] for x in links) for links in transfer_links(schedule)]


def reference_deps(schedule: Schedule, synchronous: bool = False) -> list[set[int]]:
    """Design §3.3 literally: a transfer waits for every earlier-step transfer that writes its
    source buffer, or reads or writes its destination buffer; with `synchronous`, for every
    transfer of an earlier step."""
    rows = list(schedule)
    writers: dict[tuple[str, int], list[int]] = {}
    readers: dict[tuple[str, int], list[int]] = {}
    for i, t in enumerate(rows):
        writers.setdefault((t.dst, t.chunk), []).append(i)
        readers.setdefault((t.src, t.chunk), []).append(i)
    out = []
    for t in rows:
        cand = writers.get((t.src, t.chunk), []) + writers.get((t.dst, t.chunk), [])
        cand += readers.get((t.dst, t.chunk), [])
        deps = {u for u in cand if rows[u].step < t.step}
        if synchronous:
            deps |= {u for u, r in enumerate(rows) if r.step < t.step}
        out.append(deps)
    return out


def maxmin_reference(flow_links: Sequence[Sequence[int]], capacity: Sequence[float]) -> list[float]:
    """Progressive filling: raise every unfrozen flow together until a link fills, freeze the
    flows through full links, repeat."""
    rate = [0.0] * len(flow_links)
    active = [i for i, f in enumerate(flow_links) if f]
    rem = {lk: float(capacity[lk]) for f in flow_links for lk in f}
    while active:
        count = Counter(lk for i in active for lk in flow_links[i])
        delta = min(rem[lk] / c for lk, c in count.items())
        for i in active:
            rate[i] += delta
        for lk, c in count.items():
            rem[lk] -= delta * c
        full = {lk for lk in count if rem[lk] <= 1e-9 * capacity[lk]}
        active = [i for i in active if not full.intersection(flow_links[i])]
    return rate


def reference_flow(
    schedule: Schedule, alpha: float, synchronous: bool = False
) -> tuple[list[float], list[float]]:
    """(ready, done) of every transfer in the flow model: ready when every dependency is done,
    sending from ready + alpha at its max-min rate, done one path latency after the last byte."""
    n = len(schedule)
    deps = reference_deps(schedule, synchronous)
    dependents: list[list[int]] = [[] for _ in range(n)]
    for t, ds in enumerate(deps):
        for d in ds:
            dependents[d].append(t)
    links = transfer_links(schedule)
    lat = path_latency(schedule)
    cap = [lk.bandwidth for lk in schedule.topology.links]
    chunk = schedule.chunk_bytes
    left = [len(d) for d in deps]
    ready = [0.0] * n
    done = [float("nan")] * n
    pending = {t: alpha for t in range(n) if not deps[t]}  # transfer -> when sending starts
    sending: dict[int, float] = {}  # transfer -> bytes left
    flying: dict[int, float] = {}  # transfer -> when it is done
    rates: dict[int, float] = {}
    now = 0.0
    while pending or sending or flying:
        cands = list(pending.values()) + list(flying.values())
        cands += [now + sending[t] / rates[t] for t in sending]
        nxt = min(cands)
        for t in sending:
            sending[t] -= rates[t] * (nxt - now)
        now = nxt
        tol = 1e-9 * max(now, 1e-300)
        for t in [t for t, b in sending.items() if b <= 1e-9 * chunk]:
            del sending[t]
            flying[t] = now + lat[t]
        while True:
            fin = [t for t, d in flying.items() if d <= now + tol]
            if not fin:
                break
            for t in fin:
                done[t] = flying.pop(t)
            for t in fin:
                for u in dependents[t]:
                    left[u] -= 1
                    if left[u] == 0:
                        ready[u] = max(done[d] for d in deps[u])
                        pending[u] = ready[u] + alpha
        for t in [t for t, s in pending.items() if s <= now + tol]:
            del pending[t]
            sending[t] = float(chunk)
        ids = list(sending)
        rates = dict(zip(ids, maxmin_reference([links[t] for t in ids], cap), strict=True))
    return ready, done


def step_link_loads(schedule: Schedule) -> dict[int, int]:
    """The largest number of a step's transfers sharing one directed link, per step."""
    loads: dict[int, Counter] = {}
    for t, links in zip(schedule, transfer_links(schedule), strict=True):
        loads.setdefault(t.step, Counter()).update(links)
    return {step: max(c.values()) for step, c in loads.items()}


def disjoint_steps(schedule: Schedule) -> bool:
    """True if no directed link carries two transfers of the same step."""
    return all(v == 1 for v in step_link_loads(schedule).values())


def uniform_bandwidth(topology: Topology) -> bool:
    return len({lk.bandwidth for lk in topology.links}) == 1
