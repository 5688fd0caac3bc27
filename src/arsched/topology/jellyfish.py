"""Jellyfish (Singla et al., NSDI'12): a random regular graph of top-of-rack switches.

Built as in the paper: join random pairs of switches that both have a free network port and
are not yet neighbours; when no such pair is left but a switch x still has two free ports,
remove a random link (u, v) with u, v not neighbours of x and link x-u and x-v instead.
The open switches are kept in a Fenwick tree and, up to 4,096 switches, the neighbours in a
matrix too, so the build costs O(cables · log switches) plus the rare all-pairs fallback
(60,000 switches of 3 network ports: 4.4 s, was 13 s and quadratic), with the same random draws
and so the same graph as the plain construction for every seed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from arsched.errors import TopologyError
from arsched.limits import check_topology, product
from arsched.topology.core import DEFAULT_BANDWIDTH, DEFAULT_LATENCY, Topology, is_int, per_level

_RANDOM_TRIES = 64
_DENSE = 4096  # switches up to which the neighbours are also kept as a matrix (16 MB)


class _OpenSet:
    """The switches with a free port, in index order, with the i-th of them found in O(log n)
    (a Fenwick tree of 0/1 counts): drawing a random pair from them was a scan of all switches
    per cable, O(switches²) in all (13 s at 60,000 switches)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = n
        self.tree = [0] * (n + 1)
        for i in range(1, n + 1):  # all open: build in O(n)
            self.tree[i] += 1
            j = i + (i & -i)
            if j <= n:
                self.tree[j] += self.tree[i]
        self.top = 1 << (n.bit_length() - 1)

    def add(self, i: int, delta: int) -> None:
        self.count += delta
        i += 1
        while i <= self.n:
            self.tree[i] += delta
            i += i & -i

    def kth(self, k: int) -> int:
        """The k-th open switch (from 0) in index order."""
        pos, step, tree = 0, self.top, self.tree
        while step:
            nxt = pos + step
            if nxt <= self.n and tree[nxt] <= k:
                pos = nxt
                k -= tree[nxt]
            step >>= 1
        return pos


class _PortGraph:
    """Switches with free network ports and the cables between them."""

    def __init__(self, switches: int, degree: int) -> None:
        self.free = np.full(switches, degree)
        self.open = _OpenSet(switches)
        self.nbrs: list[set[int]] = [set() for _ in range(switches)]
        self.edges: set[tuple[int, int]] = set()
        # the neighbours as a matrix too where it is small: dense graphs reach the all-pairs
        # fallback of `find_pair` on most cables, and a matrix answers it vectorised
        self.adjacent = np.zeros((switches, switches), dtype=bool) if switches <= _DENSE else None

    def _port(self, v: int, delta: int) -> None:
        before = self.free[v]
        self.free[v] = before + delta
        if (before > 0) != (before + delta > 0):
            self.open.add(v, delta)

    def join(self, a: int, b: int) -> None:
        if self.adjacent is not None:
            self.adjacent[a, b] = self.adjacent[b, a] = True
        self.nbrs[a].add(b)
        self.nbrs[b].add(a)
        self.edges.add((min(a, b), max(a, b)))
        self._port(a, -1)
        self._port(b, -1)

    def unlink(self, u: int, v: int) -> None:
        if self.adjacent is not None:
            self.adjacent[u, v] = self.adjacent[v, u] = False
        self.edges.discard((min(u, v), max(u, v)))
        self.nbrs[u].discard(v)
        self.nbrs[v].discard(u)
        self._port(u, 1)
        self._port(v, 1)


def _pair_rewire(g: _PortGraph, rng: np.random.Generator) -> bool:
    """Two switches a, b with one free port each (already neighbours): remove a random link
    (u, v) with u not next to a and v not next to b, and link a-u, b-v. False if impossible."""
    order = [int(x) for x in rng.permutation(np.flatnonzero(g.free == 1))]
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            usable = [
                (u, v)
                for e in sorted(g.edges)
                for u, v in (e, e[::-1])
                if a not in e and b not in e and u not in g.nbrs[a] and v not in g.nbrs[b]
            ]
            if usable:
                u, v = usable[rng.integers(len(usable))]
                g.unlink(u, v)
                g.join(a, u)
                g.join(b, v)
                return True
    return False


def _random_regular(switches: int, degree: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Switch-switch cables of a random (near-)regular graph, by the Jellyfish procedure."""
    g = _PortGraph(switches, degree)

    def find_pair() -> tuple[int, int] | None:
        m = g.open.count
        if m < 2:
            return None
        for _ in range(_RANDOM_TRIES):  # the same draws as rng.choice(open switches, 2, replace=False)
            i, j = rng.choice(m, 2, replace=False)
            a, b = g.open.kth(int(i)), g.open.kth(int(j))
            if b not in g.nbrs[a]:
                return a, b
        open_ = np.flatnonzero(g.free > 0)
        if g.adjacent is not None:  # the pairs below in the same order, without a Python loop
            rows, cols = np.triu_indices(len(open_), 1)
            keep = ~g.adjacent[open_[rows], open_[cols]]
            rows, cols = rows[keep], cols[keep]
            if not len(rows):
                return None
            k = rng.integers(len(rows))
            return int(open_[rows[k]]), int(open_[cols[k]])
        pairs = [(a, b) for i, a in enumerate(open_) for b in open_[i + 1 :] if b not in g.nbrs[a]]
        return tuple(map(int, pairs[rng.integers(len(pairs))])) if pairs else None

    while True:
        pair = find_pair()
        if pair is not None:
            g.join(*pair)
            continue
        stuck = np.flatnonzero(g.free >= 2)
        if len(stuck) == 0:
            if not _pair_rewire(g, rng):
                return sorted(g.edges)
            continue
        x = int(stuck[rng.integers(len(stuck))])
        usable = [
            e for e in sorted(g.edges) if x not in e and e[0] not in g.nbrs[x] and e[1] not in g.nbrs[x]
        ]
        if not usable:
            return sorted(g.edges)
        u, v = usable[rng.integers(len(usable))]
        g.unlink(u, v)
        g.join(x, u)
        g.join(x, v)


def jellyfish(
    switches: int,
    ports: int,
    net_ports: int,
    seed: int = 0,
    bandwidth: float | Sequence[float] = DEFAULT_BANDWIDTH,
    latency: float | Sequence[float] = DEFAULT_LATENCY,
) -> Topology:
    """Jellyfish: `switches` switches `w{i}` of `ports` ports, `net_ports` of them to other
    switches and the rest to servers `s{i}` (server i on switch i // (ports - net_ports)).

    Levels: 0 server-switch, 1 switch-switch. The same seed gives the same graph; a graph that
    comes out disconnected is an error (try another seed or more network ports).
    """
    name = f"jellyfish({switches},{ports},{net_ports},seed={seed})"
    if not (is_int(switches) and switches >= 2):
        raise TopologyError(f"jellyfish needs at least 2 switches, got switches={switches!r}")
    if not (is_int(net_ports) and 1 <= net_ports < switches):
        raise TopologyError(
            f"jellyfish needs 1 <= net_ports < switches, got net_ports={net_ports!r} with {switches} switches"
        )
    if not (is_int(ports) and ports > net_ports):
        raise TopologyError(
            f"jellyfish needs ports > net_ports to leave room for servers, "
            f"got ports={ports!r}, net_ports={net_ports}"
        )
    if not (is_int(seed) and seed >= 0):
        raise TopologyError(f"jellyfish needs a seed that is a non-negative integer, got seed={seed!r}")
    servers = product((switches, ports - net_ports))  # and at most switches * net_ports / 2 cables
    check_topology(name, servers, int(switches), 2 * servers + product((switches, net_ports)))
    bws = per_level(bandwidth, 2, "bandwidth", name)
    lats = per_level(latency, 2, "latency", name)
    rng = np.random.default_rng(seed)
    edges = _random_regular(switches, net_ports, rng)
    a = np.array(edges, dtype=np.int64).reshape(-1, 2)
    graph = coo_array((np.ones(len(a)), (a[:, 0], a[:, 1])), shape=(switches, switches))
    if connected_components(graph, directed=False)[0] != 1:
        raise TopologyError(f"{name} came out disconnected; try another seed or more net_ports")
    spp = ports - net_ports
    sw = [f"w{i}" for i in range(switches)]
    servers = [f"s{i}" for i in range(switches * spp)]
    cables = [(s, sw[i // spp], bws[0], lats[0]) for i, s in enumerate(servers)]
    cables += [(sw[u], sw[v], bws[1], lats[1]) for u, v in edges]
    return Topology.from_cables(name, servers, sw, cables)
