"""Speed and values of the AllReduce bandwidth bound, side by side with a reference search.

The reference is the textbook way to compute the same bound (and ForestColl's approach):
binary search on the ratio, each test running one max flow per rank with networkx on float
capacities, to a relative tolerance of 1e-6. arsched's search runs Dinkelbach iterations over
scipy's integer max flow. Both run here, in one process, on the same topologies; the reference
is skipped where it would take minutes. ForestColl's published times (its own Python, its own
machine) are listed for orientation only: 1.7 s on BCube(4,2), 12.9 s on DCell(3,2).

Run: python benchmarks/bench_bounds.py [--quick]
"""

from __future__ import annotations

import sys
import time

import networkx as nx

from arsched.bounds import allgather_cut
from arsched.topology import parse_spec

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _table import markdown, publish

CASES = [
    ("bcube:n=4,k=1", 64),
    ("bcube:n=4,k=2", 64),
    ("dcell:n=4,k=1", 64),
    ("dcell:n=3,k=2", 160),
    ("torus:dims=4x4", 64),
    ("torus:dims=8x8x8", 0),
    ("fattree:k=4", 64),
    ("fattree:k=8", 160),
    ("fattree:k=16", 0),
    ("jellyfish:switches=16,ports=4,net_ports=3,seed=1", 64),
    ("jellyfish:switches=64,ports=8,net_ports=5,seed=1", 0),
]


def reference_ratio(topo, tol: float = 1e-6) -> float:
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


def main(quick: bool = False) -> None:
    rows = []
    for spec, ref_limit in CASES:
        topo = parse_spec(spec)
        n = len(topo.servers)
        if quick and n > 200:
            continue
        t0 = time.perf_counter()
        cut = allgather_cut(topo)
        ours = time.perf_counter() - t0
        bw = topo.links[0].bandwidth
        value = 2 * cut.seconds_per_byte * bw  # AllReduce bound in units of M/B
        ref_t, agree = "—", "—"
        if n <= ref_limit and not quick:
            t0 = time.perf_counter()
            ref = reference_ratio(topo)
            ref_t = time.perf_counter() - t0
            agree = f"{abs(2 * ref / n * bw - value) / value:.1e}"
            ref_t = f"{ref_t:.2f} s ({ref_t / ours:.0f}×)"
        rows.append(
            [
                topo.name,
                n,
                len(topo.nodes),
                f"{value:.4f}",
                cut.maxflows,
                f"{ours * 1e3:.1f} ms",
                ref_t,
                agree,
            ]
        )
    publish(
        "AllReduce bandwidth bound",
        "AllReduce bound in units of M/B (unit link bandwidth B), arsched's time, and the reference "
        "binary search (networkx max flows) in the same run with its slowdown relative to arsched "
        "and the relative difference of the two values. ForestColl reports 1.7 s (BCube(4,2)) and "
        "12.9 s (DCell(3,2)) on its own machine. Produced by `benchmarks/bench_bounds.py`.",
        markdown(
            ["topology", "ranks", "nodes", "bound (M/B)", "max flows", "arsched", "reference", "rel. diff"],
            rows,
        ),
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
