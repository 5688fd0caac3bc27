"""The exact optimum of one slot (scipy.optimize.milp / HiGHS), to measure GADGET's ratio.

The slot problem GADGET solves greedily, on a cluster whose servers hang off one non-blocking
switch (a star): choose for each job a size w among its candidates (powers of two up to its
bound, and its request) or pause it; put its w GPUs on servers (at most G per server); a ring
inside one server runs at the intra-server bandwidth, a ring over several servers reserves its
servers' whole NIC (on a star, the reserved model gives the first spanning ring the whole NIC and
nothing to a second), so each NIC carries at most one spanning ring. Maximise the summed gain
v_j(w, b) - v_j(0) of the objective's slot values.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from arsched.cluster.cluster import parse_cluster
from arsched.cluster.schedulers.base import SlotState
from arsched.cluster.schedulers.greedy import _Greedy
from arsched.cluster.synthetic import synthetic
from arsched.cluster.utility import Objective
from arsched.errors import ArschedError


def _check_star(state: SlotState) -> None:
    topo = state.cluster.topology
    if len(topo.switches) != 1:
        raise ArschedError("the slot ILP models a star (one switch); build the cluster with star:n=...")


def gadget_gain(state: SlotState) -> float:
    """Summed gain v(w, b) - v(0) of GADGET's decision for the slot."""
    g = _Greedy(state, aware=True, completion=False)
    g.run()
    return float(sum(g.v[j] - g.v0[g.row[j]] for j in g.v))


def optimum_gain(state: SlotState) -> float:
    """The exact optimum of the same slot problem."""
    _check_star(state)
    g = _Greedy(state, aware=True, completion=False)
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
    res = milp(
        cost,
        constraints=LinearConstraint(np.array(rows), lo, hi),
        integrality=np.ones(nv),
        bounds=Bounds(np.zeros(nv), upper),
    )
    if res.status != 0:
        raise ArschedError(f"the slot ILP did not solve: {res.message}")
    return float(-res.fun)


def random_instance(seed: int, objective: str = "jct") -> SlotState:
    """A random small slot: 3-6 jobs (up to 4 GPUs asked, 8 allowed) with 10-100 % of their work
    left, on 2-4 servers of 4 GPUs under one switch."""
    rng = np.random.default_rng(seed)
    c = parse_cluster(f"star:n={rng.integers(2, 5)},gpus=4")
    wl = synthetic(int(rng.integers(3, 7)), seed=seed, interval=5, median=300)
    wl = wl.__class__(wl.ids, wl.models, wl.arrival, wl.tau, wl.grad_bytes, wl.work,
                      np.minimum(wl.gpus, 4), np.minimum(wl.max_workers, 8), wl.name)  # fmt: skip
    left = wl.work * rng.uniform(0.1, 1.0, len(wl))
    return SlotState(float(wl.arrival.max()), 30.0, np.arange(len(wl)), left, np.zeros(len(wl)), {}, wl, c,
                     Objective(objective), 5e-6, seed)  # fmt: skip
