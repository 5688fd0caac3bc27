"""The exact optimum of one slot (scipy.optimize.milp / HiGHS), to measure schedulers' ratios.

The slot problem GADGET solves move by move, for any objective of `arsched.cluster.utility`
(each job's slot value v_j(w, b) depends on its own size w and ring rate b only, so the slot's
value is the sum over jobs): choose for each job a size w or pause it; put its w GPUs on servers
(at most G per server); a ring inside one server runs at the intra-server bandwidth, a ring over
several servers at the rate it reserves on the links it crosses. Maximise the summed gain
v_j(w, b) - v_j(0). The sizes are either GADGET's candidates (`free=False`: powers of two up to
the job's bound, and its request) or any count from 1 to the bound (`free=True`), so the ratio
to the free optimum also charges GADGET's choice of candidates.

On a one-level cluster (servers under one non-blocking switch: a star) a ring over several
servers reserves its servers' whole NICs (the reserved model gives the first spanning ring the
whole NIC and nothing to a second), so each NIC carries at most one spanning ring: a compact ILP
over GPUs per server. On a cluster with several switches (small ones: up to MAX_RING_SERVERS
servers) the rings are enumerated instead: a column per job, size, placement (GPUs per server;
the ring visits its servers in index order, as GADGET's do) and ring rate; rows keep one column
per job, at most G GPUs per server and every link's reserved rate (rate x hops crossing it)
within its capacity. Rates are `ring_rates`: the multiples of 1/RATE_LEVELS of the slowest
link's capacity below the ring's rate alone on the network, and that rate; the rings (with their
rates) of the decisions being compared join the columns, so the optimum covers them.

A decision is scored as the `reserved` network mode scores it (rings reserve in commit order),
the model both ILPs share; restart costs are left out (the instances have none). HiGHS stops
after `time_limit` seconds: an `Optimum` then holds the best decision found and HiGHS's upper
bound, and says it is not proven.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from arsched.cluster.cluster import parse_cluster
from arsched.cluster.network import Placement, intra_cap, ring_bandwidth, ring_links
from arsched.cluster.schedulers import get_scheduler
from arsched.cluster.schedulers.base import Decision, SlotState
from arsched.cluster.schedulers.gadget import MarginalAllocator
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import Objective
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError

MAX_RING_SERVERS = 6  # the ring-enumerating ILP's limit (placements grow as (G+1)^servers)
RATE_LEVELS = 8
TIME_LIMIT = 20.0  # s per ILP

Ring = tuple[int, Placement, float]  # job, placement, rate


@dataclass(frozen=True)
class Optimum:
    """The best slot gain HiGHS found and an upper bound on the optimum (equal when `proven`)."""

    gain: float
    bound: float
    proven: bool


def decision_rings(state: SlotState, decision: Decision) -> list[Ring]:
    """Each ring of a decision with the rate the reserved model gives it (commit order)."""
    rates = ring_bandwidth(state.cluster, [p for _, p in decision], "reserved")
    return [(j, p, float(b)) for (j, p), b in zip(decision, rates, strict=True)]


def decision_gain(state: SlotState, decision: Decision) -> float:
    """Summed gain v(w, b) - v(0) of a decision under the state's objective."""
    if not decision:
        return 0.0
    g = _allocator(state)
    rings = decision_rings(state, decision)
    js = np.array([j for j, _, _ in rings])
    w = np.array([sum(k for _, k in p) for _, p, _ in rings])
    v = g.value(js, w, np.array([b for _, _, b in rings]))
    return float(sum(v[k] - g.v0[g.row[j]] for k, j in enumerate(js.tolist())))


def compare(
    state: SlotState, names: Iterable[str], free: bool = False, time_limit: float = TIME_LIMIT
) -> tuple[Optimum, dict[str, float]]:
    """Each named scheduler's slot gain (a fresh scheduler deciding this slot) and the optimum
    over a set of decisions that holds theirs."""
    decisions = {n: get_scheduler(n).decide(state) for n in names}
    rings = [r for d in decisions.values() for r in decision_rings(state, d)]
    gains = {n: decision_gain(state, d) for n, d in decisions.items()}
    return optimum_gain(state, free, rings, time_limit), gains


def optimum_gain(
    state: SlotState, free: bool = False, rings: Iterable[Ring] = (), time_limit: float = TIME_LIMIT
) -> Optimum:
    """The optimum of the slot problem (see the module docstring); `rings` join the columns of
    the ring-enumerating ILP (a star's ILP covers every ring already)."""
    if state.restart is not None and (state.restart[state.active] * state.attained[state.active] > 0).any():
        raise ArschedError("the slot ILP leaves restart costs out; this slot has jobs that would pay one")
    if len(state.cluster.topology.switches) == 1:
        return _star_optimum(state, free, time_limit)
    if state.cluster.num_servers > MAX_RING_SERVERS:
        raise ArschedError(
            f"the slot ILP takes a star (star:n=...) or at most {MAX_RING_SERVERS} servers on other "
            f"topologies; {state.cluster.name} has {state.cluster.num_servers}"
        )
    return _ring_optimum(state, free, list(rings), time_limit)


def sizes(state: SlotState, free: bool) -> list[list[int]]:
    """Each active job's sizes: GADGET's candidates, or (free) every count from 1 to its bound."""
    g = _allocator(state)
    if not free:
        return [sorted({w for w in c if w > 0}) for c in g.cand]
    caps = np.minimum(state.workload.max_workers[state.active], state.cluster.num_gpus)
    return [list(range(1, int(cap) + 1)) for cap in caps]


def ring_rates(state: SlotState, placement: Placement) -> list[float]:
    """The rates a ring may reserve in the ring ILP: multiples of the slowest link's capacity /
    RATE_LEVELS below its rate alone, and that rate (one rate inside a server)."""
    c = state.cluster
    links, mult = ring_links(c, placement)
    alone = intra_cap(c, placement)
    if not len(links):
        return [alone]
    alone = min(alone, float((c.capacity[links] / mult).min()))
    unit = float(c.capacity.min()) / RATE_LEVELS
    return [k * unit for k in range(1, RATE_LEVELS + 1) if k * unit < alone] + [alone]


def _allocator(state: SlotState) -> MarginalAllocator:
    return MarginalAllocator(state, aware=True, completion=False)


def _gain(g: MarginalAllocator, j: int, w: int, b: float) -> float:
    return float(g.value(np.array([j]), np.array([w]), np.array([b]))[0]) - g.v0[g.row[j]]


def _star_optimum(state: SlotState, free: bool, time_limit: float) -> Optimum:
    g = _allocator(state)
    c = state.cluster
    jobs = [int(j) for j in state.active]
    S, G = c.num_servers, c.gpus_per_server
    opts: list[tuple[int, int, bool, float]] = []  # (job row, w, spanning, gain)
    for i, (j, ws) in enumerate(zip(jobs, sizes(state, free), strict=True)):
        for w in ws:
            for span in (False, True):
                if (not span and w > G) or (span and w < 2):
                    continue
                b = g.spread_bw if span else (c.intra_bandwidth if w > 1 else np.inf)
                if (v := _gain(g, j, w, b)) > 0:
                    opts.append((i, w, span, v))
    n, no = len(jobs), len(opts)
    # variables: y (no), x (n*S), z (n*S), u (n*S: job spans and uses server s)
    ny, nx = no, n * S
    nv = ny + 3 * nx
    X, Z, U = ny, ny + nx, ny + 2 * nx
    rows, lo, hi = [], [], []

    def row(entries: dict[int, float], low: float, high: float) -> None:
        r = np.zeros(nv)
        for k, val in entries.items():
            r[k] += val
        rows.append(r)
        lo.append(low)
        hi.append(high)

    for i in range(n):
        mine = [k for k, o in enumerate(opts) if o[0] == i]
        span = [k for k in mine if opts[k][2]]
        row(dict.fromkeys(mine, 1.0), 0, 1)  # at most one option
        # sum of GPUs = chosen size
        row({**{X + i * S + s: 1.0 for s in range(S)}, **{k: -float(opts[k][1]) for k in mine}}, 0, 0)
        for s in range(S):
            row({X + i * S + s: 1.0, Z + i * S + s: -float(G)}, -np.inf, 0)  # x <= G z
            # u >= z + spanning - 1
            row({U + i * S + s: 1.0, Z + i * S + s: -1.0, **dict.fromkeys(span, -1.0)}, -1, np.inf)
        # a non-spanning option keeps the job on one server
        row({**{Z + i * S + s: 1.0 for s in range(S)}, **dict.fromkeys(span, -float(S))}, -np.inf, 1)
    for s in range(S):
        row({X + i * S + s: 1.0 for i in range(n)}, 0, G)  # GPUs per server
        row({U + i * S + s: 1.0 for i in range(n)}, 0, 1)  # one spanning ring per NIC
    cost = np.zeros(nv)
    cost[:ny] = -np.array([o[3] for o in opts])
    upper = np.concatenate([np.ones(ny), np.full(nx, G), np.ones(2 * nx)])
    return _solve(cost, np.array(rows), lo, hi, upper, time_limit)


def _solve(cost: np.ndarray, a, lo, hi, upper: np.ndarray, time_limit: float) -> Optimum:
    if not len(cost) or not cost.any():  # nothing gains: pausing every job is optimal
        return Optimum(0.0, 0.0, True)
    res = milp(
        cost,
        constraints=LinearConstraint(a, lo, hi),
        integrality=np.ones(len(cost)),
        bounds=Bounds(np.zeros(len(cost)), upper),
        options={"disp": False, "time_limit": time_limit},  # HiGHS silent: no banner or log
    )
    if res.status not in (0, 1):
        raise ArschedError(f"the slot ILP did not solve: {res.message}")
    gain = float(-res.fun) if res.x is not None else 0.0  # cut before any decision: pause them all
    if res.status == 0:
        return Optimum(gain, gain, True)
    bound = -res.mip_dual_bound if res.mip_dual_bound is not None else np.inf
    return Optimum(gain, max(float(bound), gain), False)


def _ring_optimum(state: SlotState, free: bool, extra: list[Ring], time_limit: float) -> Optimum:
    c = state.cluster
    S, G = c.num_servers, c.gpus_per_server
    g = _allocator(state)
    by_size: dict[int, list[Placement]] = {}
    for counts in itertools.product(range(G + 1), repeat=S):
        by_size.setdefault(sum(counts), []).append(tuple((s, k) for s, k in enumerate(counts) if k))
    cols: dict[tuple[int, Placement, float], float] = {}  # (job row, placement, rate) -> gain
    for i, (j, ws) in enumerate(zip(state.active.tolist(), sizes(state, free), strict=True)):
        for p in (p for w in ws for p in by_size.get(w, [])):
            for b in ring_rates(state, p):
                cols[i, p, b] = _gain(g, j, sum(k for _, k in p), b)
    for j, p, b in extra:
        cols[g.row[j], p, b] = _gain(g, j, sum(k for _, k in p), b)
    cols = {k: v for k, v in cols.items() if v > 0}
    n, jobs = len(cols), len(state.active)
    a = np.zeros((jobs + S + c.num_links, n))
    for k, (i, p, b) in enumerate(cols):
        a[i, k] = 1.0  # one column per job
        for s, count in p:
            a[jobs + s, k] = count  # GPUs per server
        links, mult = ring_links(c, p)
        a[jobs + S + links, k] = mult * b  # reserved rate per link
    hi = np.concatenate([np.ones(jobs), np.full(S, G), c.capacity * (1 + 1e-9)])
    return _solve(-np.array(list(cols.values())), a, np.zeros(len(hi)), hi, np.ones(n), time_limit)


def random_instance(seed: int, objective: str = "jct", leafspine: bool = False) -> SlotState:
    """A random small slot: 3-6 jobs (up to 4 GPUs asked, 8 allowed) with 10-100 % of their work
    left, on 2-4 servers of 4 GPUs under one switch, or (leafspine) on 2 leaves of 1-2 servers of
    2 GPUs each under 1-2 spines (one spine: a leaf's uplink is shared by its two servers; the
    ring-enumerating ILP slows down fast with more GPUs per server)."""
    rng = np.random.default_rng(seed)
    if leafspine:
        spec = f"leafspine:leaves=2,spines={rng.integers(1, 3)},servers_per_leaf={rng.integers(1, 3)},gpus=2"
    else:
        spec = f"star:n={rng.integers(2, 5)},gpus=4"
    c = parse_cluster(spec)
    wl = synthetic(int(rng.integers(3, 7)), seed=seed, interval=5, median=300, elastic=2)
    wl = wl.__class__(wl.ids, wl.models, wl.arrival, wl.tau, wl.grad_bytes, wl.work,
                      np.minimum(wl.gpus, 4), np.minimum(wl.max_workers, 8), wl.name)  # fmt: skip
    left = wl.work * rng.uniform(0.1, 1.0, len(wl))
    return SlotState(float(wl.arrival.max()), 30.0, np.arange(len(wl)), left, np.zeros(len(wl)), {}, wl, c,
                     Objective(objective), DEFAULT_ALPHA, seed)  # fmt: skip
