"""Speed and values of the AllReduce bandwidth bound: arsched's search with its shortcuts, the
plain search it replaces, and a textbook reference, side by side in one run.

arsched's search runs Dinkelbach iterations over scipy's integer max flow. Its shortcuts (an
arborescence certificate at the best single-node cut, twin ranks sharing their max-flow tests)
return the plain search's very cut and value; the plain search (`shortcuts=False`) runs one max
flow per rank and round. The reference is the textbook way to compute the same bound (and
ForestColl's approach): binary search on the ratio, each test running one max flow per rank with
networkx on float capacities, to a relative tolerance of 1e-6; it is skipped where it would take
minutes. ForestColl's published times (its own Python, its own machine) are listed for
orientation only: 1.7 s on BCube(4,2), 12.9 s on DCell(3,2).

Run: python benchmarks/bench_bounds.py [--quick] [--repeat R]
"""

from __future__ import annotations

import argparse
import sys
import time

import networkx as nx
import numpy as np

from arsched.bounds import allgather_cut
from arsched.topology import Topology, parse_spec, ring

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish


def one_way_ring(n: int) -> Topology:
    """A ring of n servers whose links all run one way (s_i -> s_{i+1})."""
    t = ring(n)
    nxt = {f"s{i}": f"s{(i + 1) % n}" for i in range(n)}
    return Topology(
        f"one-way-ring({n})",
        [(v, t.kind(v)) for v in t.nodes],
        [lk for lk in t.links if nxt[lk.src] == lk.dst],
    )


# (name or spec, builder, largest rank count for the plain search, for the reference)
CASES: list[tuple[str, object, int, int]] = [
    ("fattree:k=8", None, 10**9, 160),
    ("fattree:k=16", None, 10**9, 0),
    ("fattree:k=24", None, 10**9, 0),
    ("fattree:k=40", None, 0, 0),
    ("leafspine:leaves=16,spines=4,servers_per_leaf=16,bandwidth=100Gbps/25Gbps", None, 10**9, 0),
    ("leafspine:leaves=16,spines=2,servers_per_leaf=16,bandwidth=100Gbps/10Gbps", None, 10**9, 0),
    ("jellyfish:switches=16,ports=4,net_ports=3,seed=1", None, 10**9, 64),
    ("jellyfish:switches=64,ports=8,net_ports=5,seed=1", None, 10**9, 0),
    ("jellyfish:switches=400,ports=12,net_ports=8,seed=1", None, 10**9, 0),
    ("bcube:n=4,k=1", None, 10**9, 64),
    ("bcube:n=4,k=2", None, 10**9, 64),
    ("bcube:n=8,k=2", None, 10**9, 0),
    ("dcell:n=4,k=1", None, 10**9, 64),
    ("dcell:n=3,k=2", None, 10**9, 160),
    ("dcell:n=4,k=2", None, 10**9, 0),
    ("torus:dims=4x4", None, 10**9, 64),
    ("torus:dims=8x8x8", None, 10**9, 0),
    ("torus:dims=16x16x16", None, 10**9, 0),
    ("ring:n=64", None, 10**9, 0),
    ("one-way ring of 64", lambda: one_way_ring(64), 10**9, 0),
]


def reference_ratio(topo: Topology, tol: float = 1e-6) -> float:
    """max_S |S∩R|/egress(S) by binary search with networkx max flows (float capacities)."""
    g = nx.DiGraph()
    for lk in topo.links:
        g.add_edge(lk.src, lk.dst, capacity=lk.bandwidth)
    ranks = list(topo.servers)
    n = len(ranks)
    lo, hi = 0.0, n / min(lk.bandwidth for lk in topo.links)

    def feasible(x: float) -> bool:  # every S: egress(S) >= |S∩R| / x
        h = g.copy()
        for r in ranks:
            h.add_edge("__src__", r, capacity=1.0 / x)
        need = n / x * (1 - 1e-12)
        return all(nx.maximum_flow_value(h, "__src__", v) >= need for v in ranks)

    while hi - lo > tol * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def build(spec: str, builder) -> Topology:
    topo = builder() if builder is not None else parse_spec(spec)
    topo.compiled  # noqa: B018 - compile outside the timings
    return topo


def timed(fn, repeat: int) -> tuple[float, object]:
    """Best wall time of `repeat` calls (each on a fresh topology: nothing cached) and the result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main(quick: bool = False, repeat: int = 3) -> None:
    rows = []
    for spec, builder, plain_limit, ref_limit in CASES:
        topo = build(spec, builder)
        n = len(topo.servers)
        if quick and n > 1100:
            continue
        fresh = [build(spec, builder) for _ in range(repeat)]
        fast_t, cut = timed(lambda fresh=fresh: allgather_cut(fresh.pop()), repeat)
        unit = float(np.min(topo.compiled.capacity))
        value = 2 * cut.seconds_per_byte * unit  # AllReduce bound in units of M/B (slowest link B)
        plain_t, plain_s, flows = "—", "—", "—"
        if n <= plain_limit:
            plain_runs = 1 if n > 1000 else repeat
            t, plain = timed(lambda topo=topo: allgather_cut(topo, shortcuts=False), plain_runs)
            assert plain.seconds_per_byte == cut.seconds_per_byte and plain.cut == cut.cut
            plain_t, plain_s = fmt(t), f"{t / fast_t:.1f}×"
            flows = f"{cut.maxflows} / {plain.maxflows}"
        else:
            flows = f"{cut.maxflows} / —"
        ref_t = "—"
        if n <= ref_limit and not quick:
            t0 = time.perf_counter()
            ref = reference_ratio(topo)
            t = time.perf_counter() - t0
            diff = abs(2 * ref / n * unit - value) / value
            ref_t = f"{fmt(t)} ({t / fast_t:.0f}×, diff {diff:.0e})"
        rows.append(
            [topo.name, n, len(topo.nodes), f"{value:.4f}", flows, fmt(fast_t), plain_t, plain_s, ref_t]
        )
    publish(
        "AllReduce bandwidth bound",
        "AllReduce bound in units of M/B (B the slowest link's bandwidth); max flows run by "
        "arsched's search with its shortcuts and by the plain search; their times (best of "
        "3, each on a fresh topology, compiled beforehand) and the plain search's slowdown; the "
        "reference binary search (networkx max flows) with its slowdown relative to arsched and "
        "the relative difference of the values. Both arsched searches return the same cut. "
        "ForestColl reports 1.7 s (BCube(4,2)) and 12.9 s (DCell(3,2)) on its own machine. "
        "Produced by `benchmarks/bench_bounds.py`.",
        markdown(
            [
                "topology",
                "ranks",
                "nodes",
                "bound (M/B)",
                "max flows (fast / plain)",
                "arsched",
                "plain search",
                "plain / arsched",
                "reference",
            ],
            rows,
        ),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="skip networks over 1,100 ranks and the reference"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed calls per search (best is kept)")
    args = parser.parse_args()
    main(quick=args.quick, repeat=args.repeat)
