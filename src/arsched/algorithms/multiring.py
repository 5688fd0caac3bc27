"""Multi-ring AllReduce: several rings at once, each carrying a share of the data in proportion
to the rate the network can give it.

A single ring sends on one outgoing link of every server and runs at the speed of its slowest
hop: on BCube and tori it leaves the other ports idle, on a directed or asymmetric network it
may run on the slow direction. Rings over different links add their rates. The ring sets:
snake rings (BCube, two-way tori), staircase cycles (tori) and searched directed Hamiltonian
cycles (networks where some link lacks a reverse link of the same bandwidth), whose orders
`arsched.algorithms.ring_orders` finds (it says how, and cites the sources); two opposite rings
around the low-contention ring order (`ring_order`); and one ring.

Shares. Ring r at rate x_r moves x_r bytes/s across each of its hops, so it loads every
directed link l by a_rl·x_r, a_rl the number of its hops whose default route crosses l. The
rates solve the linear program

    maximise Σ_r x_r  subject to  Σ_r a_rl·x_r ≤ c_l for every link l (capacity c_l),  x ≥ 0,

and ring r takes the share x_r / Σ x of the data, so that all rings finish together, after
2(N − 1)/N · M / Σ x for M bytes over N ranks. The shares are rounded to whole units of N
chunks (largest remainder, `deal`), over the fewest units that lose (almost) nothing to the
rounding, or over the units that `chunks` gives.

Selection. The equal-share sets (snake rings on BCube and on two-way tori of one bandwidth per
direction, two opposite rings) and one ring are timed in the flow model (α = 5 µs) up to
`FLOW_SELECT_LIMIT` transfers and in the round model above, and the fastest is kept. The
LP-weighted sets (each set above, and all their rings together) that the links' measure finds
faster than every equal-share set are then timed against it in the flow model (the round model
charges every round its slowest link, which misjudges unequal shares) and replace it where
faster by more than `TIE`. So nothing does worse than one ring or equal shares by that
measure, and where equal shares already balance the links they are kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from arsched.algorithms.common import chain_floor, check_nbytes, check_ranks, chunk_multiple, ring_order
from arsched.algorithms.packing.directed import symmetric
from arsched.algorithms.packing.pipeline import deal
from arsched.algorithms.registry import register
from arsched.algorithms.ring import add_ring
from arsched.algorithms.ring_orders import (
    MAX_RINGS,
    searched_orders,
    snake_orders,
    staircase_orders,
    unique_orders,
)
from arsched.algorithms.routes import route
from arsched.collective.schedule import Schedule, ScheduleBuilder
from arsched.limits import LimitError
from arsched.topology.core import Topology

FLOW_SELECT_LIMIT = 20_000
"""Equal-share candidates with at most this many transfers are timed in the flow model, larger
ones in the round model."""

TIE = 1e-3
"""A weighted ring set replaces the best equal-share one only when this much faster."""

MAX_WEIGHTED = 2
"""Weighted sets simulated: those the links' measure (`_seconds_per_byte`) finds fastest, the
second only where both together stay within the first one's transfer budget (`_budget`)."""

WEIGHTED_TRANSFERS = 100_000
"""The transfers (2(N − 1)·N a unit of N chunks) a weighted set may have by default where every
hop is one link or no link carries two hops; elsewhere its flow simulation costs more and it
may have as many as the largest equal-share candidate (`_budget`)."""

MAX_UNITS = 64
"""The most units of N chunks a weighted set is rounded to by default."""

ROUNDING_LOSS = 2e-3
"""The default unit count is the smallest whose rounded shares are within this of the best
rounding's time."""

MAX_KEPT = 8
"""The most rings the LP keeps of the `MAX_RINGS` it weighs (fewer where the transfer budget
allows fewer units): where more have a rate, the LP is solved again over the fastest."""


def _floor(topology: Topology, ranks: tuple[str, ...], nbytes: float, alpha: float) -> float:
    """Every ring's chunks are chained around all N ranks twice: 2(N − 1) transfers of at least α
    (their sizes depend on the shares, so only α counts)."""
    return chain_floor(topology, ranks, 2 * (len(ranks) - 1), 0.0, alpha)


@register(
    "multi-ring",
    "several rings over disjoint ports/dimensions, their shares weighted by an LP",
    floor=_floor,
)
def multi_ring(
    topology: Topology, ranks: Sequence[str] | None = None, nbytes: float = 1e8, chunks: int | None = None
) -> Schedule:
    """Multi-ring AllReduce: the fastest of several ring sets, with equal or LP-weighted shares.

    Candidates (module docstring): snake rings per dimension (BCube, tori), staircase cycles
    (tori), directed Hamiltonian cycles (directed or asymmetric networks), two opposite rings
    and one ring. With `chunks` given (a multiple of the rank count), the equal-share sets whose
    ring count divides it and the weighted sets rounded to it are considered. The kept
    schedule's `meta['params']` holds 'chunks', 'rings' and, for a weighted set, 'shares'
    (chunks per ring).
    """
    from arsched.sim import simulate_flow, simulate_rounds

    rs = check_ranks(topology, ranks, "multi-ring")
    nbytes = check_nbytes(nbytes, "multi-ring")
    n = len(rs)
    index = {r: i for i, r in enumerate(rs)}
    one = [index[r] for r in ring_order(topology, rs)]
    opposite = [one, one[::-1]] if n > 2 else None
    equal = [c for c in (snake_orders(topology, rs, asymmetric=False), opposite, [one]) if c]
    if chunks is not None:
        chunk_multiple(chunks, n, "multi-ring", ranks=n)
        equal = [c for c in equal if chunks % (len(c) * n) == 0] or equal[-1:]
    built = [_build(topology, rs, nbytes, c, chunks) for c in equal]
    sims = [simulate_flow(s) if len(s) <= FLOW_SELECT_LIMIT else simulate_rounds(s) for s in built]
    first = min(range(len(built)), key=lambda i: sims[i].time_s)
    best = built[first]

    fastest = min(_seconds_per_byte(np.ones(len(c)), *_loads(topology, rs, c)) for c in equal)
    most = max(len(s) for s in built)
    weighted = sorted(
        (w for w in _weighted_sets(topology, rs, opposite, one, chunks, most) if w[0] < fastest * (1 - TIE)),
        key=lambda w: (w[0], sum(w[2])),
    )
    if not weighted:
        return best
    best_time = sims[first].time_s if sims[first].model == "flow" else simulate_flow(best).time_s
    allowed, simulated = weighted[0][3], 0
    for _, orders, units, _ in weighted[:MAX_WEIGHTED]:
        if simulated and simulated + 2 * (n - 1) * n * sum(units) > allowed:
            break
        try:
            s = _build_shares(topology, rs, nbytes, orders, units)
        except LimitError:
            if chunks is not None:
                raise
            continue
        simulated += len(s)
        t = simulate_flow(s).time_s
        if t < best_time * (1 - TIE):
            best, best_time = s, t
    return best


def _weighted_sets(
    topology: Topology,
    rs: tuple[str, ...],
    opposite: list[list[int]] | None,
    one: list[int],
    chunks: int | None,
    most: int,
) -> list[tuple[float, list[list[int]], list[int], int]]:
    """(seconds per byte of the slowest ring, ring orders, units of N chunks per ring, transfer
    budget) of every LP-weighted ring set: snake rings, staircase cycles, two opposite rings,
    searched cycles (directed or asymmetric networks) and all of these together, rings without
    a unit left out. The budget (`_budget`) bounds the units; `most` is the largest
    equal-share candidate's transfer count."""
    n = len(rs)
    sets = [c for c in (snake_orders(topology, rs), staircase_orders(topology, rs), opposite) if c]
    if not symmetric(topology):
        sets.append(unique_orders([*searched_orders(topology, rs), one, one[::-1]]))
    sets.append(unique_orders([o for c in sets for o in c]))
    out = []
    seen: set[frozenset[tuple[int, ...]]] = set()
    for orders in sets:
        key = frozenset(map(tuple, orders))
        if not orders or key in seen:
            continue
        seen.add(key)
        orders = orders[:MAX_RINGS]
        load, cap = _loads(topology, rs, orders)
        direct = load.sum(axis=1) <= n  # rings whose every hop is one link
        parts = [np.arange(len(orders))]
        if direct.any() and not direct.all():
            parts.append(np.flatnonzero(direct))  # cheaper to simulate, so rounded finer
        for part in parts:
            weighed = _weigh([orders[i] for i in part], load[part], cap, n, chunks, most)
            if weighed:
                out.append(weighed)
    return out


def _weigh(
    orders: list[list[int]], load: np.ndarray, cap: np.ndarray, n: int, chunks: int | None, most: int
) -> tuple[float, list[list[int]], list[int], int] | None:
    """The LP-weighted set of rings `orders` (loads `load` on links of capacities `cap`) as
    (seconds per byte of the slowest ring, orders, units, transfer budget), None where no ring
    gets a unit."""
    x = _rates(load, cap)
    budget = _budget(load[x > 0], n, most)
    top = min(MAX_KEPT, MAX_UNITS, budget // (2 * (n - 1) * n))
    if np.count_nonzero(x) > top > 0:
        keep = np.sort(np.argsort(-x, kind="stable")[:top])
        orders, load = [orders[i] for i in keep], load[keep]
        x = _rates(load, cap)
    units = _units(x, load, cap, n, chunks, budget)
    if not units.any():
        return None
    keep = np.flatnonzero(units)
    return _seconds_per_byte(units, load, cap), [orders[i] for i in keep], units[keep].tolist(), budget


def _budget(load: np.ndarray, n: int, most: int) -> int:
    """The most transfers for rings of loads `load` over n ranks: `WEIGHTED_TRANSFERS` where
    every hop is one link or no link carries two hops, as then their flow simulation is cheap;
    else (routes that cross make it costly) those of the largest equal-share candidate (`most`)
    or `FLOW_SELECT_LIMIT`."""
    cheap = (load.sum(axis=1) <= n).all() or load.sum(axis=0).max() <= 1
    return WEIGHTED_TRANSFERS if cheap else max(FLOW_SELECT_LIMIT, most)


def _loads(
    topology: Topology, ranks: tuple[str, ...], orders: list[list[int]]
) -> tuple[np.ndarray, np.ndarray]:
    """(a, c): every ring's load a (rings × used links: how many of its hops' default routes
    cross the link) and the used links' capacities c."""
    n = len(ranks)
    src = np.concatenate([np.asarray(o) for o in orders])
    dst = np.concatenate([np.roll(o, -1) for o in orders])
    routes = route(topology, ranks, src, dst, spread=False)
    hop = sp.csr_array(
        (np.ones(len(src)), (np.repeat(np.arange(len(orders)), n), routes.index(src, dst, n))),
        shape=(len(orders), len(routes.src)),
    )
    load = (hop @ routes.link_matrix(topology.compiled.num_links)).toarray()
    used = np.flatnonzero(load.any(axis=0))
    return load[:, used], topology.compiled.capacity[used]


def _rates(load: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The LP's ring rates (bytes/s) for rings of loads `load` on links of capacities `cap`."""
    scale = float(cap.max())
    res = linprog(-np.ones(len(load)), A_ub=load.T, b_ub=cap / scale, bounds=(0, None), method="highs")
    x = res.x * scale if res.status == 0 else np.full(len(load), float(cap.min()))
    return np.maximum(x, 0.0)


def _seconds_per_byte(units: np.ndarray, load: np.ndarray, cap: np.ndarray) -> float:
    """The slowest ring's time per byte of its hops when ring i takes the share units[i] / Σ units:
    the most loaded link's bytes / capacity."""
    return float(((units / units.sum()) @ load / cap).max())


def _units(
    x: np.ndarray, load: np.ndarray, cap: np.ndarray, n: int, chunks: int | None, budget: int
) -> np.ndarray:
    """Units of N chunks per ring (N = `n` ranks) for LP rates x: rounded (`deal`) to chunks / N
    units, or by default to the fewest units (at most `MAX_UNITS`, and `budget` transfers)
    within `ROUNDING_LOSS` of the best rounding's time (the slowest ring's)."""
    live = np.flatnonzero(x > x.sum() * 1e-9)
    out = np.zeros(len(x), dtype=np.int64)
    if not len(live):
        return out
    if chunks is not None:
        out[live] = deal(x[live], chunks // n)
        return out
    top = min(MAX_UNITS, budget // (2 * (n - 1) * n))
    if top < 1:
        return out
    counts = [deal(x[live], u) for u in range(min(len(live), top), top + 1)]
    times = np.array([_seconds_per_byte(c, load[live], cap) for c in counts])
    out[live] = counts[int(np.flatnonzero(times <= times.min() * (1 + ROUNDING_LOSS))[0])]
    return out


def _build(
    topology: Topology, rs: tuple[str, ...], nbytes: float, orders: list[list[int]], chunks: int | None
) -> Schedule:
    """Rings `orders` with equal shares of `chunks` (default: a chunk per rank and ring)."""
    n = len(rs)
    chunks = chunk_multiple(chunks, len(orders) * n, "multi-ring", ranks=n)
    per = chunks // (len(orders) * n)
    b = ScheduleBuilder(
        topology, rs, nbytes, chunks, "multi-ring", {"params": {"chunks": chunks, "rings": len(orders)}}
    )
    for i, order in enumerate(orders):
        add_ring(b, np.array(order), i * n * per, per)
    return b.build()


def _build_shares(
    topology: Topology, rs: tuple[str, ...], nbytes: float, orders: list[list[int]], units: list[int]
) -> Schedule:
    """Rings `orders`, ring i carrying units[i]·N chunks."""
    n = len(rs)
    chunks = chunk_multiple(n * sum(units), n, "multi-ring", ranks=n)
    params = {"chunks": chunks, "rings": len(orders), "shares": [u * n for u in units]}
    b = ScheduleBuilder(topology, rs, nbytes, chunks, "multi-ring", {"params": params})
    first = 0
    for order, u in zip(orders, units, strict=True):
        add_ring(b, np.array(order), first, u)
        first += u * n
    return b.build()
