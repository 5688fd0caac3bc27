"""The exact optimum of one slot (scipy.optimize.milp / HiGHS), to measure GADGET's ratio.

The slot problem GADGET solves move by move, on a cluster whose servers hang off one non-blocking
switch (a star): choose for each job a size w among its candidates (powers of two up to its
bound, and its request) or pause it; put its w GPUs on servers (at most G per server); a ring
inside one server runs at the intra-server bandwidth, a ring over several servers reserves its
servers' whole NIC (on a star, the reserved model gives the first spanning ring the whole NIC and
nothing to a second), so each NIC carries at most one spanning ring. Maximise the summed gain
v_j(w, b) - v_j(0) of the objective's slot values.

On a cluster with several switches (small ones: up to MAX_RING_SERVERS servers) the rings are
enumerated instead: a column per job, size, placement (GPUs per server; the ring visits its
servers in index order, as GADGET's do) and ring rate; rows keep one column per job, at most G
GPUs per server and every link's reserved rate (rate x hops crossing it) within its capacity.
Rates are the multiples of 1/RATE_LEVELS of the slowest link's capacity up to the ring's rate
alone on the network, plus that rate and the rate GADGET reserved for its own ring, so the
optimum is exact over those rates and GADGET's decision is always one of its solutions.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from arsched.cluster.cluster import parse_cluster
from arsched.cluster.network import intra_cap, ring_links
from arsched.cluster.schedulers.base import SlotState
from arsched.cluster.schedulers.gadget import MarginalAllocator
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import Objective
from arsched.defaults import DEFAULT_ALPHA
from arsched.errors import ArschedError

MAX_RING_SERVERS = 6  # the ring-enumerating ILP's limit (placements grow as (G+1)^servers)
RATE_LEVELS = 8


def gadget_gain(state: SlotState) -> float:
    """Summed gain v(w, b) - v(0) of GADGET's decision for the slot."""
    g = MarginalAllocator(state, aware=True, completion=False)
    g.run()
    return float(sum(g.v[j] - g.v0[g.row[j]] for j in g.v))


def optimum_gain(state: SlotState) -> float:
    """The exact optimum of the same slot problem (see the module docstring)."""
    if len(state.cluster.topology.switches) == 1:
        return _star_optimum(state)
    if state.cluster.num_servers > MAX_RING_SERVERS:
        raise ArschedError(
            f"the slot ILP takes a star (star:n=...) or at most {MAX_RING_SERVERS} servers on other "
            f"topologies; {state.cluster.name} has {state.cluster.num_servers}"
        )
    return _ring_optimum(state)


def _star_optimum(state: SlotState) -> float:
    g = MarginalAllocator(state, aware=True, completion=False)
    c = state.cluster
    jobs = [int(j) for j in state.active]
    S, G = c.num_servers, c.gpus_per_server
    opts: list[tuple[int, int, bool, float]] = []  # (job row, w, spanning, gain)
    for i, j in enumerate(jobs):
        sizes = sorted({w for w in g.cand[i] if w > 0})
        for w in sizes:
            for span in (False, True):
                if (not span and w > G) or (span and w < 2):
                    continue
                b = g.spread_bw if span else (c.intra_bandwidth if w > 1 else np.inf)
                v = float(g.value(np.array([j]), np.array([w]), np.array([b]))[0]) - g.v0[i]
                if v > 0:
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
    return _solve(cost, np.array(rows), lo, hi, upper)


def _solve(cost: np.ndarray, a, lo, hi, upper: np.ndarray) -> float:
    res = milp(
        cost,
        constraints=LinearConstraint(a, lo, hi),
        integrality=np.ones(len(cost)),
        bounds=Bounds(np.zeros(len(cost)), upper),
        options={"disp": False},  # HiGHS silent: no banner or log in any command's output
    )
    if res.status != 0:
        raise ArschedError(f"the slot ILP did not solve: {res.message}")
    return float(-res.fun)


def _ring_optimum(state: SlotState) -> float:
    c = state.cluster
    S, G = c.num_servers, c.gpus_per_server
    g = MarginalAllocator(state, aware=True, completion=False)
    mine = MarginalAllocator(state, aware=True, completion=False)
    mine.run()  # GADGET's own rings and rates join the columns
    unit = float(c.capacity.min()) / RATE_LEVELS
    by_size: dict[int, list[tuple[int, ...]]] = {}
    for counts in itertools.product(range(G + 1), repeat=S):
        by_size.setdefault(sum(counts), []).append(counts)
    jobs = [int(j) for j in state.active]
    cols: list[tuple[int, tuple[int, ...], np.ndarray, np.ndarray, float]] = []  # job, counts, links, load
    gains: list[float] = []
    for i, j in enumerate(jobs):
        for w in sorted({w for w in g.cand[i] if w > 0}):
            for counts in by_size.get(w, []):
                p = tuple((s, k) for s, k in enumerate(counts) if k)
                links, mult = ring_links(c, p)
                alone = intra_cap(c, p)
                rates = {alone}
                if len(links):
                    alone = min(alone, float((c.capacity[links] / mult).min()))
                    rates = {alone} | {k * unit for k in range(1, RATE_LEVELS + 1) if k * unit < alone}
                if mine.place.get(j) == p:
                    rates.add(mine.resv[j][2])
                for b in sorted(rates):
                    v = float(g.value(np.array([j]), np.array([w]), np.array([b]))[0]) - g.v0[i]
                    if v > 0:
                        cols.append((i, counts, links, mult * (b if len(links) else 0.0)))
                        gains.append(v)
    n = len(cols)
    a = np.zeros((len(jobs) + S + c.num_links, n))
    for k, (i, counts, links, load) in enumerate(cols):
        a[i, k] = 1.0  # one column per job
        a[len(jobs) : len(jobs) + S, k] = counts  # GPUs per server
        a[len(jobs) + S + links, k] = load  # reserved rate per link
    hi = np.concatenate([np.ones(len(jobs)), np.full(S, G), c.capacity * (1 + 1e-9)])
    return _solve(-np.array(gains), a, np.zeros(len(hi)), hi, np.ones(n))


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
