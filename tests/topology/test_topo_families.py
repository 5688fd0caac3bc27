"""Every topology family against its formulas: node counts, port counts and hop diameters.

Expected values come from the published constructions (closed formulas, or a reference graph
built here from the paper's definition and measured with networkx), never from the code under
test.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import math
from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from arsched.errors import TopologyError
from arsched.topology import (
    SERVER,
    SWITCH,
    Topology,
    bcube,
    dcell,
    fattree,
    jellyfish,
    leafspine,
    load,
    ring,
    star,
    torus,
)

_REPO = Path(__file__).resolve().parents[2]
LINGJUN_CSV = (
    next(
        (
            p
            for p in (_REPO / "shared", _REPO.parent / "shared")
            if (p / "data" / "lingjun2023_topo.csv").is_file()
        ),
        _REPO.parent / "shared",
    )
    / "data"
    / "lingjun2023_topo.csv"
)


# ---- helpers -----------------------------------------------------------------------------------
def cable_graph(topo: Topology) -> nx.Graph:
    """The undirected graph of a topology's links, built directly from `topo.links`."""
    g = nx.Graph()
    g.add_nodes_from(topo.nodes)
    g.add_edges_from((lk.src, lk.dst) for lk in topo.links)
    return g


def router_server_diameter(topo: Topology) -> int:
    m = topo.router.hop_matrix(topo.servers)
    assert (m >= 0).all(), "some server pair is unreachable"
    return int(m.max())


def nx_server_diameter(g: nx.Graph, servers) -> int:
    servers = set(servers)
    best = 0
    for s in servers:
        lengths = nx.single_source_shortest_path_length(g, s)
        assert servers <= lengths.keys(), "some server pair is unreachable"
        best = max(best, max(lengths[t] for t in servers))
    return best


def assert_server_diameter(topo: Topology, expected: int) -> None:
    assert router_server_diameter(topo) == expected
    assert nx_server_diameter(cable_graph(topo), topo.servers) == expected


def undirected_edges(topo: Topology) -> set[frozenset[str]]:
    return {frozenset((lk.src, lk.dst)) for lk in topo.links}


def port_counts(topo: Topology) -> dict[str, int]:
    """Outgoing links per node, counted from `topo.links` (independent of `topo.ports`)."""
    out = Counter(lk.src for lk in topo.links)
    return {n: out.get(n, 0) for n in topo.nodes}


def assert_ports(topo: Topology, server_ports: int | None, switch_ports: int | None) -> None:
    counted = port_counts(topo)
    for node in topo.nodes:
        assert topo.ports(node) == counted[node]
    if server_ports is not None:
        assert {counted[s] for s in topo.servers} == {server_ports}
    if switch_ports is not None and topo.switches:
        assert {counted[w] for w in topo.switches} == {switch_ports}


# ---- BCube -----------------------------------------------------------------------------------
def bcube_reference_edges(n: int, k: int) -> set[frozenset[str]]:
    """BCube per Guo et al.: the level-l switch joins servers whose addresses differ in digit l.

    Servers are numbered by their base-n address a_k..a_0; the level-l switch is numbered by
    the address with digit l removed (read in base n, lower digits less significant).
    """
    edges = set()
    for digits in itertools.product(range(n), repeat=k + 1):  # digits[l] = a_l
        server = sum(d * n**pos for pos, d in enumerate(digits))
        for level in range(k + 1):
            rest = [d for pos, d in enumerate(digits) if pos != level]
            switch = sum(d * n**pos for pos, d in enumerate(rest))
            edges.add(frozenset((f"s{server}", f"w{level}_{switch}")))
    return edges


BCUBE_PARAMS = [(2, 0), (3, 0), (2, 1), (4, 1), (5, 1), (2, 2), (3, 2), (4, 2), (2, 3), (3, 3)]


@pytest.mark.parametrize(("n", "k"), BCUBE_PARAMS)
def test_bcube_counts_ports_and_diameter(n, k):
    t = bcube(n, k)
    assert len(t.servers) == n ** (k + 1)
    assert len(t.switches) == (k + 1) * n**k
    assert len(t.links) == 2 * (k + 1) * n ** (k + 1)
    assert_ports(t, server_ports=k + 1, switch_ports=n)
    # one server-switch-server detour per differing address digit
    assert_server_diameter(t, 2 * (k + 1))


@pytest.mark.parametrize(("n", "k"), [(2, 1), (3, 1), (4, 1), (2, 2), (3, 2)])
def test_bcube_wiring_matches_paper(n, k):
    assert undirected_edges(bcube(n, k)) == bcube_reference_edges(n, k)


def test_bcube_switch_neighbours_differ_in_one_digit():
    n, k = 3, 2
    t = bcube(n, k)
    g = cable_graph(t)
    for w in t.switches:
        level = int(w[1:].split("_")[0])
        addrs = [np.base_repr(int(s[1:]), n).zfill(k + 1)[::-1] for s in g[w]]
        assert len(addrs) == n
        assert sorted(a[level] for a in addrs) == [str(d) for d in range(n)]
        assert len({a[:level] + a[level + 1 :] for a in addrs}) == 1


@pytest.mark.parametrize(("n", "k"), [(1, 1), (0, 0), (2, -1), (2.0, 1), ("4", 1)])
def test_bcube_bad_parameters(n, k):
    with pytest.raises(TopologyError):
        bcube(n, k)


# ---- DCell -----------------------------------------------------------------------------------
def dcell_t(n: int, k: int) -> int:
    t = n
    for _ in range(k):
        t = t * (t + 1)
    return t


def dcell_reference(n: int, k: int) -> nx.Graph:
    """DCell(n, k) by BuildDCells of Guo et al. (SIGCOMM'08), nodes named like the package.

    Servers have addresses (a_k, ..., a_0) and uid = a_0 + sum_j a_j * t_{j-1}; server
    [i, j-1] of DCell_l links to [j, i] for every i < j. DCell_0 number m has switch w{m}.
    """
    t = [dcell_t(n, level) for level in range(k + 1)]

    def uid(addr: tuple[int, ...]) -> int:
        value = addr[-1]
        for pos, a in enumerate(reversed(addr[:-1]), start=1):  # a_1, a_2, ...
            value += a * t[pos - 1]
        return value

    def addr_of(u: int, level: int) -> tuple[int, ...]:
        if level == 0:
            return (u,)
        return (u // t[level - 1], *addr_of(u % t[level - 1], level - 1))

    g = nx.Graph()

    def build(prefix: tuple[int, ...], level: int) -> None:
        if level == 0:
            for a0 in range(n):
                s = uid((*prefix, a0))
                g.add_node(f"s{s}", kind=SERVER)
                g.add_node(f"w{s // n}", kind=SWITCH)
                g.add_edge(f"s{s}", f"w{s // n}")
            return
        g_l = t[level - 1] + 1
        for i in range(g_l):
            build((*prefix, i), level - 1)
        for i in range(t[level - 1]):
            for j in range(i + 1, g_l):
                n1 = (*prefix, i, *addr_of(j - 1, level - 1))
                n2 = (*prefix, j, *addr_of(i, level - 1))
                g.add_edge(f"s{uid(n1)}", f"s{uid(n2)}")

    build((), k)
    return g


DCELL_PARAMS = [(2, 0), (5, 0), (2, 1), (3, 1), (4, 1), (6, 1), (2, 2), (3, 2)]


@pytest.mark.parametrize(("n", "k"), DCELL_PARAMS)
def test_dcell_counts_and_ports(n, k):
    t = dcell(n, k)
    total = dcell_t(n, k)
    assert len(t.servers) == total
    assert len(t.switches) == total // n
    # cables: one per server to its switch, plus a perfect matching of servers per level >= 1
    assert len(t.links) == 2 * (total + k * total // 2)
    assert_ports(t, server_ports=k + 1, switch_ports=n)


@pytest.mark.parametrize(("n", "k"), DCELL_PARAMS)
def test_dcell_matches_reference_and_its_diameter(n, k):
    t = dcell(n, k)
    ref = dcell_reference(n, k)
    assert undirected_edges(t) == {frozenset(e) for e in ref.edges}
    ref_servers = [v for v, kind in ref.nodes(data="kind") if kind == SERVER]
    assert sorted(ref_servers) == sorted(t.servers)
    assert_server_diameter(t, nx_server_diameter(ref, ref_servers))


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_dcell1_joins_every_pair_of_dcell0_once(n):
    t = dcell(n, 1)
    cell = {s: int(s[1:]) // n for s in t.servers}
    between = Counter(
        frozenset((cell[lk.src], cell[lk.dst])) for lk in t.links if lk.src in cell and lk.dst in cell
    )
    assert set(between) == {frozenset(p) for p in itertools.combinations(range(n + 1), 2)}
    assert set(between.values()) == {2}  # one cable = two directed links per pair of cells


def test_dcell1_diameter_is_five_hops():
    # server -> switch -> server -> (level-1 link) -> server -> switch -> server
    for n in (3, 4, 5):
        assert router_server_diameter(dcell(n, 1)) == 5


@pytest.mark.parametrize(("n", "k"), [(1, 1), (2, -1), (3.0, 1)])
def test_dcell_bad_parameters(n, k):
    with pytest.raises(TopologyError):
        dcell(n, k)


def test_dcell_too_large_is_refused():
    with pytest.raises(TopologyError, match="too many"):
        dcell(8, 3)


# ---- fat-tree --------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fattree_counts_ports_and_diameter(k):
    t = fattree(k)
    assert len(t.servers) == k**3 // 4
    assert len(t.switches) == 5 * k**2 // 4
    # cables: k^3/4 host-edge, k^3/4 edge-agg, k^3/4 agg-core
    assert len(t.links) == 2 * 3 * k**3 // 4
    assert_ports(t, server_ports=1, switch_ports=k)
    assert_server_diameter(t, 6)


@pytest.mark.parametrize("k", [4, 6])
def test_fattree_tiers(k):
    t = fattree(k)
    g = cable_graph(t)
    h = k // 2
    tier = {"s": 0, "e": 1, "a": 2, "c": 3}
    pod_of = {w: int(w[1:].split("_")[0]) for w in t.switches if w[0] in "ea"}
    for w in t.switches:
        nbr_tiers = Counter(tier[v[0]] for v in g[w])
        if w[0] == "e":
            assert nbr_tiers == {0: h, 2: h}
            assert {pod_of[v] for v in g[w] if v[0] == "a"} == {pod_of[w]}
        elif w[0] == "a":
            assert nbr_tiers == {1: h, 3: h}
            assert {pod_of[v] for v in g[w] if v[0] == "e"} == {pod_of[w]}
        else:
            assert nbr_tiers == {2: k}
            assert sorted(pod_of[v] for v in g[w]) == list(range(k))  # one agg of every pod


@pytest.mark.parametrize("k", [0, 3, 5, -2, 4.0])
def test_fattree_bad_parameters(k):
    with pytest.raises(TopologyError):
        fattree(k)


# ---- tori and rings --------------------------------------------------------------------------
TORUS_DIMS = [
    (2,),
    (3,),
    (7,),
    (4, 4),
    (3, 5),
    (2, 3),
    (2, 2),
    (1, 6),
    (4, 1, 3),
    (2, 2, 2),
    (3, 3, 3),
    (2, 3, 4),
    (5, 2, 1, 2),
]


def torus_reference_edges(dims) -> set[frozenset[str]]:
    """Servers whose coordinates differ by +-1 (mod d) in exactly one dimension."""
    coords = list(itertools.product(*(range(d) for d in dims)))  # row-major, like s{i}
    index = {c: i for i, c in enumerate(coords)}
    edges = set()
    for c in coords:
        for axis, d in enumerate(dims):
            if d < 2:
                continue
            nb = list(c)
            nb[axis] = (nb[axis] + 1) % d
            edges.add(frozenset((f"s{index[c]}", f"s{index[tuple(nb)]}")))
    return edges


@pytest.mark.parametrize("dims", TORUS_DIMS)
def test_torus_counts_ports_and_diameter(dims):
    t = torus(dims)
    assert len(t.servers) == math.prod(dims)
    assert t.switches == ()
    ports = sum(2 if d >= 3 else 1 if d == 2 else 0 for d in dims)
    assert_ports(t, server_ports=ports, switch_ports=None)
    assert_server_diameter(t, sum(d // 2 for d in dims))
    assert undirected_edges(t) == torus_reference_edges(dims)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 11])
def test_ring(n):
    t = ring(n)
    assert len(t.servers) == n
    assert t.switches == ()
    assert_ports(t, server_ports=2 if n >= 3 else 1, switch_ports=None)
    assert_server_diameter(t, n // 2)
    assert t.name == f"ring({n})"


@pytest.mark.parametrize("dims", [(), (1,), (1, 1), (0, 4), (-3,), (2.5, 2)])
def test_torus_bad_dims(dims):
    with pytest.raises(TopologyError):
        torus(dims)


def test_torus_accepts_numpy_integers():
    assert torus(np.array([3, 4])) == torus((3, 4))


@pytest.mark.parametrize("n", [1, 0, -1, 4.0])
def test_ring_and_star_bad_sizes(n):
    with pytest.raises(TopologyError):
        ring(n)
    with pytest.raises(TopologyError):
        star(n)


# ---- switched two-tier ------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 8, 17])
def test_star(n):
    t = star(n)
    assert len(t.servers) == n
    assert len(t.switches) == 1
    assert_ports(t, server_ports=1, switch_ports=n)
    assert_server_diameter(t, 2)


@pytest.mark.parametrize(
    ("leaves", "spines", "per_leaf"),
    [(1, 1, 2), (1, 3, 5), (2, 1, 1), (2, 2, 3), (4, 2, 4), (3, 5, 2), (6, 3, 1)],
)
def test_leafspine(leaves, spines, per_leaf):
    t = leafspine(leaves, spines, per_leaf)
    assert len(t.servers) == leaves * per_leaf
    assert len(t.switches) == leaves + spines
    counted = port_counts(t)
    assert {counted[s] for s in t.servers} == {1}
    for w in t.switches:
        assert counted[w] == (per_leaf + spines if w.startswith("leaf") else leaves)
    assert_server_diameter(t, 4 if leaves > 1 else 2)


@pytest.mark.parametrize(("leaves", "spines", "per_leaf"), [(0, 1, 2), (1, 0, 2), (1, 1, 1), (2, 2, 0)])
def test_leafspine_bad_parameters(leaves, spines, per_leaf):
    with pytest.raises(TopologyError):
        leafspine(leaves, spines, per_leaf)


# ---- Jellyfish -------------------------------------------------------------------------------
JELLYFISH_PARAMS = [
    (16, 4, 3, 1),
    (10, 5, 3, 0),
    (12, 6, 4, 7),
    (9, 4, 3, 2),
    (20, 8, 5, 3),
    (7, 5, 4, 11),
    (30, 6, 3, 5),
]


def switch_degrees(t: Topology) -> dict[str, int]:
    sw = set(t.switches)
    deg = Counter(lk.src for lk in t.links if lk.src in sw and lk.dst in sw)
    return {w: deg.get(w, 0) for w in sw}


@pytest.mark.parametrize(("switches", "ports", "net_ports", "seed"), JELLYFISH_PARAMS)
def test_jellyfish_counts_and_degrees(switches, ports, net_ports, seed):
    t = jellyfish(switches, ports, net_ports, seed=seed)
    assert len(t.switches) == switches
    assert len(t.servers) == switches * (ports - net_ports)
    counted = port_counts(t)
    assert {counted[s] for s in t.servers} == {1}
    degrees = switch_degrees(t)
    assert max(degrees.values()) <= net_ports
    for w in t.switches:
        assert counted[w] == degrees[w] + (ports - net_ports)  # ports - net_ports servers each
    cables = sum(degrees.values()) // 2
    assert switches * net_ports // 2 - 1 <= cables <= switches * net_ports // 2
    assert nx.is_connected(cable_graph(t))


# regression: these once ended with four mutually adjacent switches holding one free port each
@pytest.mark.parametrize(
    ("switches", "net_ports", "seed"), [(11, 8, 17), (12, 8, 37), (18, 8, 28), (21, 8, 9)]
)
def test_jellyfish_leaves_at_most_one_port_free(switches, net_ports, seed):
    t = jellyfish(switches, net_ports + 1, net_ports, seed=seed)
    cables = sum(switch_degrees(t).values()) // 2
    assert cables >= switches * net_ports // 2 - 1


def test_jellyfish_is_reproducible_and_seed_dependent():
    a = jellyfish(14, 5, 3, seed=42)
    b = jellyfish(14, 5, 3, seed=42)
    assert a == b
    assert a.links == b.links
    variants = {jellyfish(14, 5, 3, seed=s).links for s in range(6)}
    assert len(variants) > 1


@pytest.mark.parametrize(
    ("switches", "ports", "net_ports"),
    [(4, 6, 4), (4, 6, 5), (5, 3, 3), (5, 3, 4), (1, 4, 1), (6, 4, 0)],
)
def test_jellyfish_impossible_parameters(switches, ports, net_ports):
    with pytest.raises(TopologyError, match="jellyfish"):
        jellyfish(switches, ports, net_ports)


def test_jellyfish_disconnected_is_an_error():
    # with one network port per switch, the switches form a matching: never connected for 4+
    with pytest.raises(TopologyError, match="disconnected"):
        jellyfish(6, 3, 1, seed=0)


# ---- per-level bandwidth and latency --------------------------------------------------------
def by_level(topo: Topology, level_of) -> dict[int, set[tuple[float, float]]]:
    out: dict[int, set[tuple[float, float]]] = {}
    for lk in topo.links:
        out.setdefault(level_of(lk.src, lk.dst), set()).add((lk.bandwidth, lk.latency))
    return out


def test_fattree_per_level_bandwidth_and_latency():
    t = fattree(4, bandwidth=[1, 2, 3], latency=[1e-6, 2e-6, 3e-6])
    level = {frozenset("se"): 0, frozenset("ea"): 1, frozenset("ac"): 2}
    got = by_level(t, lambda u, v: level[frozenset((u[0], v[0]))])
    assert got == {0: {(1.0, 1e-6)}, 1: {(2.0, 2e-6)}, 2: {(3.0, 3e-6)}}


def test_bcube_per_level_bandwidth():
    t = bcube(3, 2, bandwidth=[10, 20, 30], latency=[0, 1, 2])
    got = by_level(t, lambda u, v: int((u if u[0] == "w" else v)[1:].split("_")[0]))
    assert got == {0: {(10.0, 0.0)}, 1: {(20.0, 1.0)}, 2: {(30.0, 2.0)}}


def test_dcell_per_level_bandwidth():
    n, k = 2, 2
    t = dcell(n, k, bandwidth=[1, 2, 3])
    sizes = [dcell_t(n, level) for level in range(k + 1)]

    def level_of(u: str, v: str) -> int:
        if u[0] == "w" or v[0] == "w":
            return 0
        a, b = int(u[1:]), int(v[1:])
        # the lowest level l whose DCell_l contains both ends
        return next(lv for lv in range(k + 1) if a // sizes[lv] == b // sizes[lv])

    got = by_level(t, level_of)
    assert {lv: {bw for bw, _ in vals} for lv, vals in got.items()} == {0: {1}, 1: {2}, 2: {3}}


def test_torus_per_dimension_bandwidth():
    dims = (3, 4)
    t = torus(dims, bandwidth=[5, 7])
    coords = {f"s{i}": c for i, c in enumerate(itertools.product(range(3), range(4)))}
    got = by_level(t, lambda u, v: next(ax for ax in range(2) if coords[u][ax] != coords[v][ax]))
    assert {lv: {bw for bw, _ in vals} for lv, vals in got.items()} == {0: {5}, 1: {7}}


def test_leafspine_and_jellyfish_per_level_bandwidth():
    t = leafspine(3, 2, 2, bandwidth=[1, 9])
    got = by_level(t, lambda u, v: int(SERVER not in (t.kind(u), t.kind(v))))
    assert {lv: {bw for bw, _ in vals} for lv, vals in got.items()} == {0: {1}, 1: {9}}
    j = jellyfish(8, 5, 3, seed=0, bandwidth=[4, 6])
    got = by_level(j, lambda u, v: int(SERVER not in (j.kind(u), j.kind(v))))
    assert {lv: {bw for bw, _ in vals} for lv, vals in got.items()} == {0: {4}, 1: {6}}


@pytest.mark.parametrize(
    "build",
    [
        lambda: fattree(4, bandwidth=[1, 2]),
        lambda: fattree(4, latency=[1, 2, 3, 4]),
        lambda: bcube(2, 1, bandwidth=[1, 2, 3]),
        lambda: dcell(2, 1, bandwidth=[1]),
        lambda: torus((3, 3), bandwidth=[1, 2, 3]),
        lambda: leafspine(2, 2, 2, latency=[1e-6]),
        lambda: jellyfish(8, 5, 3, bandwidth=[1, 2, 3]),
        lambda: fattree(4, bandwidth=[]),
    ],
)
def test_wrong_number_of_levels(build):
    with pytest.raises(TopologyError, match="level"):
        build()


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_family_with_bad_bandwidth(bad):
    with pytest.raises(TopologyError):
        fattree(4, bandwidth=bad)
    with pytest.raises(TopologyError):
        star(3, bandwidth=bad)


# ---- host list (Alibaba Lingjun 2023) --------------------------------------------------------
@pytest.fixture(scope="module")
def lingjun_rows() -> list[dict[str, str]]:
    if not LINGJUN_CSV.is_file():
        pytest.skip(f"{LINGJUN_CSV} is not available")
    with LINGJUN_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def lingjun(lingjun_rows) -> Topology:
    return load(LINGJUN_CSV)


def test_hostlist_counts(lingjun, lingjun_rows):
    assert len(lingjun_rows) == 847
    assert len(lingjun.servers) == len({r["ip"] for r in lingjun_rows}) == 847
    expected_switches = sum(len({r[col] for r in lingjun_rows}) for col in ("ASW", "PSW", "DSW"))
    assert len(lingjun.switches) == expected_switches
    cables = (
        len(lingjun_rows)
        + len({(r["ASW"], r["PSW"]) for r in lingjun_rows})
        + len({(r["PSW"], r["DSW"]) for r in lingjun_rows})
    )
    assert len(lingjun.links) == 2 * cables
    assert lingjun.name == LINGJUN_CSV.stem


def test_hostlist_hosts_have_one_port_to_their_asw(lingjun, lingjun_rows):
    for r in lingjun_rows:
        assert lingjun.ports(r["ip"]) == 1
        assert lingjun.has_link(r["ip"], f"asw_{r['ASW']}")
        assert lingjun.kind(r["ip"]) == SERVER


def test_hostlist_paths(lingjun, lingjun_rows):
    by_asw: dict[str, list[str]] = {}
    for r in lingjun_rows:
        by_asw.setdefault(r["ASW"], []).append(r["ip"])
    asw, hosts = next((a, h) for a, h in sorted(by_asw.items()) if len(h) >= 2)
    assert lingjun.path(hosts[0], hosts[1]) == (hosts[0], f"asw_{asw}", hosts[1])
    # two hosts on different ToRs that share an aggregation switch: host-ASW-PSW-ASW-host
    psws = {a: {r["PSW"] for r in lingjun_rows if r["ASW"] == a} for a in by_asw}
    a, b = next((a, b) for a, b in itertools.combinations(sorted(by_asw), 2) if psws[a] & psws[b])
    p = lingjun.path(by_asw[a][0], by_asw[b][0])
    assert len(p) == 5
    assert p[2].startswith("psw_") and p[2][4:] in psws[a] & psws[b]


def test_hostlist_per_level_bandwidth(lingjun_rows):
    t = load(LINGJUN_CSV, bandwidth=[1, 2, 3])
    tier = {"asw": 1, "psw": 2, "dsw": 3}
    for lk in t.links:
        a, b = sorted(tier.get(x.split("_")[0], 0) for x in (lk.src, lk.dst))
        assert lk.bandwidth == {(0, 1): 1, (1, 2): 2, (2, 3): 3}[(a, b)]


# ---- jellyfish: the construction's cost ----------------------------------------------------------
def _cables_digest(t: Topology) -> str:
    cables = sorted((lk.src, lk.dst) for lk in t.links if lk.src.startswith("w") and lk.dst.startswith("w"))
    return hashlib.sha256(repr(cables).encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    ("switches", "ports", "net_ports", "seed", "digest"),
    [
        (16, 4, 3, 1, "51e9228c2d1e0cce"),
        (100, 9, 7, 2, "1925a214453d2a5e"),
        (40, 40, 39, 0, "5ec82d24d717974e"),  # complete: the all-pairs fallback on most cables
        (300, 32, 31, 5, "bc69ea21e902d1e7"),
        (2000, 10, 8, 3, "4ed769aec45c97e2"),
    ],
)
def test_jellyfish_graphs_are_those_of_the_quadratic_construction(switches, ports, net_ports, seed, digest):
    """The same cables as before the open switches were kept in a tree (digests of the earlier
    construction's output)."""
    assert _cables_digest(jellyfish(switches, ports, net_ports, seed=seed)) == digest


def test_jellyfish_does_not_scan_every_switch_per_cable(monkeypatch):
    """Drawing a pair scanned all switches for the open ones on every cable: O(switches²), 13 s
    at 60,000 switches. Now a scan happens only where random draws fail (the end of the build)."""
    scans = []
    real = np.flatnonzero
    monkeypatch.setattr(np, "flatnonzero", lambda a: scans.append(len(a)) or real(a))
    t = jellyfish(2000, 10, 8, seed=3)
    assert len(t.links) == 2 * (2000 * 2 + 8000)
    assert sum(n == 2000 for n in scans) < 50
