"""Ring orders for multi-ring AllReduce: Hamiltonian cycles over the ranks (as rank indices) whose
hops use different links, so that rings over them add their rates.

- Snake rings (`snake_orders`; BCube and two-way tori built by arsched, all servers): ring l
  visits the servers in a reflected (snake) mixed-radix Gray order (`snake`) whose fastest
  digit is dimension l, so almost every hop of ring l uses level-l (BCube) or dimension-l
  (torus) links; on a torus both ways.
- Staircase cycles (`staircase_orders`; tori built by arsched, one-way ones included, all
  servers): Hamiltonian cycles that only move +. On an a × b torus server (x, y) steps in y
  where (x + y) mod gcd(a, b) lies in a set D, else in x; both predecessors of a server lie on
  the previous diagonal and step alike, so every server has one predecessor, and for some D
  the steps form one cycle (Trotter and Erdős, "When the Cartesian product of directed cycles
  is Hamiltonian", J. Graph Theory 2, 1978, say for which a and b). Where D and its complement
  both do, the two cycles split the + links between them. With more dimensions the first one
  and a staircase cycle of the others span such a two-dimensional torus. On a two-way torus
  the cycles' reverses take the − links.
- Searched cycles (`searched_orders`; for networks where some link lacks a reverse link of the
  same bandwidth): directed Hamiltonian cycles over the ranks on short pairs, found by a seeded
  randomised depth-first search with a fixed budget of moves, on the fastest pairs first, taken
  arc-disjoint greedily, and their reverses where those are short pairs too.

`arsched.algorithms.multiring` weighs these sets and keeps the fastest.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from itertools import islice, product

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from arsched.algorithms.routes import route
from arsched.topology.core import Topology

MAX_RINGS = 32
"""The most orders a set holds (`staircase_orders`, `searched_orders`), and so the most rings
multi-ring weighs with one LP."""

SEARCH_MOVES = 100_000
"""The cycle search's budget of depth-first moves over all its restarts (a few tenths of a
second); it returns the cycles found by then."""

RESTARTS = 6
"""Randomised restarts of the greedy arc-disjoint cycle search, per set of pairs."""

NEIGHBOURS = 16
"""Out-neighbours per rank (the nearest) that the cycle search may step to, where these still
connect all ranks."""

MAX_SEARCH_RANKS = 1024
"""No cycle search over more ranks (the pair distances are an N × N matrix)."""

STAIRCASE_CHECKS = 1_000
"""Staircase rules tried (each a permutation of the servers tested for being one cycle)."""

_BCUBE = re.compile(r"bcube\((\d+),(\d+)\)")
_TORUS = re.compile(r"torus\(([\dx]+)(?:,(oneway|reverse=[^)]*))?\)")


def snake_orders(
    topology: Topology, ranks: tuple[str, ...], *, asymmetric: bool = True
) -> list[list[int]] | None:
    """Snake rings (as server indices) for BCube and two-way tori built by arsched (all servers),
    else None; with `asymmetric` false, not on tori whose − links have a bandwidth of their own
    (`reverse=`), where rings with equal shares would wait on the slow direction."""
    if ranks != topology.servers:
        return None
    m = _BCUBE.fullmatch(topology.name)
    if m:
        n, k = int(m[1]), int(m[2])
        return [snake([n] * (k + 1), level) for level in range(k + 1)]
    m = _TORUS.fullmatch(topology.name)
    if m and m[2] != "oneway" and (asymmetric or not m[2]):
        dims = [int(d) for d in m[1].split("x")][::-1]  # row-major: the last dimension is digit 0
        orders = []
        for d in range(len(dims)):
            if dims[d] > 1:
                fwd = snake(dims, d)
                orders += [fwd, fwd[::-1]]
        return orders
    return None


def staircase_orders(topology: Topology, ranks: tuple[str, ...]) -> list[list[int]] | None:
    """Staircase Hamiltonian cycles (as server indices) of a torus built by arsched (all
    servers) that only move + (`_plus_cycles`); on a two-way torus with their reverses, which
    move −. None where none is found."""
    m = _TORUS.fullmatch(topology.name)
    if not m or ranks != topology.servers:
        return None
    dims = [int(d) for d in m[1].split("x")]
    if sum(d > 1 for d in dims) < 2:
        return None
    orders = [_one_cycle(nxt) for nxt in _plus_cycles(dims)]
    if not orders:
        return None
    if m[2] == "oneway":
        return orders
    return orders + [c[:1] + c[1:][::-1] for c in orders]


def searched_orders(topology: Topology, ranks: tuple[str, ...]) -> list[list[int]]:
    """Directed Hamiltonian cycles over the ranks on short pairs, fastest pairs first, and the
    reverses of those that are short pairs too: at most `MAX_RINGS`, found within
    `SEARCH_MOVES` moves (`_fast_cycles`), fewer or none when the budget runs out first. Short
    pairs are those at most h hops apart, h the fewest at which they connect all ranks both ways
    (`_short_pairs`), or one hop more where no cycle was found at h."""
    n = len(ranks)
    if n < 3 or n > MAX_SEARCH_RANKS:
        return []
    hops = topology.router.hop_matrix(ranks).astype(np.float64)
    hops[hops <= 0] = np.inf  # the diagonal and unreachable pairs
    reach = np.unique(hops[np.isfinite(hops)])
    least = next(i for i, h in enumerate(reach) if _connected(n, *np.nonzero(hops <= h)))
    budget = SEARCH_MOVES
    cycles: list[list[int]] = []
    short: set[tuple[int, int]] = set()
    for h in reach[least : least + 2]:
        pairs = _short_pairs(topology, ranks, hops, h)
        if pairs is None:
            break
        cycles, spent = _fast_cycles(n, *pairs, budget)
        budget -= spent
        short = set(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))
        if cycles:
            break
    for c in list(cycles):
        back = c[:1] + c[1:][::-1]
        if all((u, v) in short for u, v in zip(back, back[1:] + back[:1], strict=True)):
            cycles.append(back)
    return unique_orders(cycles)[:MAX_RINGS]


def snake(radices: Sequence[int], fastest: int) -> list[int]:
    """Row-major indices (digit 0 least significant) in reflected Gray order, `fastest` first."""
    order = [fastest] + [d for d in range(len(radices)) if d != fastest]
    seq: list[tuple[int, ...]] = [()]
    for d in order:  # grow from the fastest digit outwards
        grown = []
        for v in range(radices[d]):
            inner = seq if v % 2 == 0 else seq[::-1]
            grown += [(*prefix, v) for prefix in inner]
        seq = grown
    weights = np.cumprod([1, *radices[:-1]])
    return [int(sum(digits[order.index(d)] * weights[d] for d in range(len(radices)))) for digits in seq]


def unique_orders(orders: list[list[int]]) -> list[list[int]]:
    """The orders without repeats, in their first order."""
    return [list(o) for o in dict.fromkeys(tuple(o) for o in orders)]


def _plus_cycles(dims: list[int]) -> list[np.ndarray]:
    """Successor arrays (over the row-major indices of a torus of sizes `dims`) of Hamiltonian
    cycles that only move +. One dimension of size > 1 is its ring; with more, the first such
    dimension X and a cycle H of the others (found the same way, the first two) span a
    two-dimensional torus X × H inside the torus, whose staircase cycles (`_staircase`) are
    cycles of the whole torus."""
    n = math.prod(dims)
    coords = np.array(np.unravel_index(np.arange(n), dims))
    axes = [a for a, size in enumerate(dims) if size > 1]

    def moved(axis: int, to: np.ndarray) -> np.ndarray:
        c = coords.copy()
        c[axis] = to
        return np.ravel_multi_index(tuple(c), dims)

    if len(axes) < 2:
        return [moved(a, (coords[a] + 1) % dims[a]) for a in axes]
    x = axes[0]
    rest = [1 if a == x else size for a, size in enumerate(dims)]
    on_rest = coords.copy()
    on_rest[x] = 0
    place = np.ravel_multi_index(tuple(on_rest), rest)  # every server's position in `rest`
    step = moved(x, (coords[x] + 1) % dims[x])
    out: list[np.ndarray] = []
    for h in _plus_cycles(rest)[:2]:
        along = np.empty(len(h), dtype=np.int64)
        along[_one_cycle(h)] = np.arange(len(h))  # position on H of every index of `rest`
        c = np.array(np.unravel_index(h[place], rest))  # the next place on H ...
        c[x] = coords[x]  # ... at the same coordinate in X
        out += _staircase(
            step, np.ravel_multi_index(tuple(c), dims), coords[x], along[place], dims[x], len(h)
        )
    return out[: MAX_RINGS // 2]


def _staircase(
    step_x: np.ndarray, step_h: np.ndarray, x: np.ndarray, h: np.ndarray, a: int, m: int
) -> list[np.ndarray]:
    """Hamiltonian cycles of a two-dimensional directed torus of sizes a × m whose nodes are at
    (x, h) and step to `step_x` or `step_h`: a pair that splits the links between them where one
    is found, else up to four single cycles; none where a and m are coprime (or after
    `STAIRCASE_CHECKS` rules).

    A rule D, a set of diagonals k = (x + h) mod gcd(a, m), has the nodes on those diagonals
    step in h and the others in x. A node of diagonal k has both its predecessors on diagonal
    k − 1, which step alike, so every node has exactly one predecessor and the steps form
    cycles; a rule is kept where they form one. D and its complement use disjoint links."""
    g = math.gcd(a, m)
    n = len(x)
    diagonal = (x + h) % g
    columns = np.arange(n)
    steps = np.stack([step_x, step_h])
    found: dict[tuple[int, ...], np.ndarray | None] = {}

    def cycle(rule: tuple[int, ...]) -> np.ndarray | None:
        if rule not in found:
            nxt = steps[np.asarray(rule)[diagonal], columns]
            graph = sp.csr_array((np.ones(n), (columns, nxt)), shape=(n, n))
            found[rule] = nxt if connected_components(graph, directed=False)[0] == 1 else None
        return found[rule]

    cycles: list[np.ndarray] = []
    rules = (r for r in product((0, 1), repeat=g) if 0 < sum(r) < g)  # steps both ways
    for rule in islice(rules, STAIRCASE_CHECKS):
        first = cycle(rule)
        if first is None:
            continue
        second = cycle(tuple(1 - r for r in rule))
        if second is not None:
            return [first, second]
        if len(cycles) < 4:
            cycles.append(first)
    return cycles


def _one_cycle(nxt: np.ndarray) -> list[int]:
    """The cycle 0, nxt[0], nxt[nxt[0]], ... of a one-cycle permutation."""
    order = [0]
    for _ in range(len(nxt) - 1):
        order.append(int(nxt[order[-1]]))
    return order


def _short_pairs(
    topology: Topology, ranks: tuple[str, ...], hops: np.ndarray, h: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(sources, destinations, bandwidths) of the rank pairs at most h hops apart, the
    `NEIGHBOURS` nearest of each rank (lowest index at ties) where these connect all ranks, else
    all of them unless there are more than four times as many; a pair's bandwidth is its default
    route's narrowest link. None where there are too many."""
    n = len(ranks)
    src, dst = np.nonzero(hops <= h)
    near = np.argsort(np.where(hops <= h, hops, np.inf), axis=1, kind="stable")[:, :NEIGHBOURS]
    few_src = np.repeat(np.arange(n), near.shape[1])
    few_dst = near.ravel()
    ok = hops[few_src, few_dst] <= h
    if _connected(n, few_src[ok], few_dst[ok]):
        src, dst = few_src[ok], few_dst[ok]
    elif len(src) > 4 * NEIGHBOURS * n:
        return None
    routes = route(topology, ranks, src, dst, spread=False)
    narrowest = np.minimum.reduceat(topology.compiled.capacity[routes.links], routes.ptr[:-1])
    return routes.src, routes.dst, narrowest


def _fast_cycles(
    n: int, src: np.ndarray, dst: np.ndarray, bw: np.ndarray, budget: int
) -> tuple[list[list[int]], int]:
    """Hamiltonian cycles on the pairs src → dst (bandwidths `bw`), and the moves spent (at most
    `budget`). Levels: the bandwidths b at which the pairs of at least b connect all ranks, the
    two fastest and the slowest (all pairs). On each, greedy arc-disjoint cycles from up to
    `RESTARTS` seeded searches (`_disjoint_cycles`), the budget shared evenly; a level stops at
    its first search that finds nothing, leaving its budget to the next."""
    levels = [b for b in np.unique(bw)[::-1] if _connected(n, src[bw >= b], dst[bw >= b])]
    levels = levels[:2] + levels[-1:] if len(levels) > 3 else levels
    found: dict[tuple[int, ...], None] = {}
    spent = 0
    for i, level in enumerate(levels):
        keep = bw >= level
        succ: list[list[int]] = [[] for _ in range(n)]
        for u, v in zip(src[keep].tolist(), dst[keep].tolist(), strict=True):
            succ[u].append(v)
        share = (budget - spent) // (len(levels) - i)
        for seed in range(RESTARTS):
            cycles, moves = _disjoint_cycles(succ, random.Random(seed), share // (RESTARTS - seed))
            share -= moves
            spent += moves
            found.update((tuple(c), None) for c in cycles)
            if not cycles:
                break  # the pairs may have no such cycle: leave the budget to the others
    return [list(c) for c in found], spent


def _connected(n: int, src: np.ndarray, dst: np.ndarray) -> bool:
    """Whether the pairs src → dst connect all n ranks both ways (one strong component)."""
    graph = sp.csr_array((np.ones(len(src)), (src, dst)), shape=(n, n))
    return connected_components(graph, directed=True, connection="strong")[0] == 1


def _disjoint_cycles(succ: list[list[int]], rng: random.Random, budget: int) -> tuple[list[list[int]], int]:
    """Hamiltonian cycles on the arcs u → succ[u], arc-disjoint: each one found (`_hamiltonian`)
    is removed before the next is sought. Returns the cycles and the moves spent."""
    left = [list(s) for s in succ]
    cycles: list[list[int]] = []
    spent = 0
    while all(left) and spent < budget:
        cycle, moves = _hamiltonian(left, rng, budget - spent)
        spent += moves
        if cycle is None:
            break
        cycles.append(cycle)
        for u, v in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            left[u].remove(v)
    return cycles, spent


def _hamiltonian(succ: list[list[int]], rng: random.Random, budget: int) -> tuple[list[int] | None, int]:
    """A Hamiltonian cycle from rank 0 on the arcs u → succ[u], or None, and the moves spent:
    depth-first, stepping first to the rank with the fewest unvisited successors (random among
    ties), and backing off as soon as some rank (or rank 0, to close the cycle) has no possible
    predecessor left. Gives up after `budget` moves."""
    n = len(succ)
    free = [0] * n  # possible predecessors of each rank: unvisited ones and the path's end
    for out in succ:
        for v in out:
            free[v] += 1
    if min(free) == 0:
        return None, 0
    on = [False] * n
    on[0] = True
    path = [0]

    def options(u: int) -> list[int]:
        ahead = [v for v in succ[u] if not on[v]]
        ahead.sort(key=lambda v: (-sum(not on[w] for w in succ[v]), rng.random()))
        return ahead  # popped from the end: fewest onward steps first

    stack = [options(0)]
    moves = 0
    while stack:
        u = path[-1]
        if not stack[-1]:  # back off one rank
            stack.pop()
            if len(path) == 1:
                return None, moves
            v = path.pop()
            on[v] = False
            for x in succ[path[-1]]:
                if x != v:
                    free[x] += 1
            continue
        if moves >= budget:
            return None, moves
        v = stack[-1].pop()
        moves += 1
        dead = False
        for x in succ[u]:  # u leaves the end: its other successors lose a predecessor
            if x != v:
                free[x] -= 1
                dead |= free[x] == 0 and (not on[x] or x == 0)
        if dead:
            for x in succ[u]:
                if x != v:
                    free[x] += 1
            continue
        on[v] = True
        path.append(v)
        if len(path) == n:
            if 0 in succ[v]:
                return path, moves
            stack.append([])
        else:
            stack.append(options(v))
    return None, moves
