"""Hand-written reference AllReduce schedules and a tiny independent interpreter, for the tests.

The builders follow the textbook algorithms directly (no arsched.algorithms): ring
reduce-scatter + all-gather over any rank order, a single parameter server, and recursive
doubling for a power-of-two number of ranks. Paths are left empty (the schedule then takes the
topology's default route) unless a `route` function is given; `bfs_route` gives fewest-hop paths
computed with networkx, independently of arsched's router.

`reference_violation` replays the design §3.3 semantics with Python multisets, as a third
opinion beside `validate` and `numeric_check`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

import networkx as nx

from arsched.collective import Schedule, Transfer
from arsched.topology import Topology, parse_spec

Route = Callable[[str, str], tuple[str, ...]]


@lru_cache(maxsize=64)
def topo(spec: str) -> Topology:
    """A topology from a spec, built once per test session."""
    return parse_spec(spec)


def bfs_route(topology: Topology) -> Route:
    """Fewest-hop paths from a plain networkx BFS (ties broken by networkx, not by arsched)."""
    g = nx.DiGraph()
    g.add_nodes_from(topology.nodes)
    g.add_edges_from((lk.src, lk.dst) for lk in topology.links)
    cache: dict[str, dict[str, list[str]]] = {}

    def route(src: str, dst: str) -> tuple[str, ...]:
        if src not in cache:
            cache[src] = nx.single_source_shortest_path(g, src)
        return tuple(cache[src][dst])

    return route


def _t(step: int, chunk: int, src: str, dst: str, op: str, route: Route | None) -> Transfer:
    return Transfer(step, chunk, src, dst, op, route(src, dst) if route else ())


def ring_transfers(
    ranks: Sequence[str], chunks_per_rank: int = 1, route: Route | None = None
) -> list[Transfer]:
    """Ring AllReduce over `ranks` in the given order, N * chunks_per_rank chunks.

    Reduce-scatter: in step t rank i adds its partial of block (i - t) into rank i+1.
    After N-1 steps rank i holds the full block (i + 1). All-gather: in step N-1+t rank i copies
    block (i + 1 - t) to rank i+1. Block b is chunks b*m .. b*m + m - 1 (m = chunks_per_rank).
    """
    n, m = len(ranks), chunks_per_rank
    out = []
    for t in range(n - 1):
        for i in range(n):
            block = (i - t) % n
            for c in range(block * m, block * m + m):
                out.append(_t(t, c, ranks[i], ranks[(i + 1) % n], "reduce", route))
    for t in range(n - 1):
        for i in range(n):
            block = (i + 1 - t) % n
            for c in range(block * m, block * m + m):
                out.append(_t(n - 1 + t, c, ranks[i], ranks[(i + 1) % n], "copy", route))
    return out


def ps_transfers(
    ranks: Sequence[str], num_chunks: int = 1, ps: str | None = None, route: Route | None = None
) -> list[Transfer]:
    """A single parameter server (default the first rank): every other rank reduces every
    chunk into it in step 0, and it copies every chunk back in step 1."""
    ps = ranks[0] if ps is None else ps
    others = [r for r in ranks if r != ps]
    out = [_t(0, c, r, ps, "reduce", route) for r in others for c in range(num_chunks)]
    out += [_t(1, c, ps, r, "copy", route) for r in others for c in range(num_chunks)]
    return out


def recursive_doubling_transfers(
    ranks: Sequence[str], num_chunks: int = 1, route: Route | None = None
) -> list[Transfer]:
    """Recursive doubling for N = 2^d ranks: in step k rank i and rank i XOR 2^k add their
    partial sums (over disjoint blocks of 2^k ranks) into each other, every chunk."""
    n = len(ranks)
    if n & (n - 1):
        raise ValueError(f"recursive doubling needs a power-of-two number of ranks, got {n}")
    out = []
    for k in range(n.bit_length() - 1):
        for i in range(n):
            j = i ^ (1 << k)
            out += [_t(k, c, ranks[i], ranks[j], "reduce", route) for c in range(num_chunks)]
    return out


def make(
    topology: Topology,
    ranks: Sequence[str],
    transfers: Sequence[Transfer],
    num_chunks: int,
    nbytes: float = 1e6,
    algorithm: str = "custom",
) -> Schedule:
    return Schedule.from_transfers(topology, ranks, nbytes, num_chunks, transfers, algorithm=algorithm)


def ring_allreduce(
    topology: Topology,
    ranks: Sequence[str],
    nbytes: float = 1e6,
    chunks_per_rank: int = 1,
    route: Route | None = None,
) -> Schedule:
    tr = ring_transfers(ranks, chunks_per_rank, route)
    return make(topology, ranks, tr, len(ranks) * chunks_per_rank, nbytes, "ring")


def ps_allreduce(
    topology: Topology,
    ranks: Sequence[str],
    nbytes: float = 1e6,
    num_chunks: int = 1,
    ps: str | None = None,
    route: Route | None = None,
) -> Schedule:
    return make(topology, ranks, ps_transfers(ranks, num_chunks, ps, route), num_chunks, nbytes, "ps")


def recursive_doubling_allreduce(
    topology: Topology,
    ranks: Sequence[str],
    nbytes: float = 1e6,
    num_chunks: int = 1,
    route: Route | None = None,
) -> Schedule:
    tr = recursive_doubling_transfers(ranks, num_chunks, route)
    return make(topology, ranks, tr, num_chunks, nbytes, "recursive-doubling")


def reference_violation(ranks: Sequence[str], num_chunks: int, transfers: Sequence[Transfer]) -> str | None:
    """The first semantic violation of design §3.3 (double-copy, copy-and-reduce, double-count,
    incomplete), or None if the transfers compute the AllReduce. Ranks/paths are not checked."""
    state = {(r, c): Counter({r: 1}) for r in ranks for c in range(num_chunks)}
    by_step: dict[int, list[Transfer]] = {}
    for t in transfers:
        by_step.setdefault(t.step, []).append(t)
    for step in sorted(by_step):
        rows = by_step[step]
        payloads = [Counter(state[(t.src, t.chunk)]) for t in rows]  # read at the start of the step
        copies = Counter((t.dst, t.chunk) for t in rows if t.op == "copy")
        if any(v > 1 for v in copies.values()):
            return "double-copy"
        if any(t.op == "reduce" and (t.dst, t.chunk) in copies for t in rows):
            return "copy-and-reduce"
        for t, payload in zip(rows, payloads, strict=True):
            key = (t.dst, t.chunk)
            if t.op == "copy":
                state[key] = payload
            else:
                state[key].update(payload)
                if any(v > 1 for v in state[key].values()):
                    return "double-count"
    full = Counter(ranks)
    if any(buf != full for buf in state.values()):
        return "incomplete"
    return None
